package segment

import (
	"fmt"

	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/wal"
)

// Contents is what a segment file holds apart from its samples: its
// footer, the labels of its series by the file's ids, and the points its
// records hold.
type Contents struct {
	Info   wal.SegmentInfo
	Series map[uint64]labels.Labels
	Points int64
}

// Read verifies a whole segment file (wal.VerifySegment; name names it in
// errors) and decodes every record without keeping a sample, so that a
// reader can refuse a damaged file before it stores anything. A series
// may be defined more than once, with the same labels only; every run's
// series must be defined by then. accept, if not nil, checks (and may
// normalise) the labels of each series when first defined.
//
// Read checks neither the node the header names nor Points against the
// footer's count: the caller words those refusals.
func Read(name string, file []byte, accept func(labels.Labels) (labels.Labels, error)) (Contents, error) {
	return ReadRuns(name, file, accept, nil)
}

// ReadRuns is Read, and also calls fn, if not nil, with every run of
// points in file order, once its series is known to be defined (ts and vs
// are valid only during the call): a reader that keeps the points gets
// them in the same pass. The runs come before the whole file is verified:
// nothing may be stored from them before ReadRuns returns nil. An error
// of fn stops the read and is returned wrapped.
func ReadRuns(name string, file []byte, accept func(labels.Labels) (labels.Labels, error), fn func(id uint64, ts []int64, vs []float64) error) (Contents, error) {
	c := Contents{Series: map[uint64]labels.Labels{}}
	keys := map[uint64]string{} // canonical key by id, to check redefinitions
	var dec record.Decoder
	recNo := 0
	def := func(id uint64, key []byte) error {
		if prev, ok := keys[id]; ok {
			if prev != string(key) {
				return fmt.Errorf("series %d redefined with other labels", id)
			}
			return nil
		}
		ls, err := labels.DecodeKey(key)
		if err == nil && accept != nil {
			ls, err = accept(ls)
		}
		if err != nil {
			return fmt.Errorf("series %d: %w", id, err)
		}
		keys[id], c.Series[id] = string(key), ls
		return nil
	}
	run := func(id uint64, ts []int64, vs []float64) error {
		if _, ok := c.Series[id]; !ok {
			return fmt.Errorf("run of series %d, which the segment does not define", id)
		}
		c.Points += int64(len(ts))
		if fn != nil {
			return fn(id, ts, vs)
		}
		return nil
	}
	info, err := wal.VerifySegment(name, file, func(r wal.Record) error {
		recNo++
		if err := dec.Decode(r.Data, def, run); err != nil {
			return fmt.Errorf("record %d: %w", recNo, err)
		}
		return nil
	})
	c.Info = info
	return c, err
}
