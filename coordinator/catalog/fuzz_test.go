package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"
)

// FuzzDecodeCommand: decoding never panics, and whatever decodes
// re-encodes to the same bytes (the encoding is canonical).
func FuzzDecodeCommand(f *testing.F) {
	for _, c := range randomCommands(1, 30) {
		if _, ok := c.(membershipCmd); !ok {
			f.Add(EncodeCommand(c))
		}
	}
	f.Add([]byte{CommandVersion, byte(KindHeartbeat), 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			return
		}
		if got := EncodeCommand(c); !bytes.Equal(got, b) {
			t.Fatalf("re-encoding differs:\n in  %x\n out %x", b, got)
		}
	})
}

// FuzzApply: applying arbitrary bytes never panics, rejects with a
// *CommandError, and keeps every invariant.
func FuzzApply(f *testing.F) {
	for _, c := range randomCommands(2, 30) {
		if _, ok := c.(membershipCmd); !ok {
			f.Add(EncodeCommand(c))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fsm := New()
		applyStream(t, fsm, randomCommands(5, 40), 1)
		_, err := fsm.Apply(1000, b)
		var ce *CommandError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("error %v is not a *CommandError", err)
		}
		if err := fsm.Check(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzRestore: restoring arbitrary bytes never panics; what restores
// passes Check and re-encodes to the same bytes. The input is a snapshot
// without its checksum, which the target appends, so that mutations reach
// the decoder instead of failing the checksum (TestRestore_RejectsDamage
// covers the checksum).
func FuzzRestore(f *testing.F) {
	for seed := range uint64(4) {
		fsm := New()
		applyStream(f, fsm, randomCommands(seed, 25), 1)
		snap := fsm.Snapshot()
		f.Add(snap[:len(snap)-4])
	}
	snap := New().Snapshot()
	f.Add(snap[:len(snap)-4])
	f.Fuzz(func(t *testing.T, body []byte) {
		b := binary.LittleEndian.AppendUint32(slices.Clone(body), crc32.Checksum(body, castagnoli))
		fsm := New()
		if err := fsm.Restore(b); err != nil {
			if !errors.Is(err, ErrCorruptSnapshot) {
				t.Fatalf("error %v does not wrap ErrCorruptSnapshot", err)
			}
			return
		}
		if err := fsm.Check(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(fsm.Snapshot(), b) {
			t.Fatal("restored snapshot re-encodes differently")
		}
	})
}
