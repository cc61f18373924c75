package httpapi

import (
	"errors"
	"io"
	"strings"
	"testing"
)

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestLineReader_SplitsAndSkipsOverlongLines(t *testing.T) {
	in := "a\r\nbb\n\n" + strings.Repeat("x", 40) + "\nc" // no LF at the end
	lr := NewLineReader(strings.NewReader(in), 16)
	type line struct {
		text    string
		tooLong bool
		n       int
	}
	var got []line
	for {
		b, tooLong, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, line{string(b), tooLong, lr.Line()})
	}
	want := []line{{"a", false, 1}, {"bb", false, 2}, {"", false, 3}, {"", true, 4}, {"c", false, 5}}
	if len(got) != len(want) {
		t.Fatalf("lines %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, _, err := NewLineReader(failingReader{}, 16).Next(); err == nil || !strings.Contains(err.Error(), "read input: disk on fire") {
		t.Fatalf("read error = %v", err)
	}
}

func TestIsDigits_OnlyNonEmptyASCIIDigits(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "0123456789": true, "": false, "-1": false, "+1": false,
		"1.5": false, "1e3": false, " 1": false, "12a": false, "١": false,
	} {
		if got := IsDigits(s); got != want {
			t.Errorf("IsDigits(%q) = %v, want %v", s, got, want)
		}
	}
}
