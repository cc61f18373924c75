package fleetbench

import (
	"context"
	"fmt"
	"math"
	"os"
	"sync"
	"time"

	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/wal"
)

// errGone is what reading a segment the edge already dropped returns.
var errGone = os.ErrNotExist

// edgeSource is a simulated edge: it stands in for a node's WAL behind the
// real replicator. Every Seal builds one WAL segment file in memory, byte
// for byte in the node/wal format a node writes by default (version 2:
// header, one compressed record of sensor samples, footer), so the coordinators verify, store and catalogue it exactly as
// they would a real edge's. Segments are dropped once the Shipper's
// RetainFrom passes them, as a node deletes acknowledged segments.
//
// Concurrency: safe for concurrent use (the Shipper's goroutine lists and
// reads while the generator seals).
type edgeSource struct {
	id     string
	keys   [][]byte // canonical label keys of the edge's series
	values []float64

	mu     sync.Mutex
	sealed []sealedSeg // ascending seq
	seq    uint64      // last sealed seq (0: none)
}

type sealedSeg struct {
	file []byte
	info wal.SegmentInfo
	at   time.Time // when it was sealed
}

// newEdgeSource makes edge id with series sensor series.
func newEdgeSource(id string, series int) *edgeSource {
	s := &edgeSource{id: id, values: make([]float64, series)}
	for i := range series {
		ls := labels.FromStrings("__name__", "fleet_temperature", "edge", id, "sensor", fmt.Sprintf("s%d", i))
		s.keys = append(s.keys, ls.AppendKey(nil))
		s.values[i] = 20 + float64(i)
	}
	return s
}

// Seal builds and seals the next segment: for each series, the points every
// interval in (from, to] (ms). It returns the segment's info.
func (s *edgeSource) Seal(from, to, intervalMs int64, at time.Time) (wal.SegmentInfo, error) {
	first := (from/intervalMs + 1) * intervalMs
	if first > to {
		return wal.SegmentInfo{}, fmt.Errorf("edge %s: no sample time in (%d, %d] at %d ms", s.id, from, to, intervalMs)
	}
	n := int((to-first)/intervalMs) + 1
	ts := make([]int64, n)
	for i := range ts {
		ts[i] = first + int64(i)*intervalMs
	}
	vs := make([]float64, n)
	var enc record.Encoder
	enc.SetKind(record.KindCompressed)
	for i, key := range s.keys {
		id := uint64(i + 1)
		enc.DefineSeries(id, key)
		for j := range vs {
			// A slow bounded wave, two decimals: compresses like sensor data.
			s.values[i] += math.Sin(float64(ts[j]/intervalMs+int64(i))) / 10
			vs[j] = math.Round(s.values[i]*100) / 100
		}
		enc.AddRun(id, ts, vs)
	}
	data := enc.AppendTo(nil)
	rec := wal.Record{Data: data, MinT: enc.MinT(), MaxT: enc.MaxT(), Points: enc.EncodedPoints()}

	s.mu.Lock()
	defer s.mu.Unlock()
	seq := s.seq + 1
	file, info, err := wal.EncodeSegmentVersion(wal.FormatV2, s.id, seq, s.seq, []wal.Record{rec})
	if err != nil {
		return wal.SegmentInfo{}, fmt.Errorf("edge %s: encode segment %d: %w", s.id, seq, err)
	}
	info.Sealed = true
	info.Created = at
	s.seq = seq
	s.sealed = append(s.sealed, sealedSeg{file: file, info: info, at: at})
	return info, nil
}

// Release drops the sealed segments below retainFrom.
func (s *edgeSource) Release(retainFrom uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := 0
	for i < len(s.sealed) && s.sealed[i].info.Seq < retainFrom {
		i++
	}
	if i > 0 {
		s.sealed = append(s.sealed[:0:0], s.sealed[i:]...)
	}
}

// Kept is the number of sealed segments still held.
func (s *edgeSource) Kept() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sealed)
}

// NodeID implements replicator.Source.
func (s *edgeSource) NodeID() string { return s.id }

// WALSegments implements replicator.Source: the sealed segments still held,
// then the open one (empty, not sealed).
func (s *edgeSource) WALSegments() []wal.SegmentInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]wal.SegmentInfo, 0, len(s.sealed)+1)
	for _, g := range s.sealed {
		out = append(out, g.info)
	}
	return append(out, wal.SegmentInfo{Seq: s.seq + 1, NodeID: s.id, PrevSeq: s.seq})
}

// ReadWALSegment implements replicator.Source.
func (s *edgeSource) ReadWALSegment(seq uint64) ([]byte, wal.SegmentInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.sealed {
		if g.info.Seq == seq {
			return g.file, g.info, nil
		}
	}
	return nil, wal.SegmentInfo{}, fmt.Errorf("edge %s: segment %d: %w", s.id, seq, errGone)
}

// ExportRange implements replicator.Source. A simulated edge has no store:
// its budget is never exceeded, so no gap is ever backfilled.
func (s *edgeSource) ExportRange(context.Context, int64, int64, func(labels.Labels, []int64, []float64) error) error {
	return fmt.Errorf("edge %s: simulated edges keep no store to backfill from", s.id)
}

// WALReplayFrom implements replicator.Source: nothing was ever flushed.
func (s *edgeSource) WALReplayFrom() uint64 { return 1 }
