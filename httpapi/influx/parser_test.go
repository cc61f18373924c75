package influx

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

// render prints a result one batch a line, "labels ts:value ts:value
// @line,line", for compact comparisons.
func render(r *Result) string {
	var b strings.Builder
	for i, bt := range r.Batches {
		b.WriteString(labels.Labels(bt.Labels).String())
		for j := range bt.Ts {
			fmt.Fprintf(&b, " %d:%s", bt.Ts[j], strconv.FormatFloat(bt.Vs[j], 'g', -1, 64))
		}
		b.WriteString(" @")
		for j := range bt.Ts {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprint(&b, r.Line(i, j))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func parse(t *testing.T, p *Parser, body, db string, prec Precision) *Result {
	t.Helper()
	res, err := p.Parse([]byte(body), db, prec, 7)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return res
}

func TestParse_ValueTypesBecomeFloats(t *testing.T) {
	body := "m f=1.5,i=-42i,u=18446744073709551615u,e=1e3,E=-2.5E-1,d=.5,t=t,T=TRUE,tr=true,f0=F,fa=false,Fa=False,z=-0 1\n"
	res := parse(t, NewParser(Options{}), body, "", Millisecond)
	want := `m_f{} 1:1.5 @1
m_i{} 1:-42 @1
m_u{} 1:1.8446744073709552e+19 @1
m_e{} 1:1000 @1
m_E{} 1:-0.25 @1
m_d{} 1:0.5 @1
m_t{} 1:1 @1
m_T{} 1:1 @1
m_tr{} 1:1 @1
m_f0{} 1:0 @1
m_fa{} 1:0 @1
m_Fa{} 1:0 @1
m_z{} 1:-0 @1
`
	if got := render(res); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if res.Lines != 1 || res.RejectedLines != 0 || res.Points != 13 || res.RejectedPoints != 0 {
		t.Fatalf("counts: %+v", res)
	}
}

func TestParse_GroupsPointsBySeriesInLineOrder(t *testing.T) {
	body := "cpu,host=a v=1 1000000000\n" +
		"cpu,host=b v=2 1000000000\n" +
		"cpu,host=a v=3,w=4 2000000000\n" +
		"cpu,host=b v=5 2000000000\n"
	res := parse(t, NewParser(Options{}), body, "telegraf", Nanosecond)
	want := `cpu_v{db="telegraf",host="a"} 1000:1 2000:3 @1,3
cpu_v{db="telegraf",host="b"} 1000:2 2000:5 @2,4
cpu_w{db="telegraf",host="a"} 2000:4 @3
`
	if got := render(res); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestParse_SpellingsOfOneSeriesShareABatch(t *testing.T) {
	// Tag order, and names that sanitize alike, give the same series.
	body := "cpu,a=1,b=2 v=1 1\ncpu,b=2,a=1 v=2 2\ncpu,b=2,a=1,c= v=3 3\n"
	res := parse(t, NewParser(Options{}), body, "", Millisecond)
	want := `cpu_v{a="1",b="2"} 1:1 2:2 3:3 @1,2,3
`
	if got := render(res); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestParse_EscapesAndNames(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string
	}{
		{"escaped comma and space in measurement", `my\,meas\ ure v=1 1`, `my_meas_ure_v{} 1:1`},
		{"equals sign is literal in measurement", `a=b v=1 1`, `a_b_v{} 1:1`},
		{"escapes in tag key and value", `m,k\ e\,y\=1=v\ a\,l\=ue v=1 1`, `m_v{k_e_y_1="v a,l=ue"} 1:1`},
		{"escaped field key", `m f\ i\,e\=ld=1 1`, `m_f_i_e_ld{} 1:1`},
		{"double backslash is one backslash", `m,t=a\\ v=1 1`, `m_v{t="a\\"} 1:1`},
		{"backslash before other bytes is literal", `m,t=a\b\n v=1 1`, `m_v{t="a\\b\\n"} 1:1`},
		{"three backslashes then space", `m,t=a\\\ b v=1 1`, `m_v{t="a\\ b"} 1:1`},
		{"unicode tag value kept", `m,t=日本 v=1 1`, `m_v{t="日本"} 1:1`},
		{"unicode names sanitized one _ per character", `温度,地点=x v=1 1`, `___v{__="x"} 1:1`},
		{"leading digit gets _", `1m,2k=v 3f=1 1`, `_1m_3f{_2k="v"} 1:1`},
		{"leading dash gets _", `-m,.k=v f=1 1`, `_-m_f{_.k="v"} 1:1`},
		{"dots colons dashes kept", `cpu.load:1-x,a.b:c-d=v f.g=1 1`, `cpu.load:1-x_f.g{a.b:c-d="v"} 1:1`},
		{"quotes in names are not special", `m"x,t"k=v"w f"=1 1`, `m_x_f_{t_k="v\"w"} 1:1`},
		{"string field with escapes is scanned and skipped", `m s="a \"b\" \\",v=1 1`, `m_v{} 1:1`},
		{"multiple spaces between sections", "m,t=a   v=1    5   ", `m_v{t="a"} 5:1`},
		{"tab around timestamp", "m v=1\t5\t", `m_v{} 5:1`},
		{"db tag overrides db parameter", `m,db=other v=1 1`, `m_v{db="other"} 1:1`},
		{"empty tag value dropped", `m,a=,b=x v=1 1`, `m_v{b="x"} 1:1`},
		{"uppercase tag sorts before __name__", `m,Z=1,a=2 v=1 1`, `m_v{Z="1",a="2"} 1:1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := parse(t, NewParser(Options{}), tc.line, "", Millisecond)
			got := strings.TrimSpace(render(res))
			if i := strings.LastIndex(got, " @"); i >= 0 {
				got = got[:i]
			}
			if got != tc.want {
				t.Fatalf("%s\ngot  %s\nwant %s (errors %v)", tc.line, got, tc.want, res.Errors)
			}
		})
	}
}

func TestParse_DBParameterIsALabel(t *testing.T) {
	p := NewParser(Options{})
	a := render(parse(t, p, "m v=1 1", "one", Millisecond))
	b := render(parse(t, p, "m v=1 1", "two", Millisecond))
	c := render(parse(t, p, "m v=1 1", "", Millisecond))
	if a != "m_v{db=\"one\"} 1:1 @1\n" || b != "m_v{db=\"two\"} 1:1 @1\n" || c != "m_v{} 1:1 @1\n" {
		t.Fatalf("got %q %q %q", a, b, c)
	}
	if _, err := p.Parse([]byte("m v=1"), "bad\x00db", Millisecond, 0); !errors.Is(err, ErrBadDatabase) {
		t.Fatalf("control character in db: err = %v, want ErrBadDatabase", err)
	}
}

func TestParse_SkipsCommentsBlankLinesAndCR(t *testing.T) {
	body := "\uFEFF# a comment after a byte-order mark\r\n\r\n   \n\t# indented comment\n  m v=1 1\r\nm v=2 2\r\n\nm v=3 3"
	res := parse(t, NewParser(Options{}), body, "", Millisecond)
	if got, want := render(res), "m_v{} 1:1 2:2 3:3 @5,6,8\n"; got != want {
		t.Fatalf("got %q, want %q (errors %v)", got, want, res.Errors)
	}
	if res.Lines != 3 || res.RejectedLines != 0 {
		t.Fatalf("counts %+v", res)
	}
}

func TestParse_DefaultTimestamp(t *testing.T) {
	res, err := NewParser(Options{}).Parse([]byte("m v=1\nm v=2 9\n"), "", Millisecond, 1234)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := render(res), "m_v{} 1234:1 9:2 @1,2\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestParse_Precision(t *testing.T) {
	for _, tc := range []struct {
		prec Precision
		ts   string
		want int64
	}{
		{Nanosecond, "1451606400123456789", 1451606400123},
		{Nanosecond, "-1", -1}, // floor, not truncation towards zero
		{Nanosecond, "-1000000", -1},
		{Nanosecond, "-1000001", -2},
		{Nanosecond, "9223372036854775807", 9223372036854},
		{Nanosecond, "-9223372036854775808", -9223372036855},
		{Microsecond, "1451606400123456", 1451606400123},
		{Microsecond, "-1", -1},
		{Millisecond, "9223372036854775807", math.MaxInt64},
		{Second, "1451606400", 1451606400000},
		{Second, "9223372036854775", 9223372036854775000},
		{Minute, "2", 120000},
		{Hour, "-2", -7200000},
	} {
		res := parse(t, NewParser(Options{}), "m v=1 "+tc.ts, "", tc.prec)
		if len(res.Errors) > 0 || len(res.Batches) != 1 || res.Batches[0].Ts[0] != tc.want {
			t.Errorf("%s %s: got %s %v, want %d", tc.prec, tc.ts, render(res), res.Errors, tc.want)
		}
	}
	// Overflow once converted refuses the line.
	for _, tc := range []struct {
		prec Precision
		ts   string
	}{
		{Second, "9223372036854776"},
		{Second, "-9223372036854776"},
		{Minute, "153722867280913"},
		{Hour, "2562047788016"},
	} {
		res := parse(t, NewParser(Options{}), "m v=1 "+tc.ts, "", tc.prec)
		if len(res.Batches) != 0 || len(res.Errors) != 1 || !strings.Contains(res.Errors[0].Msg, "out of range") {
			t.Errorf("%s %s: got %s %v, want an out-of-range error", tc.prec, tc.ts, render(res), res.Errors)
		}
	}
}

func TestParsePrecision(t *testing.T) {
	for _, tc := range []struct {
		s    string
		v2   bool
		want Precision
		ok   bool
	}{
		{"", false, Nanosecond, true}, {"n", false, Nanosecond, true}, {"ns", false, Nanosecond, true},
		{"u", false, Microsecond, true}, {"us", false, Microsecond, true}, {"µ", false, Microsecond, true},
		{"ms", false, Millisecond, true}, {"s", false, Second, true}, {"m", false, Minute, true}, {"h", false, Hour, true},
		{"", true, Nanosecond, true}, {"ns", true, Nanosecond, true}, {"us", true, Microsecond, true},
		{"ms", true, Millisecond, true}, {"s", true, Second, true},
		{"n", true, 0, false}, {"u", true, 0, false}, {"m", true, 0, false}, {"h", true, 0, false},
		{"x", false, 0, false}, {"NS", false, 0, false}, {"sec", true, 0, false},
	} {
		got, err := ParsePrecision(tc.s, tc.v2)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("ParsePrecision(%q, v2=%v) = %v, %v; want %v ok=%v", tc.s, tc.v2, got, err, tc.want, tc.ok)
		}
	}
}

// TestParse_RefusedLines checks each bad line alone between two good
// lines: the bad line is refused with its line number, the column and
// reason, and the good lines around it are kept.
func TestParse_RefusedLines(t *testing.T) {
	long := strings.Repeat("x", 1025)
	var manyTags strings.Builder
	manyTags.WriteString("m")
	for i := range 10000 {
		fmt.Fprintf(&manyTags, ",t%d=v", i)
	}
	manyTags.WriteString(" v=1 1")
	for _, tc := range []struct {
		name, line string
		col        int
		msg        string
		fields     int // rejected points counted for the line
	}{
		{"no field set", "m,t=a", 6, "no field set", 1},
		{"only measurement and space", "m ", 3, "no field set", 1},
		{"missing measurement", ",t=a v=1", 1, "missing measurement", 1},
		{"tag without =", "m,t v=1", 3, `tag "t" has no value`, 1},
		{"empty tag key", "m,=a v=1", 3, "empty tag key", 1},
		{"unescaped = in tag value", "m,t=a=b v=1", 6, "unescaped '='", 1},
		{"field without =", "m v", 3, `field "v" has no value (missing '=')`, 1},
		{"empty field key", "m =1", 3, "empty field key", 1},
		{"empty field value", "m v=", 5, `value "" of field "v" has no value`, 1},
		{"trailing comma", "m v=1, 5", 7, `field "" has no value`, 2},
		{"string field (strict)", `m v=1,s="text",w=2 5`, 9, `field "s" has a string value`, 3},
		{"string field first (strict)", `m s="a,b c"`, 5, `field "s" has a string value`, 1},
		{"unterminated string", `m s="abc`, 5, "no closing quote", 1},
		{"garbage after string", `m s="a"x=1`, 5, `string value`, 1},
		{"NaN", "m v=NaN", 5, "NaN or Inf", 1},
		{"nan lower", "m v=nan", 5, "NaN or Inf", 1},
		{"+Inf", "m a=1,v=+Inf", 9, "NaN or Inf", 2},
		{"-Inf", "m v=-Inf", 5, "NaN or Inf", 1},
		{"Infinity", "m v=Infinity", 5, "NaN or Inf", 1},
		{"float out of range", "m v=1e400", 5, "out of the float64 range", 1},
		{"hex float", "m v=0x1p3", 5, "not a number", 1},
		{"bad float", "m v=1.2.3", 5, "not a number", 1},
		{"bare word", "m v=hello", 5, "not a number", 1},
		{"int overflow", "m v=9223372036854775808i", 5, "out of the int64 range", 1},
		{"int underflow", "m v=-9223372036854775809i", 5, "out of the int64 range", 1},
		{"bad int", "m v=1.5i", 5, "not a valid integer", 1},
		{"uint overflow", "m v=18446744073709551616u", 5, "out of the uint64 range", 1},
		{"negative uint", "m v=-1u", 5, "not a valid unsigned", 1},
		{"bad timestamp", "m v=1 12x", 7, "invalid timestamp", 1},
		{"float timestamp", "m v=1 1.5", 7, "invalid timestamp", 1},
		{"timestamp overflow", "m v=1 9223372036854775808", 7, "out of the int64 range", 1},
		{"text after timestamp", "m v=1 1 2", 9, `unexpected "2" after the timestamp`, 1},
		{"invalid UTF-8 tag value", "m,t=\xff\xfe v=1", 5, "not valid UTF-8", 1},
		{"invalid UTF-8 measurement", "\xffm v=1", 1, "not valid UTF-8", 1},
		{"invalid UTF-8 tag key", "m,\xff=a v=1", 3, "not valid UTF-8", 1},
		{"invalid UTF-8 field key", "m \xff=1", 3, "not valid UTF-8", 1},
		{"NUL in tag value", "m,t=a\x00b v=1", 5, "control character U+0000", 1},
		{"tab in tag value", "m,t=a\tb v=1", 5, "control character U+0009", 1},
		{"DEL in tag value", "m,t=a\x7f v=1", 5, "control character U+007F", 1},
		{"C1 control in tag value", "m,t=a\u0085 v=1", 5, "control character U+0085", 1},
		{"CR inside the line", "m,t=a\rb v=1", 5, "control character U+000D", 1},
		{"tag key __name__", "m,__name__=x v=1", 3, "reserved for the metric name", 1},
		{"duplicate tag key", "m,a=1,a=2 v=1", 7, `duplicate tag key "a"`, 1},
		{"tag keys sanitizing alike", "m,a-b=1,a\\ b=2,a_b=3 v=1", 16, `tag keys "a\\ b" and "a_b" both become label "a_b"`, 1},
		{"tag value too long", "m,t=" + long + " v=1", 5, "is 1025 bytes, limit is 1024", 1},
		{"tag value far too long", "m,t=" + strings.Repeat("y", 100<<10) + " v=1", 5, "is 102400 bytes, limit is 1024", 1},
		{"tag key too long", "m," + strings.Repeat("k", 129) + "=v v=1", 3, "limit is 128", 1},
		{"metric name too long", "m " + strings.Repeat("f", 1023) + "=1", 3, "metric name", 1},
		{"10,000 tags", manyTags.String(), 179, "too many tags", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := "ok v=1 1\n" + tc.line + "\nok v=2 2\n"
			res := parse(t, NewParser(Options{RefuseStringFields: true}), body, "", Millisecond)
			if got, want := render(res), "ok_v{} 1:1 2:2 @1,3\n"; got != want {
				t.Errorf("good lines: got %q, want %q", got, want)
			}
			if len(res.Errors) != 1 {
				t.Fatalf("errors: %v, want one", res.Errors)
			}
			e := res.Errors[0]
			if e.Line != 2 || e.Column != tc.col || !strings.Contains(e.Msg, tc.msg) {
				t.Errorf("error = line %d col %d %q; want line 2 col %d containing %q", e.Line, e.Column, e.Msg, tc.col, tc.msg)
			}
			if res.Lines != 3 || res.RejectedLines != 1 || res.Points != 2 || res.RejectedPoints != tc.fields {
				t.Errorf("counts: lines %d rejected %d points %d rejected points %d; want 3 1 2 %d",
					res.Lines, res.RejectedLines, res.Points, res.RejectedPoints, tc.fields)
			}
		})
	}
}

func TestParse_NewlineInTagEndsTheLine(t *testing.T) {
	// A newline cannot be escaped: "m,t=a\" is refused and "b v=1" is a line.
	res := parse(t, NewParser(Options{}), "m,t=a\\\nb v=1 1\n", "", Millisecond)
	if got, want := render(res), "b_v{} 1:1 @2\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if len(res.Errors) != 1 || res.Errors[0].Line != 1 {
		t.Fatalf("errors %v", res.Errors)
	}
}

func TestParse_ErrorDetailsAreBoundedCountsAreNot(t *testing.T) {
	p := NewParser(Options{MaxErrors: 3})
	body := strings.Repeat("bad\n", 10) + "m v=1 1\n"
	res := parse(t, p, body, "", Millisecond)
	if len(res.Errors) != 3 || res.RejectedLines != 10 || res.RejectedPoints != 10 || res.Points != 1 {
		t.Fatalf("errors %d rejected %d/%d points %d", len(res.Errors), res.RejectedLines, res.RejectedPoints, res.Points)
	}
	for i, e := range res.Errors {
		if e.Line != i+1 || e.Msg == "" {
			t.Fatalf("error %d = %+v", i, e)
		}
	}
}

func TestParse_TooManyPoints(t *testing.T) {
	p := NewParser(Options{MaxPoints: 5})
	if _, err := p.Parse([]byte("m a=1,b=2,c=3\nm a=1,b=2,c=3\n"), "", Millisecond, 0); !errors.Is(err, ErrTooManyPoints) {
		t.Fatalf("6 points with a limit of 5: err = %v", err)
	}
	// Exactly at the limit is fine, and the parser is usable afterwards.
	res, err := p.Parse([]byte("m a=1,b=2,c=3\nm a=1,b=2 1\n"), "", Millisecond, 0)
	if err != nil || res.Points != 5 {
		t.Fatalf("5 points: %v %+v", err, res)
	}
}

// TestParse_CacheGivesTheSameAnswers parses random bodies with one
// long-lived parser (tiny cache budget, so it is emptied often) and with a
// fresh parser each time; the answers must be identical.
func TestParse_CacheGivesTheSameAnswers(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	long := NewParser(Options{MaxCacheBytes: 4 << 10})
	for round := range 200 {
		var b strings.Builder
		for range 1 + rng.IntN(50) {
			fmt.Fprintf(&b, "m%d,h=%d,z=%d f%d=%d,g=%di %d\n", rng.IntN(3), rng.IntN(20), rng.IntN(2), rng.IntN(3), rng.IntN(9), rng.IntN(9), rng.IntN(1000))
			if rng.IntN(10) == 0 {
				b.WriteString("m,h=1 s=\"x\"\n")
			}
		}
		db := []string{"", "a", "b"}[rng.IntN(3)]
		got := parse(t, long, b.String(), db, Millisecond)
		gotS, gotE := render(got), fmt.Sprint(got.Errors)
		want := parse(t, NewParser(Options{}), b.String(), db, Millisecond)
		if wantS, wantE := render(want), fmt.Sprint(want.Errors); gotS != wantS || gotE != wantE {
			t.Fatalf("round %d: cached parser\n%s%s\nfresh parser\n%s%s", round, gotS, gotE, wantS, wantE)
		}
		if long.cacheBytes > 4<<10 {
			t.Fatalf("round %d: cache holds %d bytes after the call, budget 4096", round, long.cacheBytes)
		}
	}
}

// TestParseFloat_FastPathMatchesStrconv is an oracle test of the exact
// decimal fast path.
func TestParseFloat_FastPathMatchesStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		var s string
		switch rng.IntN(4) {
		case 0:
			s = strconv.FormatFloat(rng.NormFloat64()*math.Pow(10, float64(rng.IntN(30)-15)), 'f', rng.IntN(12), 64)
		case 1:
			s = strconv.FormatFloat(rng.Float64()*1e6, 'g', -1, 64)
		case 2:
			s = strconv.Itoa(rng.IntN(1e9)) + "." + strconv.Itoa(rng.IntN(1e6))
		default:
			s = fmt.Sprintf("%d.%0*d", rng.IntN(100), rng.IntN(15)+1, rng.IntN(1000))
		}
		if strings.ContainsAny(s, "eE") && rng.IntN(2) == 0 {
			continue
		}
		want, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("oracle cannot parse %q: %v", s, err)
		}
		got, reason := parseFloat([]byte(s))
		if reason != "" || math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("parseFloat(%q) = %v %q, strconv says %v", s, got, reason, want)
		}
	}
}

