package store

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"github.com/linxGnu/grocksdb"
	"github.com/tributarydb/tributary/node/labels"
)

var testSeries = map[uint64]labels.Labels{
	1: labels.FromStrings("__name__", "cpu", "host", "pi-1", "core", "0"),
	2: labels.FromStrings("__name__", "cpu", "host", "pi-2", "core", "1"),
	3: labels.FromStrings("__name__", "mem", "host", "pi-1"),
	4: labels.FromStrings("__name__", "temp", "host", "pi-10", "zone", "north"),
	9: labels.FromStrings("__name__", "cpu", "host", "pi-10", "core", "0"),
}

func putTestSeries(t *testing.T, db *DB) {
	t.Helper()
	write(t, db, func(b *Batch) {
		for id, ls := range testSeries {
			b.PutSeries(id, ls)
		}
	})
}

func TestSeries_RoundTrip(t *testing.T) {
	db := openTest(t, Options{})
	putTestSeries(t, db)

	var ids []uint64
	err := db.ForEachSeries(func(id uint64, ls labels.Labels) error {
		ids = append(ids, id)
		if !labels.Equal(ls, testSeries[id]) {
			t.Errorf("series %d = %v, want %v", id, ls, testSeries[id])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids) != "[1 2 3 4 9]" {
		t.Fatalf("ForEachSeries ids = %v, want ascending", ids)
	}

	for _, tt := range []struct {
		name  string
		id    uint64
		found bool
	}{{"present", 4, true}, {"absent", 5, false}} {
		t.Run("SeriesLabels/"+tt.name, func(t *testing.T) {
			ls, found, err := db.SeriesLabels(tt.id)
			if err != nil || found != tt.found || !labels.Equal(ls, testSeries[tt.id]) {
				t.Fatalf("SeriesLabels(%d) = %v, %v, %v", tt.id, ls, found, err)
			}
		})
	}

	postings := []struct {
		name, lname, lvalue string
		want                []uint64
	}{
		{"metric", "__name__", "cpu", []uint64{1, 2, 9}},
		{"host", "host", "pi-1", []uint64{1, 3}},
		{"value prefix of another", "host", "pi-10", []uint64{4, 9}},
		{"absent value", "host", "pi-3", nil},
		{"absent name", "rack", "a", nil},
		{"name prefix of another", "zon", "north", nil},
	}
	for _, tt := range postings {
		t.Run("Postings/"+tt.name, func(t *testing.T) {
			got, err := db.Postings(tt.lname, tt.lvalue)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("Postings(%s, %s) = %v, %v, want %v", tt.lname, tt.lvalue, got, err, tt.want)
			}
		})
	}

	stop := fmt.Errorf("stop")
	n := 0
	if err := db.ForEachSeries(func(uint64, labels.Labels) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("ForEachSeries returned %v after %d calls, want the callback's error after 1", err, n)
	}
}

func TestPostingsMatching(t *testing.T) {
	db := openTest(t, Options{})
	putTestSeries(t, db)
	tests := []struct {
		name    string
		mt      labels.MatchType
		lname   string
		pattern string
		want    []uint64
	}{
		{"regexp union", labels.MatchRegexp, "host", "pi-1|pi-2", []uint64{1, 2, 3}},
		{"regexp prefix", labels.MatchRegexp, "host", "pi-1.*", []uint64{1, 3, 4, 9}},
		{"not equal", labels.MatchNotEqual, "host", "pi-1", []uint64{2, 4, 9}},
		{"negative regexp", labels.MatchNotRegexp, "__name__", "cpu|mem", []uint64{4}},
		{"matches nothing", labels.MatchRegexp, "core", "7", nil},
		{"absent name", labels.MatchRegexp, "rack", ".*", nil},
		{"name prefix of another", labels.MatchRegexp, "zon", ".*", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := labels.NewMatcher(tt.mt, tt.lname, tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			got, err := db.PostingsMatching(tt.lname, m.Matches)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("PostingsMatching(%v) = %v, %v, want %v", m, got, err, tt.want)
			}
		})
	}
}

