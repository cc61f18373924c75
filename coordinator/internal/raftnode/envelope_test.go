package raftnode

import (
	"bytes"
	"testing"
)

func TestEnvelope_RoundTrip(t *testing.T) {
	cmds := [][]byte{[]byte("a"), nil, bytes.Repeat([]byte("x"), 300)}
	b := appendEnvelopeHeader(nil, len(cmds))
	for i, c := range cmds {
		b = appendEnvelopeCommand(b, proposalID{7, 2, uint64(100 + i)}, c)
	}
	var got [][]byte
	var ids []proposalID
	if err := decodeEnvelope(b, func(id proposalID, cmd []byte) { ids, got = append(ids, id), append(got, cmd) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !bytes.Equal(got[2], cmds[2]) || len(got[1]) != 0 || ids[1] != (proposalID{7, 2, 101}) {
		t.Fatalf("decoded %q %v", got, ids)
	}
	// A damaged entry yields no command at all.
	n := 0
	if err := decodeEnvelope(b[:len(b)-1], func(proposalID, []byte) { n++ }); err == nil || n != 0 {
		t.Fatalf("truncated entry: err %v, %d commands", err, n)
	}
	ctx := encodeConfContext(confContext{id: proposalID{1, 2, 3}, addr: "c1:7071"})
	if c, err := decodeConfContext(ctx); err != nil || c.addr != "c1:7071" || c.id != (proposalID{1, 2, 3}) {
		t.Fatalf("conf context: %+v %v", c, err)
	}
}

// FuzzDecodeEnvelope: decoding an entry never panics, and either yields
// every command or none.
func FuzzDecodeEnvelope(f *testing.F) {
	b := appendEnvelopeHeader(nil, 2)
	b = appendEnvelopeCommand(b, proposalID{1, 1, 1}, []byte("cmd"))
	b = appendEnvelopeCommand(b, proposalID{2, 1, 9}, nil)
	f.Add(b)
	f.Add(encodeConfContext(confContext{id: proposalID{1, 2, 3}, addr: "x"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ids []proposalID
		var cmds [][]byte
		err := decodeEnvelope(data, func(id proposalID, cmd []byte) { ids, cmds = append(ids, id), append(cmds, cmd) })
		if err != nil {
			if len(cmds) != 0 {
				t.Fatal("commands delivered from a damaged entry")
			}
		} else {
			re := appendEnvelopeHeader(nil, len(cmds))
			for i := range cmds {
				re = appendEnvelopeCommand(re, ids[i], cmds[i])
			}
			var again int
			if err := decodeEnvelope(re, func(proposalID, []byte) { again++ }); err != nil || again != len(cmds) {
				t.Fatalf("re-encoded entry: %v, %d commands", err, again)
			}
		}
		_, _ = decodeConfContext(data)
		_, _ = decodeReadContext(data)
	})
}
