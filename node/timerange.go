package node

import (
	"context"
	"fmt"
	"slices"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/internal/store"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// Which series had samples when.
//
// The listings restricted to a time range (backend.RangeLister) need to
// know, per series, when it had samples. The node already records that on
// disk, at no cost to ingest: every flush writes the series' hourly
// rollups, one rollup_1h key per series and UTC day it has samples in
// (partitionStart | seriesID | dayStart), each hour's aggregate carrying
// the times of its first and last sample; daily rollups do the same per
// day for 32-day packs and are kept longest. They are written in the same
// batch as the chunks, so they survive a restart exactly as the samples
// do, and retention drops them with their partitions. Samples not yet
// flushed are in the head, which is rebuilt from the WAL after a restart.
//
// A series has samples in [start, end] when the head holds one in it, or
// an hour of its hourly rollups has [firstT, lastT] overlapping it, or,
// for the part of the range older than the hourly retention, a day of its
// daily rollups does. The precision is the hour: a series whose samples
// in an hour are at :00 and :59 counts as having samples in between.
// Samples whose raw data expired but whose rollups are kept count: range
// queries can still read them from the rollups.
//
// Cost: one RocksDB iterator per listing and, for each candidate series
// not found in the head, one seek per 8-day partition of the range into
// rollup_1h (the prefix bloom filter skips the files without the series),
// plus one per 128 days into rollup_1d for the series not found when the
// range reaches past the hourly retention.

// withData returns the series of list that have samples in [start, end],
// in list's order. The head is asked first: a flush writes the store
// before it clears the head, so a sample moving from one to the other in
// between is found in the store.
func (n *Node) withData(list []*memSeries, start, end int64) ([]*memSeries, error) {
	found := make(map[uint64]bool, len(list))
	var pending []uint64
	for _, s := range list {
		if s.headHasData(start, end) {
			found[s.id] = true
		} else {
			pending = append(pending, s.id)
		}
	}
	// In key order, each seek lands near the last one.
	slices.Sort(pending)
	overlaps := func(a rollup.Agg) bool { return a.Count > 0 && a.LastT >= start && a.FirstT <= end }
	err := n.db.RollupsOfSeries(store.KindRollup1h, pending, rollup.BucketStart(start, rollup.Day), end, func(id uint64, day int64, val []byte) error {
		h, err := rollup.DecodeHourly(val, day)
		if err != nil {
			return fmt.Errorf("hourly rollups of series %d on %s: %w", id, fmtMs(day), err)
		}
		if slices.ContainsFunc(h.Hours[:], overlaps) {
			found[id] = true
			return store.ErrNextSeries
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Hourly rollups older than their retention are gone; the daily ones
	// may still be there.
	hourlyFrom := n.opts.Now().UnixMilli() - n.opts.Retention1h.Milliseconds() - rollup.Day
	if start < hourlyFrom {
		pending = slices.DeleteFunc(pending, func(id uint64) bool { return found[id] })
		err = n.db.RollupsOfSeries(store.KindRollup1d, pending, rollup.PackStart(start), min(end, hourlyFrom+rollup.Day), func(id uint64, pack int64, val []byte) error {
			d, err := rollup.DecodeDaily(val, pack)
			if err != nil {
				return fmt.Errorf("daily rollups of series %d from %s: %w", id, fmtMs(pack), err)
			}
			if slices.ContainsFunc(d.Days[:], overlaps) {
				found[id] = true
				return store.ErrNextSeries
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return slices.DeleteFunc(list, func(s *memSeries) bool { return !found[s.id] }), nil
}

// headHasData reports whether the head holds a sample of s in
// [start, end].
func (s *memSeries) headHasData(start, end int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.closed {
		if c.c.LastT() >= start && c.c.FirstT() <= end {
			return true
		}
	}
	if s.open.Len() > 0 && s.open.LastT() >= start && s.open.FirstT() <= end {
		return true
	}
	for _, o := range s.ooo {
		if o.t >= start && o.t <= end {
			return true
		}
	}
	return false
}

// seriesInRange selects the series matching ms (every series when ms is
// empty) that have samples in [start, end], sorted, at most limit
// (<= 0: no limit).
func (n *Node) seriesInRange(ms []*labels.Matcher, start, end int64, limit int) ([]*memSeries, error) {
	if n.closed.Load() {
		return nil, model.ErrClosed
	}
	var list []*memSeries
	if len(ms) == 0 {
		n.idxMu.RLock()
		list = make([]*memSeries, 0, len(n.byID))
		for _, s := range n.byID {
			list = append(list, s)
		}
		n.idxMu.RUnlock()
		slices.SortFunc(list, func(a, b *memSeries) int { return labels.Compare(a.lset, b.lset) })
	} else {
		if err := (&model.Query{Matchers: ms, Mode: model.ModeRaw}).Validate(); err != nil {
			return nil, err
		}
		var err error
		if list, err = n.selectSeries(ms); err != nil {
			return nil, err
		}
	}
	out, err := n.withData(list, start, end)
	if err != nil {
		n.noteStoreErr(err) // a block that fails its checksum makes the store unhealthy
		return nil, err
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// SeriesInRange implements backend.RangeLister: Series restricted to the
// series with samples in [start, end] (see above for the precision).
func (n *Node) SeriesInRange(_ context.Context, ms []*labels.Matcher, start, end int64, limit int) ([]labels.Labels, error) {
	list, err := n.seriesInRange(ms, start, end, limit)
	if err != nil {
		return nil, err
	}
	out := make([]labels.Labels, len(list))
	for i, s := range list {
		out[i] = s.lset
	}
	return out, nil
}

// LabelNamesInRange implements backend.RangeLister.
func (n *Node) LabelNamesInRange(_ context.Context, ms []*labels.Matcher, start, end int64) ([]string, error) {
	list, err := n.seriesInRange(ms, start, end, 0)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range list {
		for _, l := range s.lset {
			seen[l.Name] = true
		}
	}
	return slices.Sorted(mapKeys(seen)), nil
}

// LabelValuesInRange implements backend.RangeLister.
func (n *Node) LabelValuesInRange(_ context.Context, name string, ms []*labels.Matcher, start, end int64) ([]string, error) {
	list, err := n.seriesInRange(ms, start, end, 0)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range list {
		if v := s.lset.Get(name); v != "" {
			seen[v] = true
		}
	}
	return slices.Sorted(mapKeys(seen)), nil
}
