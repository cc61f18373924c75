package benchplot

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestSave_WritesPNG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.png")
	err := Save(path, Chart{
		Title: "t", XLabel: "clients", YLabel: "points/s", LogY: true,
		Series: []Series{{Name: "write", X: []float64{1, 2, 3}, Y: []float64{10, 0, 30}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("not a PNG: % x", b[:8])
	}
}

func TestSave_Nominal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n.png")
	if err := Save(path, Chart{XNames: []string{"avg", "p50"}, Series: []Series{{Name: "a", X: []float64{0, 1}, Y: []float64{1, 2}}}}); err != nil {
		t.Fatal(err)
	}
}

func TestSave_BadInput(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]Chart{
		"none":          {},
		"mismatch":      {Series: []Series{{Name: "a", X: []float64{1}, Y: nil}}},
		"log-only-zero": {LogY: true, Series: []Series{{Name: "a", X: []float64{1}, Y: []float64{0}}}},
	} {
		if err := Save(filepath.Join(dir, name+".png"), c); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
