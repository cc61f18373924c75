package influx

import (
	"bytes"
	"math"
	"slices"
	"strconv"
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
	f.Add([]byte("m v=1 1\n"), "", uint8(Second))
	f.Add([]byte("m v=1 -1\n"), "x", uint8(Nanosecond))
	f.Add([]byte("m v=1 153722867280913\n"), "x", uint8(Minute))

	p := NewParser(Options{MaxErrors: 1000, MaxCacheBytes: 64 << 10})
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
		if points != res.Points || len(acceptedLines) != accepted {
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
