package workdir

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDir_KeptOnlyOnFailureOrWhenAsked(t *testing.T) {
	tests := []struct {
		name     string
		keep     bool
		runErr   error
		wantKept bool
	}{
		{"success is removed", false, nil, false},
		{"failure is kept", false, errors.New("node lost points"), true},
		{"keep keeps a success", true, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			var log bytes.Buffer
			d, err := Make(parent, "tribench-test-", tc.keep, slog.New(slog.NewTextHandler(&log, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Dir(d.Path) != parent || !strings.HasPrefix(filepath.Base(d.Path), "tribench-test-") {
				t.Errorf("work dir %s, want tribench-test-* in %s", d.Path, parent)
			}
			if entries, err := os.ReadDir(d.DataDir); err != nil || len(entries) != 0 {
				t.Errorf("data dir %s: %v, %v; want it empty", d.DataDir, entries, err)
			}
			d.Finish(tc.runErr)
			_, statErr := os.Stat(d.Path)
			if kept := statErr == nil; kept != tc.wantKept {
				t.Errorf("kept %v, want %v", kept, tc.wantKept)
			}
			if said := strings.Contains(log.String(), "kept work directory"); said != tc.wantKept {
				t.Errorf("log %q, want it to say the directory was kept: %v", log.String(), tc.wantKept)
			}
		})
	}
}

func TestMake_MissingParentIsAnError(t *testing.T) {
	_, err := Make(filepath.Join(t.TempDir(), "missing"), "tribench-test-", false, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "make work dir") {
		t.Fatalf("got %v, want a make-work-dir error", err)
	}
}
