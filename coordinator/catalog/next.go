package catalog

import "math"

// NextSeq returns one past the highest sequence number recorded for the
// edge: held, in a gap, or the watermark (1 when nothing is). A node that
// starts again without its WAL (restored from the cloud) numbers its next
// segment here, so that it collides with nothing the cloud recorded.
func (p EdgeProgress) NextSeq() uint64 {
	top := p.WatermarkSeq
	if n := len(p.Held); n > 0 {
		top = max(top, p.Held[n-1].LastSeq)
	}
	if n := len(p.Gaps); n > 0 {
		top = max(top, p.Gaps[n-1].ThroughSeq)
	}
	if top == math.MaxUint64 {
		return top
	}
	return top + 1
}
