package replicator

import (
	"github.com/tributarydb/tributary/replicator/internal/cursor"
)

// Stats is a snapshot of a Shipper.
type Stats struct {
	// Connected: a stream is open and welcomed; Target is its coordinator
	// (the last one tried when not connected).
	Connected   bool
	Target      string
	Coordinator string // the welcome's coordinator_id

	// AckedThrough is the cloud's acked_through (every sequence up to it
	// is held or a recorded gap); Released is how far the node may delete
	// (acknowledged or a local gap; >= AckedThrough).
	AckedThrough uint64
	Released     uint64
	NewestSealed uint64 // newest sealed segment of the node
	OpenSeq      uint64 // the node's open segment

	// Backlog: sealed segments not yet held by the cloud (nor given up as a
	// gap), and their bytes. LagBytes adds the open segment's bytes.
	// LagSeconds is now minus the newest point time of the oldest such
	// segment that holds points (0 when none).
	BacklogSegments int
	BacklogBytes    int64
	LagBytes        int64
	LagSeconds      float64
	// RetainedBytes is what the node keeps on disk for shipping (sealed
	// segments above Released, acknowledged or not): the measure the
	// budget applies to. WritesBlocked: WriteGate is refusing writes.
	RetainedBytes int64
	WritesBlocked bool

	// AnnouncedSeries counts series sent in announcements (each stream
	// announces every series once, then the new ones);
	// RegisteredThroughMs is the registration watermark the catalog last
	// recorded for the node (0: none yet).
	AnnouncedSeries     int64
	RegisteredThroughMs int64

	// Gaps, from the cursor: records (at most cursor.MaxGaps, the oldest
	// merged), and totals since the cursor was created. GapPoints counts
	// the points of gaps whose count is known; DroppedPoints those of
	// drop-oldest gaps. UnreportedGaps are not yet acknowledged by the
	// cloud.
	Gaps           []Gap
	GapSegments    uint64
	GapPoints      uint64
	DroppedPoints  uint64
	UnreportedGaps int
	// BackfilledGaps and BackfilledPoints: the gap records (BACKLOG_OVERFLOW,
	// and MISSING ones whose points the store held) whose points the cloud
	// acknowledged as backfilled from the node's store, and the points
	// those gaps declared (from the cursor, so they survive restarts).
	// UnrecoverableGaps and UnrecoverablePoints: MISSING gap records that
	// will never be backfilled (the store may lack their points, or their
	// count is unknown), and their known points.
	BackfilledGaps      int
	BackfilledPoints    uint64
	UnrecoverableGaps   int
	UnrecoverablePoints uint64
	// BackfillShortfallPoints counts, since Run started, points gaps
	// declared that their backfills did not ship: the node's retention (or
	// a store repair) dropped them before the backfill. The cloud counts
	// what it received.
	BackfillShortfallPoints uint64

	// Since Run started: segments acknowledged, their compressed bytes on
	// the wire and points; BytesPerPoint is ShippedBytes/ShippedPoints.
	ShippedSegments int64
	ShippedBytes    int64
	ShippedPoints   int64
	BytesPerPoint   float64
	// Sends counts segments sent (resends after a lost ack or a broken
	// stream included); Refusals, segments and gaps the cloud refused.
	Sends    int64
	Refusals int64
	// Runs the cloud asked to ship again because no live replica holds
	// them (reship), since Run started: ReshipRequests counts requests
	// (repeats included), ReshipsIgnored those that overlapped a run
	// already queued or found the queue full, ReshipsQueued the runs being
	// shipped again now, ReshipsUnavailable the runs or parts of runs
	// answered unavailable (the node cannot give them whole).
	// ReshippedFromWAL counts the WAL segment files and ReshippedRebuilt the
	// files rebuilt from the store that the cloud acknowledged, and
	// ReshippedBytes their compressed bytes.
	ReshipRequests     int64
	ReshipsIgnored     int64
	ReshipsQueued      int
	ReshipsUnavailable int64
	ReshippedFromWAL   int64
	ReshippedRebuilt   int64
	ReshippedBytes     int64
	// Sessions counts streams opened, SessionFailures those that ended
	// (every end is a failure: a healthy stream lasts until Run returns).
	Sessions        int64
	SessionFailures int64
	LastError       string
}

// Gap is a run of segments the edge will not ship (see cursor.Gap): it
// covers sequence numbers After+1..Through.
type Gap struct {
	After, Through uint64
	Reason         string // backlog_overflow, dropped, missing
	Segments       uint64
	Points         int64 // -1: unknown
	MinT, MaxT     int64
	Reported       bool
	Backfilled     bool // the cloud acknowledged its backfill from the node's store
	// Unrecoverable: a missing gap whose points the node's store may lack
	// (or whose count is unknown); never backfilled.
	Unrecoverable bool
}

// setGaps copies the gap records and totals from a cursor.
func (st *Stats) setGaps(c *cursor.State) {
	st.Gaps = st.Gaps[:0]
	st.UnreportedGaps = 0
	for _, g := range c.Gaps {
		st.Gaps = append(st.Gaps, Gap{After: g.After, Through: g.Through, Reason: g.Reason.String(), Segments: g.Segments,
			Points: g.Points, MinT: g.MinT, MaxT: g.MaxT, Reported: g.Reported, Backfilled: g.Backfilled, Unrecoverable: g.Unrecoverable})
		if !g.Reported {
			st.UnreportedGaps++
		}
		if g.Backfilled {
			st.BackfilledGaps++
			st.BackfilledPoints += uint64(max(g.Points, 0))
		}
		if g.Unrecoverable {
			st.UnrecoverableGaps++
			st.UnrecoverablePoints += uint64(max(g.Points, 0))
		}
	}
	st.GapSegments, st.GapPoints, st.DroppedPoints = c.GapSegments, c.GapPoints, c.DroppedPoints
}
