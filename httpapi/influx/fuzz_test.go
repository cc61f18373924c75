package influx

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

// FuzzParse checks that Parse never panics, that everything it accepts is
// a valid series, that its counts add up, and that what it accepts
// survives a round trip: written back as line protocol (the metric name as
// measurement, one field "f", millisecond timestamps) and parsed again it
// gives the same series, with "_f" added to the metric names, and the
// same points.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"cpu,host=a,region=eu usage=1.5,idle=2i 1451606400000000000\n",
		"m v=1\nm v=2 2\r\n# comment\n\n  \t\n",
		`my\,meas\ ure,k\ e\,y\=1=v\ a\,l\=ue f\ i\,e\=ld=1 1`,
		`m,t=a\\ v=1 1`,
		`m,t=a\\\ b v=1 1`,
		`m,t=a\ v=1`,
		`m s="a \"b\" \\",v=1 1`,
		`m s="unterminated`,
		"m v=NaN\nm v=+Inf\nm v=-inf\nm v=1e400\n",
		"m v=9223372036854775807i,w=-9223372036854775808i,u=18446744073709551615u 9223372036854775807",
		"m v=1 -9223372036854775808\nm v=1 9223372036854775808\n",
		"m,t=\xff v=1\nm,t=a\x00b v=1\n\xff v=1\n",
		"温度,地点=東京 値=21.5 1\n",
		"1m,2k=v 3f=1\n-m,.k=v f=1\n",
		"m,__name__=x v=1\nm,a=1,a=2 v=1\nm,a-b=1,a\\ b=2,a_b=3 v=1\n",
		"m,db=x v=1\nm,a=,b= v=1\n",
		"m v=t,w=F,x=true,y=FALSE,z=True 1\n",
		"m v=1, 1\nm =1\nm v=\nm v\n,t=a v=1\nm,=a v=1\nm,t=a=b v=1\n",
		"m v=1 1 2\nm v=1 1.5\nm v=1\t5\t\n",
		"m,a=1,b=2 v=1 1\nm,b=2,a=1 v=2 2\n",
		"m v=.5,w=5.,x=-.5e-3,y=0x10 1\n",
		"m\\ v=1",
		"\\",
		"m,\\=\\= v=1",
		"m v=1\\",
	} {
		f.Add([]byte(s), "db0", uint8(Millisecond))
	}
	// Worst cases for the parse limits (fuzzOptions): a line over the
	// fields limit, one at it, and one over the length limit.
	f.Add([]byte("ok v=1\nm "+strings.Repeat("a=1,", 100)+"a=1\nm "+strings.Repeat("a=1,", 99)+"a=1\n"), "db0", uint8(Millisecond))
	f.Add([]byte("m,t="+strings.Repeat("x", 4096)+" v=1\nok v=1\n"), "db0", uint8(Millisecond))
	f.Add([]byte("m s=\"a \\\"b\",v=1,b=true 5\nm s=\"only\" 6\nm s=\"open 7\n"), "db0", uint8(Millisecond))
	f.Add([]byte("m v=1 1\n"), "", uint8(Second))
	f.Add([]byte("m v=1 -1\n"), "x", uint8(Nanosecond))
	f.Add([]byte("m v=1 153722867280913\n"), "x", uint8(Minute))

	// Small line limits, so that short inputs reach them.
	p := NewParser(Options{MaxErrors: 1000, MaxCacheBytes: 64 << 10, MaxLineBytes: 4096, MaxFieldsPerLine: 100})
	f.Fuzz(func(t *testing.T, body []byte, db string, prec uint8) {
		pr := Precision(prec % 6)
		res, err := p.Parse(body, db, pr, 1)
		if err != nil {
			if validDatabase(db, labels.DefaultLimits.MaxValueBytes) == "" {
				t.Fatalf("Parse: %v", err)
			}
			return
		}
		physical := bytes.Count(body, []byte("\n")) + 1

		// Counts.
		accepted := res.Lines - res.RejectedLines
		if accepted < 0 || res.RejectedPoints < res.RejectedLines {
			t.Fatalf("counts: %+v", res)
		}
		if want := min(res.RejectedLines, 1000); len(res.Errors) != want {
			t.Fatalf("%d errors for %d refused lines", len(res.Errors), res.RejectedLines)
		}
		for i, e := range res.Errors {
			if e.Line < 1 || e.Line > physical || (i > 0 && e.Line <= res.Errors[i-1].Line) || e.Column < 1 || e.Msg == "" {
				t.Fatalf("error %d: %+v", i, e)
			}
		}
		points := 0
		seen := map[string]bool{}
		acceptedLines := map[int]bool{}
		for i, b := range res.Batches {
			if len(b.Ts) == 0 || len(b.Ts) != len(b.Vs) {
				t.Fatalf("batch %d: %d timestamps, %d values", i, len(b.Ts), len(b.Vs))
			}
			points += len(b.Ts)
			ls, err := labels.New(b.Labels, labels.DefaultLimits)
			if err != nil {
				t.Fatalf("batch %d: invalid series %v: %v", i, b.Labels, err)
			}
			if !labels.Equal(ls, b.Labels) {
				t.Fatalf("batch %d: labels %v are not sorted or hold empty values", i, b.Labels)
			}
			key := string(ls.AppendKey(nil))
			if seen[key] {
				t.Fatalf("batch %d: series %v has two batches", i, ls)
			}
			seen[key] = true
			for j, v := range b.Vs {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("batch %d point %d: value %v", i, j, v)
				}
				line := res.Line(i, j)
				if line < 1 || line > physical || (j > 0 && line < res.Line(i, j-1)) {
					t.Fatalf("batch %d point %d: line %d", i, j, line)
				}
				acceptedLines[line] = true
			}
		}
		// A stored line has points, unless all its fields were strings
		// (skipped).
		if points != res.Points || len(acceptedLines) > accepted || accepted-len(acceptedLines) > res.SkippedStringLines ||
			res.SkippedStringFields < res.SkippedStringLines || res.SkippedStringLines > accepted {
			t.Fatalf("points %d (result says %d), lines with points %d (result says %d accepted)",
				points, res.Points, len(acceptedLines), accepted)
		}
		for _, e := range res.Errors {
			if acceptedLines[e.Line] {
				t.Fatalf("line %d both refused and stored", e.Line)
			}
		}

		// Round trip.
		var enc []byte
		for _, b := range res.Batches {
			name := labels.Labels(b.Labels).Get(labels.MetricName)
			if len(name) > labels.DefaultLimits.MaxValueBytes-2 {
				return // "_f" would not fit
			}
			for j := range b.Ts {
				enc = append(enc, name...)
				for _, l := range b.Labels {
					if l.Name == labels.MetricName {
						continue
					}
					enc = append(enc, ',')
					enc = append(enc, l.Name...)
					enc = append(enc, '=')
					enc = appendEscaped(enc, l.Value)
				}
				enc = append(enc, " f="...)
				enc = strconv.AppendFloat(enc, b.Vs[j], 'g', -1, 64)
				enc = append(enc, ' ')
				enc = strconv.AppendInt(enc, b.Ts[j], 10)
				enc = append(enc, '\n')
			}
		}
		again, err := NewParser(Options{}).Parse(enc, "", Millisecond, 0)
		if err != nil || again.RejectedLines != 0 || len(again.Batches) != len(res.Batches) {
			t.Fatalf("round trip: %v %v\n%s", err, again.Errors, enc)
		}
		for i, b := range res.Batches {
			want := slices.Clone(b.Labels)
			for k := range want {
				if want[k].Name == labels.MetricName {
					want[k].Value += "_f"
				}
			}
			a := again.Batches[i]
			if !labels.Equal(a.Labels, want) || !slices.Equal(a.Ts, b.Ts) ||
				!slices.EqualFunc(a.Vs, b.Vs, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) }) {
				t.Fatalf("round trip changed batch %d:\n%v %v %v\nbecame\n%v %v %v\nvia\n%s", i, b.Labels, b.Ts, b.Vs, a.Labels, a.Ts, a.Vs, enc)
			}
		}
	})
}

