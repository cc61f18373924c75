package node_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
)

func TestSetRateLimit_RefusesOverBudgetWritesAndRecoversAsTheBucketRefills(t *testing.T) {
	var clock atomic.Int64
	now := base.Add(40 * 24 * time.Hour)
	clock.Store(now.UnixNano())
	o := testOptions(t, t.TempDir())
	o.Now = func() time.Time { return time.Unix(0, clock.Load()) }
	n := mustOpen(t, o)
	defer n.Close()
	ts := now.UnixMilli()
	write := func(points int) error {
		b := model.Batch{Labels: lbl("__name__", "rl")}
		for i := range points {
			b.Ts = append(b.Ts, ts)
			b.Vs = append(b.Vs, float64(i))
			ts++
		}
		_, err := n.Write(context.Background(), []model.Batch{b})
		return err
	}
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	n.SetRateLimit(100, 300) // bucket starts full: 300 points
	steps := []struct {
		name    string
		advance time.Duration
		points  int
		refused bool
	}{
		{"the burst passes", 0, 300, false},
		{"the empty bucket refuses one point", 0, 1, true},
		{"half a second refills 50 points", 500 * time.Millisecond, 51, true},
		{"50 points fit", 0, 50, false},
		{"a write above the burst never passes", time.Hour, 301, true},
		{"the full bucket after an hour", 0, 300, false},
	}
	refused := int64(0)
	for _, s := range steps {
		advance(s.advance)
		err := write(s.points)
		if s.refused {
			refused++
			if !errors.Is(err, model.ErrOverloaded) || !errors.Is(err, node.ErrRateLimited) || !strings.Contains(err.Error(), "rate limit") {
				t.Fatalf("%s: err = %v, want a rate-limit error matching ErrOverloaded", s.name, err)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	if w, _ := n.RateLimited(); w != refused {
		t.Fatalf("RateLimited writes = %d, want %d", w, refused)
	}
	n.SetRateLimit(0, 0)
	if err := write(10_000); err != nil {
		t.Fatalf("unlimited again: %v", err)
	}
}

func TestSetRetention_ValidatesAndIsUsedByWritesAndRetention(t *testing.T) {
	o := testOptions(t, t.TempDir())
	n := mustOpen(t, o)
	defer n.Close()
	for _, c := range []struct {
		name               string
		raw, hourly, daily time.Duration
		ok                 bool
	}{
		{"raw under an hour", 30 * time.Minute, time.Hour, 24 * time.Hour, false},
		{"1h under an hour", time.Hour, time.Minute, 24 * time.Hour, false},
		{"1d under a day", time.Hour, time.Hour, time.Hour, false},
		{"the minimums", time.Hour, time.Hour, 24 * time.Hour, true},
		{"two days", 48 * time.Hour, 96 * time.Hour, 30 * 24 * time.Hour, true},
	} {
		err := n.SetRetention(c.raw, c.hourly, c.daily)
		if (err == nil) != c.ok {
			t.Fatalf("%s: SetRetention = %v, want ok=%v", c.name, err, c.ok)
		}
	}
	if raw, hourly, daily := n.Retention(); raw != 48*time.Hour || hourly != 96*time.Hour || daily != 30*24*time.Hour {
		t.Fatalf("Retention() = %s %s %s", raw, hourly, daily)
	}
	// Writes older than the new raw retention are refused as too old.
	now := o.Now()
	res, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "ret"), Ts: []int64{now.Add(-72 * time.Hour).UnixMilli(), now.UnixMilli()}, Vs: []float64{1, 2}}})
	if err != nil || res.Accepted != 1 || res.RejectedBy[model.RejectTooOld] != 1 {
		t.Fatalf("write across the new retention: %+v, %v", res, err)
	}
}

func TestSetRetention_RetentionDropsWithTheNewValues(t *testing.T) {
	o := testOptions(t, t.TempDir()) // raw retention 365 days
	n := mustOpen(t, o)
	defer n.Close()
	now := o.Now()
	var ts []int64
	var vs []float64
	for d := 10; d >= 0; d-- {
		ts = append(ts, now.Add(-time.Duration(d)*24*time.Hour).UnixMilli())
		vs = append(vs, float64(d))
	}
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "drop"), Ts: ts, Vs: vs}}); err != nil {
		t.Fatal(err)
	}
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := n.SetRetention(48*time.Hour, 365*24*time.Hour, 365*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	n.ApplyRetention()
	raw := query(t, n, model.Query{Matchers: sel(t, `drop`), Start: ts[0], End: ts[len(ts)-1], Mode: model.ModeRaw})[""]
	if len(raw.Ts) == 0 || len(raw.Ts) > 3 || raw.Ts[0] < now.Add(-72*time.Hour).UnixMilli() {
		t.Fatalf("raw after retention of 48h: %d samples from %d (now %d)", len(raw.Ts), raw.Ts, now.UnixMilli())
	}
}

func TestSetSealPolicy_SealsTheOpenSegmentByTheNewAge(t *testing.T) {
	o := testOptions(t, t.TempDir())
	o.FlushInterval = 50 * time.Millisecond // the flush loop seals aged segments
	o.WALSegmentAge = time.Hour
	n := mustOpen(t, o)
	defer n.Close()
	ts := o.Now().UnixMilli()
	if _, err := n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "seal"), Ts: []int64{ts}, Vs: []float64{1}}}); err != nil {
		t.Fatal(err)
	}
	sealed := func() int64 {
		var points int64
		for _, s := range n.WALSegments() {
			if s.Sealed {
				points += s.Points
			}
		}
		return points
	}
	time.Sleep(300 * time.Millisecond)
	if p := sealed(); p != 0 {
		t.Fatalf("%d points sealed under a 1h segment age", p)
	}
	if err := n.SetSealPolicy(100*time.Millisecond, 0); err != nil {
		t.Fatal(err)
	}
	if age, pts := n.SealPolicy(); age != 100*time.Millisecond || pts != 0 {
		t.Fatalf("SealPolicy() = %v, %d", age, pts)
	}
	deadline := time.Now().Add(10 * time.Second)
	for sealed() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the open segment was not sealed by the new age within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := n.SetSealPolicy(0, 0); err == nil {
		t.Fatal("SetSealPolicy accepted a zero age")
	}
}

func TestOptions_RejectsABadSealPolicy(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*node.Options)
		want string
	}{
		{"negative age", func(o *node.Options) { o.WALSegmentAge = -time.Second }, "WALSegmentAge"},
		{"negative min points", func(o *node.Options) { o.WALSegmentMinPoints = -1 }, "WALSegmentMinPoints"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t, t.TempDir())
			tt.set(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
