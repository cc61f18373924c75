package enum

import "testing"

type color uint8

const (
	red   color = 1
	green color = 2
)

type signed int32

func TestName_NamedValuesAndFallbacks(t *testing.T) {
	names := []string{red: "red", green: "green"}
	for _, tc := range []struct {
		name string
		v    color
		want string
	}{
		{"named", red, "red"},
		{"last named", green, "green"},
		{"zero without a name", 0, "color(0)"},
		{"past the table", 3, "color(3)"},
		{"largest value", 255, "color(255)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Name(names, tc.v, "color"); got != tc.want {
				t.Errorf("Name(%d) = %q, want %q", tc.v, got, tc.want)
			}
		})
	}
}

func TestName_NegativeValueIsNotAnIndex(t *testing.T) {
	names := []string{"zero", "one"}
	if got := Name(names, signed(-1), "Signed"); got != "Signed(-1)" {
		t.Errorf("Name(-1) = %q, want Signed(-1)", got)
	}
	if got := Name(names, signed(1), "Signed"); got != "one" {
		t.Errorf("Name(1) = %q, want one", got)
	}
}