// appendEscaped writes a tag value in line protocol.
func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', ',', '=', ' ':
			dst = append(dst, '\\', c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// The allocation bound of one call of the parser, which
// FuzzParseReaderAllocations and TestParse_AllocationIsBoundedByTheBody
// hold it to: allocPerByte bytes per byte of body, allocPerSeries per
// distinct series and per distinct series key (each at most
// Options.MaxSeries), allocPerError per described error (at most
// Options.MaxErrors), the line buffer (it doubles up to MaxLineBytes+2, so
// at most twice that in all), and allocFixed for the parser itself.
const (
	allocPerByte   = 16
	allocPerSeries = 2 << 10
	allocPerError  = 512
	allocFixed     = 24 << 10
)

// allocBound is what one call with opts on a body of n bytes may allocate.
func allocBound(opts Options, n int) uint64 {
	o := opts
	_ = o.Validate()
	return uint64(allocPerByte*n + allocPerSeries*2*o.MaxSeries + allocPerError*o.MaxErrors + 2*(min(o.MaxLineBytes, n)+2+readChunkBytes) + allocFixed)
}

// allocated returns the bytes f allocates on the heap, from the TotalAlloc
// counter of runtime.MemStats, read before and after f. The counter adds
// up every heap allocation; a garbage collection while f runs does not
// lower it, so the count does not depend on when the collector runs. It
// does count other goroutines' allocations too (the fuzzing engine's, a
// finalizer's): f runs twice and the smaller count is kept, so f must
// allocate the same each time (build fresh state inside it).
func allocated(f func()) uint64 {
	least := uint64(math.MaxUint64)
	var before, after runtime.MemStats
	for range 2 {
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	if after.HeapAlloc > 256<<20 {
		runtime.GC() // see steadyAllocations
	}
	return least
}

// steadyAllocations makes an allocation fuzz target see the same code
// paths for the same input: one P and no automatic garbage collection
// (allocated collects past 256 MiB), so that the sync.Pools the decoders
// reach (fmt's printers, encoding/json's scanners) are not emptied at
// random moments or missed on another P. Otherwise their refills come and
// go in the coverage, and the fuzzing engine spends its time minimizing
// inputs that are not new. The measured bytes do not depend on it.
func steadyAllocations(f *testing.F) {
	procs := runtime.GOMAXPROCS(1)
	gc := debug.SetGCPercent(-1)
	f.Cleanup(func() {
		debug.SetGCPercent(gc)
		runtime.GOMAXPROCS(procs)
	})
}

// allocOptions are small limits, so that the constant part of the bound
// stays small next to fuzz inputs.
var allocOptions = Options{MaxSeries: 16, MaxLineBytes: 4096, MaxFieldsPerLine: 256, MaxErrors: 8, MaxPoints: 1 << 16}

// allocSeeds are the worst cases known for memory per byte: many points of
// one series, many fields and tags, long lines, many series, bad lines.
func allocSeeds() []string {
	manyTags := func(n int) string {
		var b strings.Builder
		b.WriteString("m")
		for i := range n {
			fmt.Fprintf(&b, ",t%d=v", i)
		}
		return b.String()
	}
	fields := func(n int, distinct bool) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			if distinct {
				fmt.Fprintf(&b, "f%d=1", i)
			} else {
				b.WriteString("a=1")
			}
		}
		return b.String()
	}
	return []string{
		"m " + fields(256, false) + "\n",
		"m " + fields(257, false) + "\n",
		strings.Repeat("m "+fields(200, false)+"\n", 20),
		"m " + fields(300, true) + "\n",
		strings.Repeat("m a=1\n", 3000),
		strings.Repeat("m a=1 1\r\n", 1000),
		manyTags(30) + " v=1\n" + manyTags(31) + " v=1\n" + manyTags(1000) + " v=1\n",
		strings.Repeat(manyTags(30)+" "+fields(8, true)+"\n", 10),
		"m,t=" + strings.Repeat("x", 4090) + " v=1\n" + "m,t=" + strings.Repeat("x", 20000) + " v=1\nm v=1",
		"# " + strings.Repeat("#", 10000) + "\nm v=1\n",
		strings.Repeat("x\n", 5000),
		strings.Repeat("m v=x\n", 2000),
		strings.Repeat("m s=\"a,b=c\" 1\n", 500),
		func() string {
			var b strings.Builder
			for i := range 40 {
				fmt.Fprintf(&b, "m,h=%d v=1\n", i)
			}
			return b.String()
		}(),
		"\xef\xbb\xbfm v=1\n",
	}
}