func TestParse_CacheStaysBoundedAcrossDatabases(t *testing.T) {
	p := NewParser(Options{MaxCacheBytes: 16 << 10})
	for i := range 2000 {
		parse(t, p, "", fmt.Sprintf("db-%d", i), Millisecond)
		if p.cacheBytes > 16<<10 || len(p.dbs) > 200 {
			t.Fatalf("after %d databases: %d cache bytes, %d databases cached", i+1, p.cacheBytes, len(p.dbs))
		}
	}
}

func TestParse_StringFieldsAreSkippedAndCounted(t *testing.T) {
	for _, tc := range []struct {
		name, body, want   string
		skipped, withLines int
	}{
		{"numeric and boolean kept, string skipped", `m v=1,s="a, b=c",ok=true,w=2i 5`, "m_v{} 5:1 @1\nm_ok{} 5:1 @1\nm_w{} 5:2 @1\n", 1, 1},
		{"only string fields: nothing stored", `m s="x",t="y z" 5`, "", 2, 1},
		{"escaped quote inside", `m s="a \"q\" b",v=3 5`, "m_v{} 5:3 @1\n", 1, 1},
		{"two lines", "m s=\"x\",v=1 5\nm v=2 6\nn u=\"\" 7", "m_v{} 5:1 6:2 @1,2\n", 2, 2},
		{"bad timestamp still refuses the line", `m s="x",v=1 1.5`, "", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := parse(t, NewParser(Options{}), tc.body, "", Millisecond)
			if got := render(res); got != tc.want {
				t.Fatalf("got %q, want %q (errors %v)", got, tc.want, res.Errors)
			}
			if res.SkippedStringFields != tc.skipped || res.SkippedStringLines != tc.withLines {
				t.Fatalf("skipped %d fields on %d lines, want %d on %d", res.SkippedStringFields, res.SkippedStringLines, tc.skipped, tc.withLines)
			}
		})
	}
}
