package prom

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
)

// TestAppendString_IsValidJSON: any string, valid UTF-8 or not, encodes to
// a JSON string that decodes to the same text (invalid bytes as U+FFFD).
func TestAppendString_IsValidJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := []string{"", "plain", `quote " and \ backslash`, "nul \x00 bell \x07 nl \n cr \r tab \t", "\u2028\u2029", "é 中文 🙂", "bad \xff\xfe utf8", "\x7f"}
	for range 2000 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		cases = append(cases, string(b))
	}
	for _, s := range cases {
		enc := appendString(nil, s)
		var got string
		if err := json.Unmarshal(enc, &got); err != nil {
			t.Fatalf("%q encodes to invalid JSON %s: %v", s, enc, err)
		}
		var want strings.Builder
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			want.WriteRune(r) // RuneError for an invalid byte
			i += size
		}
		if got != want.String() {
			t.Fatalf("%q decodes to %q, want %q", s, got, want.String())
		}
	}
}

func TestAppendTimestampAndValue(t *testing.T) {
	for _, tc := range []struct {
		t    int64
		want string
	}{
		{0, "0"}, {1000, "1"}, {1500, "1.500"}, {1001, "1.001"}, {1010, "1.010"}, {-1500, "-1.500"}, {-1, "-0.001"},
		{1435781451781, "1435781451.781"}, {math.MinInt64, "-9223372036854775.808"}, {math.MaxInt64, "9223372036854775.807"},
	} {
		if got := string(appendTimestamp(nil, tc.t)); got != tc.want {
			t.Errorf("timestamp %d: %s, want %s", tc.t, got, tc.want)
		}
	}
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{1, `"1"`}, {1.5, `"1.5"`}, {-0.25, `"-0.25"`}, {math.NaN(), `"NaN"`}, {math.Inf(1), `"+Inf"`}, {math.Inf(-1), `"-Inf"`},
		{1e-7, `"1e-07"`}, {1e21, `"1e+21"`}, {1e20, `"100000000000000000000"`}, {0.000001, `"0.000001"`}, {0, `"0"`},
	} {
		if got := string(appendValue(nil, tc.v)); got != tc.want {
			t.Errorf("value %v: %s, want %s", tc.v, got, tc.want)
		}
	}
}

// TestAppendValue_IntegersAsAppendFloat: the integer shortcut writes what
// the general path writes, around zero, the powers of two and 2^53.
func TestAppendValue_IntegersAsAppendFloat(t *testing.T) {
	general := func(f float64) string {
		format := byte('f')
		if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
			format = 'e'
		}
		return `"` + strconv.FormatFloat(f, format, -1, 64) + `"`
	}
	vals := []float64{0, math.Copysign(0, -1), 1, -1, 58, 100, 1e15, 1e16, -1e17, 1 << 52, 1<<53 - 1, 1 << 53, 1<<53 + 2, -(1 << 53), 1e20, 0.5, -0.5, 1.0000000000000002}
	rng := rand.New(rand.NewPCG(3, 3))
	for range 10000 {
		f := float64(rng.Int64N(1<<54) - 1<<53)
		vals = append(vals, f, f/float64(1+rng.IntN(1000)), math.Ldexp(f, rng.IntN(20)-10))
	}
	for _, f := range vals {
		if got, want := string(appendValue(nil, f)), general(f); got != want {
			t.Fatalf("value %v (%x): %s, want %s", f, math.Float64bits(f), got, want)
		}
	}
}

func TestAppendResult_Shapes(t *testing.T) {
	ls := labels.FromStrings("__name__", "m", "a", "x\"y")
	for _, tc := range []struct {
		v    parser.Value
		want string
	}{
		{promql.Matrix{{Metric: ls, Floats: []promql.FPoint{{T: 1000, F: 1}, {T: 2500, F: math.NaN()}}}},
			`{"resultType":"matrix","result":[{"metric":{"__name__":"m","a":"x\"y"},"values":[[1,"1"],[2.500,"NaN"]]}]}`},
		{promql.Matrix{}, `{"resultType":"matrix","result":[]}`},
		{promql.Vector{{Metric: ls, T: 1000, F: 2}}, `{"resultType":"vector","result":[{"metric":{"__name__":"m","a":"x\"y"},"value":[1,"2"]}]}`},
		{promql.Vector{}, `{"resultType":"vector","result":[]}`},
		{promql.Scalar{T: 4000, V: 2}, `{"resultType":"scalar","result":[4,"2"]}`},
		{promql.String{T: 4000, V: "s\n"}, `{"resultType":"string","result":[4,"s\n"]}`},
	} {
		got := string(appendResult(nil, tc.v))
		if got != tc.want {
			t.Errorf("%T: %s, want %s", tc.v, got, tc.want)
		}
		var check any
		if err := json.Unmarshal([]byte(got), &check); err != nil {
			t.Errorf("%T: invalid JSON: %v", tc.v, err)
		}
	}
}

func TestRespondError_Envelope(t *testing.T) {
	rec := httptest.NewRecorder()
	respondError(rec, &apiError{typ: errUnavailable, status: 503, msg: "busy \"now\"", retryAfter: true})
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" || rec.Header().Get("Content-Type") != "application/json" ||
		rec.Body.String() != `{"status":"error","errorType":"unavailable","error":"busy \"now\""}` {
		t.Fatalf("%d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}

func TestParseTimeAndDuration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64 // ms
		ok   bool
	}{
		{"0", 0, true}, {"1.5", 1500, true}, {"1435781451.781", 1435781451781, true}, {"-1.5", -1500, true}, {"1.0004", 1000, true},
		{"2015-07-01T20:10:51.781Z", 1435781451781, true}, {"2015-07-01T22:10:51+02:00", 1435781451000, true},
		{minTimeText, minTime.UnixMilli(), true}, {maxTimeText, maxTime.UnixMilli(), true},
		{"1e300", 0, false}, {"NaN", 0, false}, {"Inf", 0, false}, {"", 0, false}, {"yesterday", 0, false},
	} {
		got, err := parseTime(tc.in)
		if (err == nil) != tc.ok || tc.ok && got.UnixMilli() != tc.want {
			t.Errorf("parseTime(%q) = %v (%d ms), %v; want %d ms ok=%v", tc.in, got, got.UnixMilli(), err, tc.want, tc.ok)
		}
	}
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"15", 15 * time.Second, true}, {"0.5", 500 * time.Millisecond, true}, {"1m30s", 90 * time.Second, true}, {"1d", 24 * time.Hour, true},
		{"5m", 5 * time.Minute, true}, {"1e30", 0, false}, {"NaN", 0, false}, {"soon", 0, false}, {"", 0, false},
	} {
		got, err := parseDuration(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseDuration(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
