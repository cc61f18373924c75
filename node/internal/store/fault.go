package store

import (
	"errors"
	"strings"

	"github.com/tributarydb/tributary/internal/enum"
)

// Fault is the class of a failed store call, for deciding whether the
// store is healthy: a corruption never heals by itself, a full disk or an
// I/O error may.
type Fault int

// The classes, from the RocksDB status code that leads the message of the
// innermost error ("Corruption: ...", "IO error: ..."), in increasing
// severity: of several errors joined, the most severe decides.
const (
	FaultNone       Fault = iota // no error, or the store was closed
	FaultOther                   // any other RocksDB status (busy, aborted, ...)
	FaultIO                      // an I/O error
	FaultNoSpace                 // the disk is full
	FaultCorruption              // bytes on disk fail their checksum or do not parse
)

var faultNames = []string{
	FaultNone:       "ok",
	FaultOther:      "store_error",
	FaultIO:         "io_error",
	FaultNoSpace:    "no_space",
	FaultCorruption: "corruption",
}

// String names a fault as health reports and metrics do.
func (f Fault) String() string { return enum.Name(faultNames, f, "Fault") }

// Classify says which class of fault err is. It looks at ErrCorrupt and
// at the innermost error of the chain, where RocksDB's status text begins
// with its code; text added by wrapping (which may quote series labels) is
// never read, so a label cannot pass for a status.
func Classify(err error) Fault {
	switch {
	case err == nil, errors.Is(err, ErrClosed):
		return FaultNone
	case errors.Is(err, ErrCorrupt):
		return FaultCorruption
	}
	f := FaultNone
	for _, leaf := range leaves(err, nil) {
		f = max(f, classifyStatus(leaf.Error()))
	}
	if f == FaultNone {
		return FaultOther
	}
	return f
}

// classifyStatus classifies one RocksDB status message by its code prefix.
// FaultNone: not a RocksDB status.
func classifyStatus(msg string) Fault {
	switch {
	case strings.HasPrefix(msg, "Corruption:"):
		return FaultCorruption
	case strings.HasPrefix(msg, "IO error:") && strings.Contains(msg, "No space left on device"):
		return FaultNoSpace
	case strings.HasPrefix(msg, "IO error:"):
		return FaultIO
	}
	return FaultNone
}

// leaves appends the innermost errors of err's tree (errors.Join and
// multiple %w included) to dst.
func leaves(err error, dst []error) []error {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return leaves(inner, dst)
		}
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if e != nil {
				dst = leaves(e, dst)
			}
		}
		return dst
	}
	return append(dst, err)
}
