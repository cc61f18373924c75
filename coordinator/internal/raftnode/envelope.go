package raftnode

import (
	"encoding/binary"
	"fmt"

	"github.com/tributarydb/tributary/internal/binread"
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

// appendProposalID appends id as three uvarints: node, boot, counter.
func appendProposalID(b []byte, id proposalID) []byte {
	b = binary.AppendUvarint(b, id.node)
	b = binary.AppendUvarint(b, id.boot)
	return binary.AppendUvarint(b, id.seq)
}

// readProposalID reads what appendProposalID wrote.
func readProposalID(r *binread.Reader) proposalID {
	return proposalID{node: r.Uvarint(), boot: r.Uvarint(), seq: r.Uvarint()}
}

func appendEnvelopeCommand(b []byte, id proposalID, cmd []byte) []byte {
	b = appendProposalID(b, id)
	b = binary.AppendUvarint(b, uint64(len(cmd)))
	return append(b, cmd...)
}

// decodeEnvelope calls fn for each command of an entry, in order. It
// checks the whole entry before calling fn, so that a damaged entry is
// skipped as a whole, the same way on every member.
func decodeEnvelope(data []byte, fn func(id proposalID, cmd []byte)) error {
	if len(data) == 0 || data[0] != envelopeVersion {
		return fmt.Errorf("entry: unknown envelope version")
	}
	r := binread.New(data[1:])
	n := r.Count("command")
	if err := r.Err(); err != nil {
		// Before allocating: a damaged count must not size the slice.
		return fmt.Errorf("entry: %w", err)
	}
	type item struct {
		id  proposalID
		cmd []byte
	}
	items := make([]item, 0, n)
	for range n {
		if r.Err() != nil {
			break
		}
		it := item{id: readProposalID(r)}
		it.cmd = r.Bytes("command")
		items = append(items, it)
	}
	if err := r.Done(); err != nil {
		return fmt.Errorf("entry: %w", err)
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
	b := appendProposalID([]byte{envelopeVersion}, c.id)
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
	r := binread.New(b[1:])
	c.id = readProposalID(r)
	c.addr = string(r.Bytes("address"))
	if err := r.Done(); err != nil {
		return confContext{}, fmt.Errorf("conf change context: %w", err)
	}
	return c, nil
}

// readContext is the request context of a ReadIndex call.
func encodeReadContext(id proposalID) []byte {
	return appendProposalID(nil, id)
}

func decodeReadContext(b []byte) (proposalID, bool) {
	r := binread.New(b)
	id := readProposalID(r)
	return id, r.Done() == nil
}
