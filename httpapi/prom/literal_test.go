package prom

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tributarydb/tributary/httpapi"
)

func TestRewriteLiteralRegexps(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"literal", `up{job=~"api"}`, `up{job= "api"}`},
		{"group", `{__name__=~"cpu_(usage_user)",hostname=~"host_3"}`, `{__name__= "cpu_usage_user"  ,hostname= "host_3"}`},
		{"nested groups", `x{a=~"(a(b)c)"}`, `x{a= "abc"    }`},
		{"not regexp", `x{a!~"b"}`, `x{a!="b"}`},
		{"empty", `x{a=~""}`, `x{a= ""}`},
		{"empty group", `x{a=~"()"}`, `x{a= ""  }`},
		{"escaped dot", `x{a=~"a\\.b"}`, `x{a= "a.b"  }`},
		{"raw string", "x{a=~`a\\.b`}", `x{a= "a.b" }`},
		{"single quotes", `x{a=~'b'}`, `x{a= "b"}`},
		{"several selectors", `rate(x{a=~"b"}[5m]) / on(a) y{a=~"b|c", d=~"e"}`, `rate(x{a= "b"}[5m]) / on(a) y{a=~"b|c", d= "e"}`},
		{"alternation", `x{a=~"b|c"}`, `x{a=~"b|c"}`},
		{"dot", `x{a=~"b."}`, `x{a=~"b."}`},
		{"class", `x{a=~"[bc]"}`, `x{a=~"[bc]"}`},
		{"one-character class", `x{a=~"[b]"}`, `x{a= "b"  }`},
		{"case folding", `x{a=~"(?i)b"}`, `x{a=~"(?i)b"}`},
		{"anchors stay regexps", `x{a=~"^b$"}`, `x{a=~"^b$"}`},
		{"invalid regexp", `x{a=~"("}`, `x{a=~"("}`},
		{"absent", `absent(x{a=~"b"})`, `absent(x{a=~"b"})`},
		{"absent_over_time", `absent_over_time(x{a=~"b"}[5m])`, `absent_over_time(x{a=~"b"}[5m])`},
		{"equality only", `x{a="b"}`, `x{a="b"}`},
		{"tilde in a string", `label_replace(x, "a", "=~", "b", "c")`, `label_replace(x, "a", "=~", "b", "c")`},
		{"comment", "x{a=~\"b\"} # =~\"c\"", "x{a= \"b\"} # =~\"c\""},
		{"lex error", `x{a=~"b`, `x{a=~"b`},
	}
	var c literalCache
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := c.rewriteLiteralRegexps(tc.in)
			if got != tc.want {
				t.Fatalf("rewrite %s\ngot  %s\nwant %s", tc.in, got, tc.want)
			}
			if len(got) != len(tc.in) {
				t.Fatalf("rewrite changed the length: %q", got)
			}
			// Twice: the second answer comes from the cache.
			if again := c.rewriteLiteralRegexps(tc.in); again != got {
				t.Fatalf("cached rewrite %q, first %q", again, got)
			}
		})
	}
}

// TestRewriteLiteralRegexps_SameSelectors parses queries before and after
// the rewrite: the selectors must select the same values and keep their
// positions.
func TestRewriteLiteralRegexps_SameSelectors(t *testing.T) {
	var c literalCache
	for _, qs := range []string{
		`sum by (h) (rate({__name__=~"cpu_(usage_user)", h=~"h1", i!~"x"}[5m])) > on(h) group_left y{h=~'z'}`,
		"max_over_time(x{a=~`a\\.b`, b=~\"\\u00e9t\\u00e9\"}[1m] offset 5m)",
	} {
		rqs := c.rewriteLiteralRegexps(qs)
		if rqs == qs {
			t.Fatalf("%s: not rewritten", qs)
		}
		orig, err := parser.ParseExpr(qs)
		must(t, err)
		rewritten, err := parser.ParseExpr(rqs)
		must(t, err)
		var a, b []*parser.VectorSelector
		parser.Inspect(orig, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				a = append(a, vs)
			}
			return nil
		})
		parser.Inspect(rewritten, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				b = append(b, vs)
			}
			return nil
		})
		if len(a) != len(b) {
			t.Fatalf("%s: %d selectors, rewritten %d", qs, len(a), len(b))
		}
		for i := range a {
			if a[i].PosRange != b[i].PosRange {
				t.Errorf("%s: selector %d at %v, rewritten at %v", qs, i, a[i].PosRange, b[i].PosRange)
			}
			for j, m := range a[i].LabelMatchers {
				r := b[i].LabelMatchers[j]
				for _, v := range []string{m.Value, "", "h1", "x", "z", "a.b", "aXb", "été", "cpu_usage_user"} {
					if m.Matches(v) != r.Matches(v) {
						t.Errorf("%s: matcher %s and rewritten %s disagree on %q", qs, m, r, v)
					}
				}
			}
		}
	}
}

