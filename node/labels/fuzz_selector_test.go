package labels

import (
	"strings"
	"testing"
)

// FuzzParseSelector: the node's PromQL-style selector parser never panics,
// names the offset of what it refuses, and what it accepts has a metric
// name or at least one matcher, each with a label name.
func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{`cpu`, `cpu{host="pi-7",core=~"0|1"}`, `{__name__="cpu"}`, `{a!="b",c!~"d.*"}`,
		`cpu{}`, `{`, `cpu{host="`, `cpu{host=~"("}`, `cpu{,}`, "cpu{h=\"\\u00e9\"}", `x{a="b" , c = "d"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := ParseSelector(s)
		if err != nil {
			if !strings.Contains(err.Error(), "offset") {
				t.Fatalf("%q: error without an offset: %v", s, err)
			}
			return
		}
		if len(ms) == 0 {
			t.Fatalf("%q: accepted with no matcher", s)
		}
		for _, m := range ms {
			if m.Name == "" {
				t.Fatalf("%q: matcher without a label name: %v", s, m)
			}
		}
	})
}