func TestLabelNamesAndValues_SkipScanWithPrefixNamesAndOddBytes(t *testing.T) {
	db := openTest(t, Options{})
	// Raw label sets: the store must not depend on labels.New's rules.
	values := []string{"\x00", "\x00\x00", "\x00\x01", "a", "a\x00", "a\x00b", "ab", "b", "\xff", "\xff\x00"}
	names := []string{"a", "a\x00", "a_b", "ab", "b"}
	write(t, db, func(b *Batch) {
		id := uint64(0)
		for _, n := range names {
			for _, v := range values {
				id++
				b.PutSeries(id, labels.Labels{{Name: n, Value: v}})
			}
		}
		id++
		b.PutSeries(id, labels.Labels{{Name: "empty", Value: ""}}) // no postings
	})

	gotNames, err := db.LabelNames()
	if err != nil || !slices.Equal(gotNames, names) {
		t.Fatalf("LabelNames = %q, %v, want %q", gotNames, err, names)
	}
	for i, n := range names {
		t.Run(fmt.Sprintf("name=%q", n), func(t *testing.T) {
			got, err := db.LabelValues(n)
			if err != nil || !slices.Equal(got, values) {
				t.Fatalf("LabelValues(%q) = %q, %v, want %q", n, got, err, values)
			}
			for j, v := range values {
				want := uint64(i*len(values) + j + 1)
				ids, err := db.Postings(n, v)
				if err != nil || !slices.Equal(ids, []uint64{want}) {
					t.Fatalf("Postings(%q, %q) = %v, %v, want [%d]", n, v, ids, err, want)
				}
			}
			ids, err := db.PostingsMatching(n, func(string) bool { return true })
			if err != nil || len(ids) != len(values) {
				t.Fatalf("PostingsMatching(%q, all) = %v, %v", n, ids, err)
			}
		})
	}
	if got, err := db.LabelValues("zz"); err != nil || got != nil {
		t.Fatalf("LabelValues(absent) = %q, %v", got, err)
	}
}

// TestIndex_SkipScansDoNotReadEveryPosting counts RocksDB memtable steps:
// listing names and values seeks from one to the next, and matching a name
// reads none of the postings of the values that do not match, nor of other
// names.
func TestIndex_SkipScansDoNotReadEveryPosting(t *testing.T) {
	db := openTest(t, Options{WriteBufferBytes: 64 << 20}) // keep it all in the memtable
	const perValue = 2000
	write(t, db, func(b *Batch) {
		id := uint64(0)
		for _, n := range []string{"a", "ab", "b"} {
			for _, v := range []string{"x", "y", "z"} {
				for range perValue {
					id++
					b.PutSeries(id, labels.Labels{{Name: n, Value: v}})
				}
			}
		}
	})

	const nextOnMemtable = 21 // rocksdb_next_on_memtable_count
	steps := func(f func() error) int {
		// Perf counters, and the perf context, belong to the OS thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		grocksdb.SetPerfLevel(grocksdb.KEnableCount)
		defer grocksdb.SetPerfLevel(grocksdb.KDisable)
		pc := grocksdb.NewPerfContext()
		defer pc.Destroy()
		pc.Reset()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return int(pc.Metric(nextOnMemtable))
	}

	tests := []struct {
		name     string
		call     func() error
		minSteps int // proves the counter counts
		maxSteps int
	}{
		{"LabelNames", func() error { _, err := db.LabelNames(); return err }, 0, 10},
		{"LabelValues", func() error { _, err := db.LabelValues("a"); return err }, 0, 10},
		{"PostingsMatching one value", func() error {
			ids, err := db.PostingsMatching("a", func(v string) bool { return v == "y" })
			if len(ids) != perValue {
				t.Errorf("PostingsMatching matched %d ids, want %d", len(ids), perValue)
			}
			return err
		}, perValue - 1, perValue + 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n := steps(tt.call); n < tt.minSteps || n > tt.maxSteps {
				t.Fatalf("%d memtable steps, want %d to %d of %d postings", n, tt.minSteps, tt.maxSteps, 9*perValue)
			}
		})
	}
}