// FuzzParseReaderAllocations holds ParseReader to its memory bound: one
// input, parsed by a fresh parser with allocOptions, allocates at most
// allocBound bytes. It also requires ParseReader to give Parse's answer
// (and neither to panic).
func FuzzParseReaderAllocations(f *testing.F) {
	steadyAllocations(f)
	for _, s := range allocSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var res *Result
		var err error
		alloc := allocated(func() {
			res, err = NewParser(allocOptions).ParseReader(bytes.NewReader(body), "db", Millisecond, 1)
		})
		if bound := allocBound(allocOptions, len(body)); alloc > bound {
			t.Fatalf("a %d-byte body allocated %d bytes, bound %d", len(body), alloc, bound)
		}
		want, werr := NewParser(allocOptions).Parse(body, "db", Millisecond, 1)
		if fmt.Sprint(err) != fmt.Sprint(werr) || err == nil && (render(res) != render(want) || fmt.Sprint(res.Errors) != fmt.Sprint(want.Errors)) {
			t.Fatalf("ParseReader and Parse disagree: %v %v", err, werr)
		}
	})
}

// TestParse_AllocationIsBoundedByTheBody holds ParseReader to the same
// bound as FuzzParseReaderAllocations, with the default limits, on large
// worst-case bodies: points of few series (the per-byte term), 10,000
// distinct series (the per-series term), and a body of bad lines.
func TestParse_AllocationIsBoundedByTheBody(t *testing.T) {
	series := func(n int) string {
		var b strings.Builder
		for i := range n / 10 {
			fmt.Fprintf(&b, "m,h=%d a=1,b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1,j=1\n", i)
		}
		return b.String()
	}
	opts := Options{MaxSeries: 10_000, MaxPoints: 1_000_000}
	for _, tc := range []struct{ name, body string }{
		{"one series, 4 bytes a point", strings.Repeat("m "+strings.Repeat("a=1,", 999)+"a=1\n", 1000)},
		{"lines of one point", strings.Repeat("m v=1\n", 200_000)},
		{"10,000 series", series(10_000)},
		{"bad lines", strings.Repeat("x\n", 500_000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			alloc := allocated(func() {
				if _, err := NewParser(opts).ParseReader(strings.NewReader(tc.body), "db", Millisecond, 1); err != nil {
					t.Fatal(err)
				}
			})
			bound := allocBound(opts, len(tc.body))
			t.Logf("%d bytes: %d allocated (%.1f per byte), bound %d", len(tc.body), alloc, float64(alloc)/float64(len(tc.body)), bound)
			if alloc > bound {
				t.Fatalf("allocated %d bytes, bound %d", alloc, bound)
			}
		})
	}
}
