package node

import (
	"context"
	"fmt"

	"github.com/tributarydb/tributary/node/internal/store"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// ExportRollups calls fn once for each series selected by matchers (all
// must match; at least one must not match the empty string) that has
// rollup cells starting in [minT, maxT] (ms, inclusive), in label order,
// with those cells packed as the store keeps them: the hours of each day
// from the hourly tier, the days of each daily pack from the daily tier;
// cells starting outside [minT, maxT] are left empty, and a pack without
// a cell in range is left out.
//
// Each cell is what a downsampling query of step 1h (hours) or 1d (days)
// answers for it: the stored rollup, except where the head holds samples
// of the cell, which is computed from the raw points (head and store,
// merged). Cells are whole: one that [minT, maxT] cuts is included whole.
//
// Memory: one series' packs in the range at a time (about 1.5 KiB per day
// of hourly rollups). It stops at the first error fn returns (returned as
// is) or when ctx is done; bad arguments wrap model.ErrBadQuery. Safe for
// concurrent use, also with writes: points written meanwhile may or may
// not be included.
func (n *Node) ExportRollups(ctx context.Context, matchers []*labels.Matcher, minT, maxT int64, fn func(SeriesRollups) error) error {
	if err := n.checkExport("export rollups", matchers, minT, maxT); err != nil {
		return err
	}
	// Stored times lie in the store's range; clamping keeps the day
	// arithmetic below far from overflowing.
	minT, maxT = max(minT, store.MinTimestampMs), min(maxT, store.MaxTimestampMs)
	if maxT < minT {
		return nil
	}
	return n.exportSeries(ctx, "export rollups", matchers, minT, maxT, func(s *memSeries) error {
		r, err := n.seriesRollups(s, minT, maxT)
		if err != nil {
			return fmt.Errorf("export rollups [%d, %d]: %s: %w", minT, maxT, s.lset, err)
		}
		if len(r.Hourly) == 0 && len(r.Daily) == 0 {
			return nil
		}
		return fn(r)
	})
}

// seriesRollups reads the rollups of s for cells starting in [minT, maxT].
func (n *Node) seriesRollups(s *memSeries, minT, maxT int64) (SeriesRollups, error) {
	r := SeriesRollups{Labels: s.lset}
	x := &rollupExport{n: n, s: s, minT: minT, maxT: maxT,
		firstDay: rollup.BucketStart(minT, rollup.Day), lastDay: rollup.BucketStart(maxT, rollup.Day)}
	if err := x.findDirty(); err != nil {
		return r, err
	}
	var err error
	if r.Hourly, err = x.hourly(); err != nil {
		return r, err
	}
	if r.Daily, err = x.daily(); err != nil {
		return r, err
	}
	return r, nil
}

// rollupExport reads one series' rollups for cells starting in
// [minT, maxT]: the stored tiers, with the hours that hold head samples
// (and the days of those hours) recomputed from raw points, as a query of
// them would be.
type rollupExport struct {
	n                 *Node
	s                 *memSeries
	minT, maxT        int64
	firstDay, lastDay int64
	dirty             map[int64]rollup.Agg // hour → its aggregate from raw points
	dirtyDays         map[int64]bool
}

// findDirty recomputes the hours with head samples from raw points.
func (x *rollupExport) findDirty() error {
	x.dirty = map[int64]rollup.Agg{}
	for _, p := range x.s.snapshot(x.firstDay, x.lastDay+rollup.Day-1) {
		h := rollup.BucketStart(p.t, rollup.Hour)
		if _, ok := x.dirty[h]; ok {
			continue
		}
		samples, err := x.n.rawSamples(x.s, h, h+rollup.Hour-1)
		if err != nil {
			return err
		}
		var a rollup.Agg
		for _, y := range samples {
			a.Add(y.t, y.v)
		}
		x.dirty[h] = a
	}
	x.dirtyDays = map[int64]bool{}
	for h := range x.dirty {
		x.dirtyDays[rollup.BucketStart(h, rollup.Day)] = true
	}
	return nil
}

// cells fills the cells of a pack (out[i] starts at start + i*width)
// that lie in the export's range with cell(cellStart, i); ok reports a
// non-empty one.
func (x *rollupExport) cells(out []rollup.Agg, start, width int64, cell func(int64, int) (rollup.Agg, error)) (bool, error) {
	ok := false
	for i := range out {
		t := start + int64(i)*width
		if t < x.minT || t > x.maxT {
			continue
		}
		a, err := cell(t, i)
		if err != nil {
			return false, err
		}
		out[i] = a
		ok = ok || a.Count > 0
	}
	return ok, nil
}

// hours fills a day's cells in range, from the stored pack and the dirty
// hours; ok reports a non-empty cell.
func (x *rollupExport) hours(day int64, stored rollup.Hourly) (rollup.Hourly, bool) {
	var out rollup.Hourly
	ok, _ := x.cells(out.Hours[:], day, rollup.Hour, func(h int64, i int) (rollup.Agg, error) {
		if d, isDirty := x.dirty[h]; isDirty {
			return d, nil
		}
		return stored.Hours[i], nil
	})
	return out, ok
}

// hourly reads the hourly tier: the stored days, then the dirty days it
// does not hold.
func (x *rollupExport) hourly() ([]HourlyRollups, error) {
	var out []HourlyRollups
	seen := map[int64]bool{}
	err := x.n.db.Rollups(store.KindRollup1h, x.s.id, x.firstDay, x.lastDay, func(day int64, val []byte) error {
		stored, err := rollup.DecodeHourly(val, day)
		if err != nil {
			return fmt.Errorf("hourly rollups of %s: %w", fmtMs(day), err)
		}
		seen[day] = true
		if h, ok := x.hours(day, stored); ok {
			out = append(out, HourlyRollups{Day: day, Hours: h})
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	for day := range x.dirtyDays {
		if seen[day] {
			continue
		}
		if h, ok := x.hours(day, rollup.Hourly{}); ok {
			out = insertHourly(out, HourlyRollups{Day: day, Hours: h})
		}
	}
	return out, nil
}

// dayCell is a day's cell: clean ones from the daily tier, dirty ones
// merged from their hours.
func (x *rollupExport) dayCell(day int64, stored rollup.Agg) (rollup.Agg, error) {
	if !x.dirtyDays[day] {
		return stored, nil
	}
	day1h, err := x.n.readHourly(x.s.id, day)
	if err != nil {
		return rollup.Agg{}, err
	}
	var t rollup.Agg
	for i, a := range day1h.Hours {
		if d, isDirty := x.dirty[day+int64(i)*rollup.Hour]; isDirty {
			a = d
		}
		t.Merge(a)
	}
	return t, nil
}

// daily reads the daily tier: the stored packs, then the dirty days of
// packs it does not hold.
func (x *rollupExport) daily() ([]DailyRollups, error) {
	var packs []DailyRollups
	seenPack := map[int64]bool{}
	err := x.n.db.Rollups(store.KindRollup1d, x.s.id, rollup.PackStart(x.minT), x.lastDay, func(p int64, val []byte) error {
		stored, err := rollup.DecodeDaily(val, p)
		if err != nil {
			return fmt.Errorf("daily rollups from %s: %w", fmtMs(p), err)
		}
		seenPack[p] = true
		var out rollup.Daily
		ok, err := x.cells(out.Days[:], p, rollup.Day, func(d int64, i int) (rollup.Agg, error) { return x.dayCell(d, stored.Days[i]) })
		if err != nil {
			return err
		}
		if ok {
			packs = append(packs, DailyRollups{Pack: p, Days: out})
		}
		return nil
	})
	if err != nil {
		return packs, err
	}
	for day := range x.dirtyDays {
		p := rollup.PackStart(day)
		if seenPack[p] || day < x.minT || day > x.maxT {
			continue
		}
		a, err := x.dayCell(day, rollup.Agg{})
		if err != nil {
			return packs, err
		}
		if a.Count == 0 {
			continue
		}
		i := insertDaily(&packs, p)
		packs[i].Days.Days[(day-p)/rollup.Day] = a
	}
	return packs, nil
}

// insertHourly inserts h into hs, sorted by day.
func insertHourly(hs []HourlyRollups, h HourlyRollups) []HourlyRollups {
	i := 0
	for i < len(hs) && hs[i].Day < h.Day {
		i++
	}
	hs = append(hs, HourlyRollups{})
	copy(hs[i+1:], hs[i:])
	hs[i] = h
	return hs
}

// insertDaily returns the index of the pack starting at p in ps, sorted
// by start, adding an empty one if there is none.
func insertDaily(ps *[]DailyRollups, p int64) int {
	i := 0
	for i < len(*ps) && (*ps)[i].Pack < p {
		i++
	}
	if i < len(*ps) && (*ps)[i].Pack == p {
		return i
	}
	*ps = append(*ps, DailyRollups{})
	copy((*ps)[i+1:], (*ps)[i:])
	(*ps)[i] = DailyRollups{Pack: p}
	return i
}
