package labels

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"
)

func TestLiteralSet(t *testing.T) {
	tests := []struct {
		expr string
		want []string // nil: not a literal set
	}{
		{"host_1|host_7", []string{"host_1", "host_7"}},
		{"host_12|host_57|host_1", []string{"host_1", "host_12", "host_57"}},
		{"cpu_(usage_user)", []string{"cpu_usage_user"}},
		{"(?s:cpu_(usage_user|usage_system))", []string{"cpu_usage_system", "cpu_usage_user"}},
		{"a[bc]", []string{"ab", "ac"}},
		{"a|a", []string{"a"}},
		{"x?", []string{"", "x"}},
		{"", []string{""}},
		{"cpu_.*", nil},
		{"(?s:cpu_.*)", nil},
		{"(?i)host_1", nil},
		{"host_[0-9]+", nil},
		{"[a-z][a-z]", nil}, // 676 strings
		{"^a$", nil},
		{"\ufffd", nil},
		{"(", nil},
	}
	for _, tt := range tests {
		got, ok := literalSet(tt.expr)
		if ok != (tt.want != nil) || !slices.Equal(got, tt.want) {
			t.Errorf("literalSet(%q) = %q, %v; want %q", tt.expr, got, ok, tt.want)
		}
	}
}

// TestLiteralSet_Oracle: whenever a matcher has a literal set, a value is
// in it exactly when the compiled regexp matches the value, and the
// matchers (which test the set, not the regexp) agree with the regexp.
func TestLiteralSet_Oracle(t *testing.T) {
	exprs := []string{"host_1|host_7", "h(o|a)st_[1-3]", "ab?c|d", "(?s:x|y|xy)", "a|b|", "[\x00-\x03]z", "é|e"}
	alphabet := []string{"", "a", "b", "c", "d", "x", "y", "z", "h", "o", "s", "t", "_", "1", "3", "7", "host_", "\x00", "\x03", "é", "e", "\xff"}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, expr := range exprs {
		m, err := NewMatcher(MatchRegexp, "l", expr)
		if err != nil {
			t.Fatal(err)
		}
		set, ok := m.LiteralSet()
		if !ok {
			t.Fatalf("%q has no literal set", expr)
		}
		values := append([]string(nil), set...)
		for range 5000 {
			v := ""
			for range rng.IntN(5) {
				v += alphabet[rng.IntN(len(alphabet))]
			}
			values = append(values, v)
		}
		nm, err := NewMatcher(MatchNotRegexp, "l", expr)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := nm.LiteralSet(); ok {
			t.Fatalf("!~%q has a literal set", expr)
		}
		re := regexp.MustCompile("^(?:" + expr + ")$")
		for _, v := range values {
			_, in := slices.BinarySearch(set, v)
			want := re.MatchString(v)
			if in != want || m.Matches(v) != want || nm.Matches(v) == want {
				t.Fatalf("%q: value %q: regexp matches %v, in set %v, =~ matches %v, !~ matches %v", expr, v, want, in, m.Matches(v), nm.Matches(v))
			}
		}
	}
}
