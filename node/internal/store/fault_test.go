package store

import (
	"errors"
	"fmt"
	"testing"
)

func TestClassify_ReadsTheInnermostRocksDBStatus(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want Fault
	}{
		{"nil", nil, FaultNone},
		{"closed", fmt.Errorf("read: %w", ErrClosed), FaultNone},
		{"layout", fmt.Errorf("decode: %w", ErrCorrupt), FaultCorruption},
		{"checksum", fmt.Errorf("write batch: %w", errors.New("Corruption: block checksum mismatch: stored = 1")), FaultCorruption},
		{"enospc", fmt.Errorf("flush: %w", errors.New("IO error: No space left on device: While appending to file: 000012.log")), FaultNoSpace},
		{"eio", fmt.Errorf("flush: %w", errors.New("IO error: While fsync: a: Input/output error")), FaultIO},
		{"busy", errors.New("Resource busy: "), FaultOther},
		{"joined", errors.Join(errors.New("IO error: x"), fmt.Errorf("y: %w", errors.New("Corruption: z"))), FaultCorruption},
		// A series label quoted by a wrapper must not pass for a status.
		{"label text", fmt.Errorf("series {x=\"Corruption: fake\"}: %w", errors.New("Operation aborted: ")), FaultOther},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Classify(c.err); got != c.want {
				t.Fatalf("Classify(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

func TestFault_StringNamesEveryClassAsHealthReports(t *testing.T) {
	for f, want := range map[Fault]string{
		FaultNone: "ok", FaultOther: "store_error", FaultIO: "io_error",
		FaultNoSpace: "no_space", FaultCorruption: "corruption",
	} {
		if got := f.String(); got != want {
			t.Errorf("Fault(%d).String() = %q, want %q", int(f), got, want)
		}
	}
}
