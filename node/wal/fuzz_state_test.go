package wal

import (
	"bytes"
	"testing"
)

// FuzzDecodeState: the WAL state file decoder never panics, refuses
// anything but the exact encoding of some state (checksum included), and
// round-trips what it accepts.
func FuzzDecodeState(f *testing.F) {
	f.Add(state{next: 7, lastSealed: 6}.encode())
	f.Add(state{}.encode())
	f.Add([]byte("TWST"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, why := decodeState(b)
		if why != "" {
			if s != (state{}) {
				t.Fatalf("refused (%s) but returned %+v", why, s)
			}
			return
		}
		if got := s.encode(); !bytes.Equal(got, b) {
			t.Fatalf("accepted %x as %+v, which encodes to %x", b, s, got)
		}
	})
}
