package catalog

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// snapshotV2 writes s as a version 2 snapshot: the configuration and nodes
// without the fields of version 4, placements listing coordinator ids only.
func snapshotV2(t testing.TB, s *state) []byte {
	t.Helper()
	cur := s.appendSnapshot(nil)
	out := append([]byte(nil), cur[:5]...)
	out[4] = 2
	d := &decoder{b: cur[:len(cur)-4], off: 5, what: "test"}
	out = appendUvarint(out, d.uvarint())
	for d.err == nil && d.remaining() > 0 {
		tag := d.byte()
		body := d.bytes("section")
		switch tag {
		case secConfig:
			body = appendUvarint(appendConfig(nil, s.config), s.config.Version)
		case secNodes:
			body = appendUvarint(nil, uint64(len(s.nodes)))
			for _, id := range sortedKeys(s.nodes) {
				n := s.nodes[id]
				body = appendString(body, n.ID)
				body = append(body, byte(n.Role))
				body = appendUvarint(body, n.RaftID)
				body = appendString(body, n.Addr)
				body = appendString(body, n.Identity)
				body = appendLabels(body, n.Labels)
				body = appendUvarint(body, n.RegisteredIndex)
				body = appendVarint(body, n.LastHeartbeatMs)
			}
		case secPlacements:
			body = appendUvarint(nil, uint64(len(s.placement)))
			for _, e := range sortedKeys(s.placement) {
				p := s.placement[e]
				body = appendString(body, p.Edge)
				body = appendUvarint(body, p.Epoch)
				body = appendBool(body, p.Pinned)
				body = appendUvarint(body, uint64(len(p.Replicas)))
				for _, r := range p.Replicas {
					body = appendString(body, r)
				}
			}
		}
		out = appendSection(out, tag, body)
	}
	if d.err != nil {
		t.Fatal(d.err)
	}
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, castagnoli))
}
