package promtext

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	text := `# HELP up whether it is up
# TYPE up gauge
up 1
tributary_replication_acked_through_seq 42 1700000000000
http_requests_total{path="/a b",code="200"} 7

rss_bytes 1.5e+06
`
	m, err := Parse(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"up": 1, "tributary_replication_acked_through_seq": 42,
		`http_requests_total{path="/a b",code="200"}`: 7, "rss_bytes": 1.5e6}
	if len(m) != len(want) {
		t.Errorf("got %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	for _, bad := range []string{"up", "up x", "up 1 2 3", `x{a="b" 1`} {
		if _, err := Parse(strings.NewReader(bad + "\n")); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
