package model

import "github.com/tributarydb/tributary/node/labels"

// Batch is the samples of one series in a write, in client order.
type Batch struct {
	Labels []labels.Label
	Ts     []int64
	Vs     []float64
}

// RejectReason says why points were not stored (mirrors the public API's
// RejectReason, value for value).
type RejectReason int

// The reasons; see the proto RejectReason for their meaning.
const (
	RejectInvalidSeries RejectReason = iota + 1
	RejectLengthMismatch
	RejectTooOld
	RejectTooFarInFuture
	RejectInvalidValue
	RejectLimitExceeded

	// NumRejectReasons is one past the last reason: the length of arrays
	// indexed by RejectReason (index 0 is unused).
	NumRejectReasons
)

// String names a reason the way the public API does, e.g. "too_old".
func (r RejectReason) String() string {
	switch r {
	case RejectInvalidSeries:
		return "invalid_series"
	case RejectLengthMismatch:
		return "length_mismatch"
	case RejectTooOld:
		return "too_old"
	case RejectTooFarInFuture:
		return "too_far_in_future"
	case RejectInvalidValue:
		return "invalid_value"
	case RejectLimitExceeded:
		return "limit_exceeded"
	}
	return "unknown"
}

// Rejection describes rejected points of one batch. PointIndex is -1 when
// the whole batch is rejected.
type Rejection struct {
	BatchIndex, PointIndex int
	Reason                 RejectReason
	Message                string
	Points                 int64
}

// WriteResult reports what a write did. Accepted points are durable per the
// backend's sync policy when the write returns without error.
type WriteResult struct {
	Accepted, Rejected int64
	Rejections         []Rejection // the first MaxRejectionDetails
	// RejectedBy counts rejected points by reason (index: RejectReason).
	RejectedBy [NumRejectReasons]int64
}

// MaxRejectionDetails bounds WriteResult.Rejections.
const MaxRejectionDetails = 64

// Reject records rj: its points count as rejected (in total and by
// reason), and its details are kept while fewer than MaxRejectionDetails
// are. REQUIRES: rj.Reason is one of the reasons above.
func (r *WriteResult) Reject(rj Rejection) {
	r.Rejected += rj.Points
	r.RejectedBy[rj.Reason] += rj.Points
	if len(r.Rejections) < MaxRejectionDetails {
		r.Rejections = append(r.Rejections, rj)
	}
}