// TestLiteralRegexps_AnswersMatchEngine sends queries with one-literal
// regular expressions through the API and requires the engine's answer on
// the original query over an in-memory copy of the data, byte for byte:
// values, labels, and the positions that annotations quote.
func TestLiteralRegexps_AnswersMatchEngine(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	ref := &refStorage{}
	e.writeChunked(genData(rand.New(rand.NewPCG(7, 8))), ref)
	ng := refEngine()
	start, end := ms(testNow.Add(-2*time.Hour)), ms(testNow.Add(-time.Hour))
	for _, qs := range []string{
		`max(max_over_time({__name__=~"(gauge)",host=~"h1"}[1m])) by (__name__)`,
		`max(max_over_time({__name__=~"gauge",host=~"h1|h2"}[1m])) by (__name__)`,
		`rate(gauge{host=~"h2"}[5m])`, // info annotation: not a counter, with its position
		`sum by (host) (rate(counter_total{dc!~"a"}[5m]))`,
		`absent(gauge{host=~"nope"})`,
		`absent_over_time(gauge{host=~"nope"}[5m])`,
		`gauge{host=~"h3"} + on(host) group_left sparse{host=~'h3'}`,
		`count_over_time({__name__=~"special",kind=~"(nan)"}[90s])`,
	} {
		e.compareWithRef(ng, ref, qs, start, end, time.Minute)
		e.compareWithRef(ng, ref, qs, end, end, 0)
	}
}

// TestLiteralRegexps_ParseErrorOfOriginal: a query that does not parse is
// answered with the error of the query as written.
func TestLiteralRegexps_ParseErrorOfOriginal(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	for _, qs := range []string{`sum(gauge{host=~"h1"}`, `gauge{host=~"h1"} +`, `gauge{host=~"(h1)"} offset`} {
		_, want := parser.ParseExpr(qs)
		if want == nil {
			t.Fatalf("%s parses", qs)
		}
		code, resp, body := e.call(http.MethodGet, "/api/v1/query", map[string][]string{"query": {qs}, "time": {unixParam(ms(testNow))}})
		if code != http.StatusBadRequest || !strings.Contains(resp.Error, want.Error()) {
			t.Fatalf("%s: %d %s, want the error %q", qs, code, body, want)
		}
	}
}

// TestRewriteLiteralRegexps_QueryCacheBounded: distinct query strings past
// the bound start the cache over, long ones are rewritten without being
// kept, and answers from the cache equal fresh rewrites.
func TestRewriteLiteralRegexps_QueryCacheBounded(t *testing.T) {
	var c literalCache
	for i := range maxCachedQueries + 10 {
		qs := fmt.Sprintf(`x{a=~"h%d"}`, i)
		want := fmt.Sprintf(`x{a= "h%d"}`, i)
		if got := c.rewriteLiteralRegexps(qs); got != want {
			t.Fatalf("%s: got %s, want %s", qs, got, want)
		}
		if got := c.rewriteLiteralRegexps(qs); got != want {
			t.Fatalf("%s cached: got %s, want %s", qs, got, want)
		}
		if c.queries.len() > maxCachedQueries {
			t.Fatalf("%d queries cached, bound %d", c.queries.len(), maxCachedQueries)
		}
	}
	long := `x{a=~"b"} or x{a=~"` + strings.Repeat("c", maxCachedQueryBytes) + `"}`
	before := c.queries.len()
	if got := c.rewriteLiteralRegexps(long); got == long || len(got) != len(long) {
		t.Fatalf("long query not rewritten: %.40s…", got)
	}
	if c.queries.len() != before {
		t.Fatal("a query over maxCachedQueryBytes was cached")
	}
}
