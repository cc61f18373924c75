package raftlog

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"reflect"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// snapFile encodes a whole snapshot file the way the log writes one.
func snapFile(index, term uint64, cs raftpb.ConfState, data []byte) []byte {
	b := append(snapFileHead(index, term, cs, len(data)), data...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// FuzzDecodeSnapFile: the snapshot file decoder never panics, returns data
// inside the file, and what it accepts encodes again to a file that
// decodes to the same metadata and data.
func FuzzDecodeSnapFile(f *testing.F) {
	f.Add(snapFile(2, 1, raftpb.ConfState{Voters: []uint64{1, 2}}, []byte("s")))
	f.Add(snapFile(9, 3, raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}, nil))
	f.Add([]byte("TRSN\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, data, err := decodeSnapFile(b)
		if err != nil {
			return
		}
		if len(data) > len(b) || len(data) > 0 && !bytes.Contains(b, data) {
			t.Fatalf("data of %d bytes not inside the %d-byte file", len(data), len(b))
		}
		again := snapFile(m.Index, m.Term, m.ConfState, data)
		m2, data2, err := decodeSnapFile(again)
		if err != nil {
			t.Fatalf("re-encoded file refused: %v", err)
		}
		m.FileCRC, m2.FileCRC = 0, 0
		if !reflect.DeepEqual(m, m2) || !bytes.Equal(data, data2) {
			t.Fatalf("round trip: %+v/%x became %+v/%x", m, data, m2, data2)
		}
	})
}
