package selector

import (
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

func TestSelector_Matches(t *testing.T) {
	// Sorted by name, as the catalog keeps an edge's labels.
	berlinPi4 := labels.Labels{{Name: "model", Value: "pi4b"}, {Name: "site", Value: "berlin"}}
	berlinPi3 := labels.Labels{{Name: "model", Value: "pi3"}, {Name: "site", Value: "berlin"}}
	paris := labels.Labels{{Name: "model", Value: "pi4b"}, {Name: "site", Value: "paris"}}
	none := labels.Labels(nil)
	for _, tc := range []struct {
		sel  string
		want [4]bool // berlinPi4, berlinPi3, paris, none
	}{
		{``, [4]bool{true, true, true, true}},
		{`{}`, [4]bool{true, true, true, true}},
		{`site="berlin"`, [4]bool{true, true, false, false}},
		{`{site="berlin"}`, [4]bool{true, true, false, false}},
		{`site="berlin", model=~"pi4.*"`, [4]bool{true, false, false, false}},
		{`model=~"pi4"`, [4]bool{false, false, false, false}}, // anchored
		{`site!="paris"`, [4]bool{true, true, false, true}},
		{`site!~"ber.*|par.*"`, [4]bool{false, false, false, true}},
		{`site=""`, [4]bool{false, false, false, true}},
	} {
		s, err := Parse(tc.sel)
		if err != nil {
			t.Fatalf("%q: %v", tc.sel, err)
		}
		for i, ls := range []labels.Labels{berlinPi4, berlinPi3, paris, none} {
			if got := s.Matches(ls); got != tc.want[i] {
				t.Errorf("%q matches %v: %v, want %v", tc.sel, ls, got, tc.want[i])
			}
		}
	}
}

func TestParse_Refuses(t *testing.T) {
	for _, s := range []string{`site=`, `site="a"}`, `up`, `{__name__="up"}`, `site=~"("`, `site="a" or`} {
		if _, err := Parse(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

func TestSelector_String(t *testing.T) {
	s, err := Parse(` site="berlin",model=~"pi4.*" `)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.String(); got != `{site="berlin", model=~"pi4.*"}` {
		t.Errorf("String %s", got)
	}
}
