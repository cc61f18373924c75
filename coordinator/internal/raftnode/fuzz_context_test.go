package raftnode

import (
	"testing"
)

// FuzzDecodeConfContext: the conf change context decoder never panics
// and round-trips what it accepts.
func FuzzDecodeConfContext(f *testing.F) {
	f.Add(encodeConfContext(confContext{id: proposalID{node: 1, boot: 2, seq: 3}, addr: "127.0.0.1:7444"}))
	f.Add([]byte{})
	f.Add([]byte{envelopeVersion, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeConfContext(b)
		if err != nil || len(b) == 0 {
			return
		}
		c2, err := decodeConfContext(encodeConfContext(c))
		if err != nil || c2 != c {
			t.Fatalf("round trip of %+v: %+v, %v", c, c2, err)
		}
	})
}

// FuzzDecodeReadContext: the ReadIndex context decoder never panics and
// round-trips what it accepts.
func FuzzDecodeReadContext(f *testing.F) {
	f.Add(encodeReadContext(proposalID{node: 1, boot: 1, seq: 99}))
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, ok := decodeReadContext(b)
		if !ok {
			return
		}
		id2, ok := decodeReadContext(encodeReadContext(id))
		if !ok || id2 != id {
			t.Fatalf("round trip of %+v: %+v, %v", id, id2, ok)
		}
	})
}
