package raftnode

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Entry and context encodings (version 1); see the package documentation.
const envelopeVersion = 1

// proposalID identifies a proposal: the member that proposed it, the
// member's incarnation (its raft log's boot count, so that a restarted
// member never mistakes an old proposal for a new one) and a counter.
type proposalID struct {
	node, boot, seq uint64
}

// envelopeOverhead bounds the bytes an entry adds per command besides
// the command itself (four uvarints).
const envelopeOverhead = 4 * binary.MaxVarintLen64

// appendEnvelopeHeader starts an entry holding n commands.
func appendEnvelopeHeader(b []byte, n int) []byte {
	b = append(b, envelopeVersion)
	return binary.AppendUvarint(b, uint64(n))
}

func appendEnvelopeCommand(b []byte, id proposalID, cmd []byte) []byte {
	b = binary.AppendUvarint(b, id.node)
	b = binary.AppendUvarint(b, id.boot)
	b = binary.AppendUvarint(b, id.seq)
	b = binary.AppendUvarint(b, uint64(len(cmd)))
	return append(b, cmd...)
}

type envReader struct {
	b   []byte
	err error
}

func (r *envReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *envReader) bytes() []byte {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = fmt.Errorf("length %d runs past the end (%d bytes left)", n, len(r.b))
	}
	if r.err != nil {
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

// decodeEnvelope calls fn for each command of an entry, in order. It
// checks the whole entry before calling fn, so that a damaged entry is
// skipped as a whole, the same way on every member.
func decodeEnvelope(data []byte, fn func(id proposalID, cmd []byte)) error {
	if len(data) == 0 || data[0] != envelopeVersion {
		return fmt.Errorf("entry: unknown envelope version")
	}
	r := &envReader{b: data[1:]}
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = fmt.Errorf("command count %d exceeds the %d bytes left", n, len(r.b))
	}
	if r.err != nil {
		// Before allocating: a damaged count must not size the slice.
		return fmt.Errorf("entry: %w", r.err)
	}
	type item struct {
		id  proposalID
		cmd []byte
	}
	items := make([]item, 0, n)
	for range n {
		if r.err != nil {
			break
		}
		it := item{id: proposalID{node: r.uvarint(), boot: r.uvarint(), seq: r.uvarint()}}
		it.cmd = r.bytes()
		items = append(items, it)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return fmt.Errorf("entry: %w", r.err)
	}
	for _, it := range items {
		fn(it.id, it.cmd)
	}
	return nil
}

// confContext is what a configuration change carries in its Context: who
// proposed it (node 0: bootstrap) and the raft address of the member it
// adds ("" for other changes).
type confContext struct {
	id   proposalID
	addr string
}

func encodeConfContext(c confContext) []byte {
	b := []byte{envelopeVersion}
	b = binary.AppendUvarint(b, c.id.node)
	b = binary.AppendUvarint(b, c.id.boot)
	b = binary.AppendUvarint(b, c.id.seq)
	b = binary.AppendUvarint(b, uint64(len(c.addr)))
	return append(b, c.addr...)
}

func decodeConfContext(b []byte) (confContext, error) {
	var c confContext
	if len(b) == 0 {
		return c, nil // a change proposed by something else than this package
	}
	if b[0] != envelopeVersion {
		return c, fmt.Errorf("conf change context: unknown version %d", b[0])
	}
	r := &envReader{b: b[1:]}
	c.id = proposalID{node: r.uvarint(), boot: r.uvarint(), seq: r.uvarint()}
	c.addr = string(r.bytes())
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b))
	}
	if r.err != nil {
		return confContext{}, fmt.Errorf("conf change context: %w", r.err)
	}
	return c, nil
}

// readContext is the request context of a ReadIndex call.
func encodeReadContext(id proposalID) []byte {
	b := binary.AppendUvarint(nil, id.node)
	b = binary.AppendUvarint(b, id.boot)
	return binary.AppendUvarint(b, id.seq)
}

func decodeReadContext(b []byte) (proposalID, bool) {
	r := &envReader{b: b}
	id := proposalID{node: r.uvarint(), boot: r.uvarint(), seq: r.uvarint()}
	return id, r.err == nil && len(r.b) == 0
}
