package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestInt_ThousandsSeparators(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0"}, {999, "999"}, {1000, "1,000"}, {1234567, "1,234,567"}, {-1234567, "-1,234,567"}, {100000, "100,000"},
	}
	for _, tc := range tests {
		if got := Int(tc.in); got != tc.want {
			t.Errorf("Int(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestWhole_RoundsAndSaysNA(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"}, {2_999_999.6, "3,000,000"}, {1234.4, "1,234"}, {-1500.5, "-1,501"}, {math.NaN(), "n/a"},
	}
	for _, tc := range tests {
		if got := Whole(tc.in); got != tc.want {
			t.Errorf("Whole(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestTable_AlignsColumnsAndRightAlignsNumbers(t *testing.T) {
	tb := Table{Header: []string{"metric", "measured", "target"}, RightAlign: []bool{false, true, true}}
	tb.Add("points/s", "1,234", "≥ 3,000,000")
	tb.Add("peak RSS (MiB)", "96.3", "≤ 128")
	var buf bytes.Buffer
	if err := tb.Write(&buf); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"metric          measured       target\n" +
		"--------------  --------  -----------\n" +
		"points/s           1,234  ≥ 3,000,000\n" +
		"peak RSS (MiB)      96.3        ≤ 128\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

func TestWriteJSONLine_OneLineAndNaNIsNull(t *testing.T) {
	var buf bytes.Buffer
	v := struct {
		A Number `json:"a"`
		B Number `json:"b"`
		S string `json:"s"`
	}{A: 1.5, B: Number(math.NaN()), S: "x\ny"}
	if err := WriteJSONLine(&buf, v); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.HasSuffix(out, "\n") {
		t.Fatalf("want exactly one line, got %q", out)
	}
	var back map[string]any
	if err := json.Unmarshal([]byte(out), &back); err != nil {
		t.Fatal(err)
	}
	if back["a"] != 1.5 || back["b"] != nil || back["s"] != "x\ny" {
		t.Errorf("decoded %v", back)
	}
}

func TestWriteNotesAndJSONLine_NotesThenBlankThenJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteNotesAndJSONLine(&buf, []string{"first", "second"}, map[string]int{"points": 3}); err != nil {
		t.Fatal(err)
	}
	if want := "note: first\nnote: second\n\n{\"points\":3}\n"; buf.String() != want {
		t.Errorf("got %q, want %q", buf.String(), want)
	}
}

func TestTarget_MetAndFormat(t *testing.T) {
	atLeast := Target{Value: 3e6}
	atMost := Target{Value: 0.3, AtMost: true}
	if !atLeast.Met(3e6) || atLeast.Met(2.9e6) || atLeast.Met(math.NaN()) {
		t.Error("at-least target misjudged")
	}
	if !atMost.Met(0.3) || atMost.Met(0.31) || atMost.Met(math.NaN()) {
		t.Error("at-most target misjudged")
	}
	if atLeast.Verdict(3e6) != "met" || atMost.Verdict(0.31) != "missed" || atMost.Verdict(math.NaN()) != "missed" {
		t.Error("verdicts misjudged")
	}
	if got := atLeast.Format(func(x float64) string { return Int(int64(x)) }); got != "≥ 3,000,000" {
		t.Errorf("format %q", got)
	}
	if got := atMost.Format(func(x float64) string { return Float(x, 2) }); got != "≤ 0.30" {
		t.Errorf("format %q", got)
	}
}

func TestDetectMachine_HasPlatform(t *testing.T) {
	m := DetectMachine()
	if m.GOOS == "" || m.GOARCH == "" || m.NProc < 1 {
		t.Fatalf("incomplete %+v", m)
	}
	if !strings.Contains(m.String(), m.GOOS+"/"+m.GOARCH) {
		t.Errorf("String() = %q", m.String())
	}
}

func TestParseLoadAvg(t *testing.T) {
	for _, c := range []struct {
		text string
		want [3]float64
		ok   bool
	}{
		{"0.52 0.61 0.70 2/345 6789\n", [3]float64{0.52, 0.61, 0.70}, true},
		{"1.00 2.50 13.25", [3]float64{1, 2.5, 13.25}, true},
		{"0.52 0.61", [3]float64{}, false},
		{"0.52 x 0.70 1/2 3", [3]float64{}, false},
		{"", [3]float64{}, false},
	} {
		got, ok := parseLoadAvg(c.text)
		if got != c.want || ok != c.ok {
			t.Errorf("parseLoadAvg(%q) = %v, %v; want %v, %v", c.text, got, ok, c.want, c.ok)
		}
	}
}

func TestTable_AddTarget(t *testing.T) {
	var tb Table
	tb.AddTarget("bytes/point", Number(0.4567).Text(3), Target{Value: 0.45, AtMost: true}, Decimals(2), 0.4567)
	tb.AddTarget("points/s", Number(math.NaN()).Text(0), Target{Value: 1000}, Whole, Number(math.NaN()))
	want := [][]string{{"bytes/point", "0.457", "≤ 0.45", "missed"}, {"points/s", "n/a", "≥ 1,000", "missed"}}
	for i, row := range want {
		if strings.Join(tb.Rows[i], "|") != strings.Join(row, "|") {
			t.Errorf("row %d = %q, want %q", i, tb.Rows[i], row)
		}
	}
	if got := Decimals(2)(0.4567); got != "0.46" {
		t.Errorf("Decimals(2)(0.4567) = %q, want 0.46", got)
	}
	if got := Decimals(0)(math.NaN()); got != "n/a" {
		t.Errorf("Decimals(0)(NaN) = %q, want n/a", got)
	}
}
