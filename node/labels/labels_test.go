package labels

import (
	"errors"
	"testing"
)

func TestNew_SortsDropsEmptyAndValidates(t *testing.T) {
	cases := []struct {
		name    string
		in      []Label
		want    string
		wantErr bool
	}{
		{"sorted", []Label{{"z", "1"}, {MetricName, "cpu"}, {"a", "2"}}, `cpu{a="2",z="1"}`, false},
		{"empty value dropped", []Label{{MetricName, "cpu"}, {"a", ""}}, `cpu{}`, false},
		{"no name", []Label{{"a", "b"}}, "", true},
		{"duplicate", []Label{{MetricName, "cpu"}, {"a", "1"}, {"a", "2"}}, "", true},
		{"bad char", []Label{{MetricName, "cpu"}, {"a b", "1"}}, "", true},
		{"digit first", []Label{{MetricName, "cpu"}, {"1a", "1"}}, "", true},
		{"bad utf8", []Label{{MetricName, "cpu"}, {"a", "\xff"}}, "", true},
		{"dotted name ok", []Label{{MetricName, "cpu"}, {"host.name", "x"}}, `cpu{host.name="x"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ls, err := New(c.in, DefaultLimits)
			if c.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("err=%v, want ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ls.String() != c.want {
				t.Fatalf("got %s want %s", ls, c.want)
			}
			back, err := DecodeKey(ls.AppendKey(nil))
			if err != nil || !Equal(back, ls) {
				t.Fatalf("key round trip: %v %v", back, err)
			}
		})
	}
}

func TestLimits(t *testing.T) {
	lim := Limits{MaxLabels: 2, MaxNameBytes: 4, MaxValueBytes: 3}
	for _, in := range [][]Label{
		{{MetricName, "c"}, {"a", "1"}, {"b", "2"}},
		{{MetricName, "c"}, {"abcde", "1"}},
		{{MetricName, "c"}, {"a", "1234"}},
	} {
		if _, err := New(in, lim); err == nil {
			t.Errorf("New(%v) accepted labels over the limits", in)
		}
	}
}

func TestParseSelector(t *testing.T) {
	cases := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{`cpu`, []string{`__name__="cpu"`}, false},
		{`cpu{host="a", core=~"0|1"}`, []string{`__name__="cpu"`, `host="a"`, `core=~"0|1"`}, false},
		{`{__name__!="x",a!~'b.*'}`, []string{`__name__!="x"`, `a!~"b.*"`}, false},
		{`x{a='l1\nl2',b='it\'s',c='say "hi"',d='back\\'}`, []string{`__name__="x"`, `a="l1\nl2"`, `b="it's"`, `c="say \"hi\""`, `d="back\\"`}, false},
		{`x{a='bad \q escape'}`, nil, true},
		{`cpu{host=a}`, nil, true},
		{`cpu{host="a"`, nil, true},
		{`cpu{host~"a"}`, nil, true},
		{`{a=~"("}`, nil, true},
		{``, nil, true},
	}
	for _, c := range cases {
		ms, err := ParseSelector(c.in)
		if c.wantErr {
			if err == nil {
				t.Errorf("%q: no error", c.in)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if len(ms) != len(c.want) {
			t.Errorf("%q: %d matchers want %d", c.in, len(ms), len(c.want))
			continue
		}
		for i, m := range ms {
			if m.String() != c.want[i] {
				t.Errorf("%q: matcher %d = %s want %s", c.in, i, m, c.want[i])
			}
		}
	}
}

func TestMatcher(t *testing.T) {
	m, _ := NewMatcher(MatchRegexp, "a", "b|c")
	if !m.Matches("b") || m.Matches("bc") || m.MatchesEmpty() {
		t.Fatal("regexp matcher is not anchored")
	}
	m, _ = NewMatcher(MatchNotEqual, "a", "x")
	if !m.MatchesEmpty() {
		t.Fatal("a!=x must match series without a")
	}
}

func FuzzDecodeKey(f *testing.F) {
	f.Add(FromStrings(MetricName, "cpu", "a", "b").AppendKey(nil))
	f.Add([]byte{5, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		ls, err := DecodeKey(b)
		if err != nil {
			return
		}
		back, err := DecodeKey(ls.AppendKey(nil))
		if err != nil || !Equal(back, ls) {
			t.Fatalf("re-encode mismatch")
		}
	})
}

func TestMatchType_StringIsTheOperatorAndNeverPanics(t *testing.T) {
	for mt, want := range map[MatchType]string{
		MatchEqual: "=", MatchNotEqual: "!=", MatchRegexp: "=~", MatchNotRegexp: "!~",
		MatchNotRegexp + 1: "MatchType(4)", -1: "MatchType(-1)",
	} {
		if got := mt.String(); got != want {
			t.Errorf("MatchType(%d).String() = %q, want %q", int(mt), got, want)
		}
	}
}
