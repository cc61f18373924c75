package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/tributarydb/tributary/internal/binread"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Segment and record framing; see the package documentation.
const (
	segmentMagic   = "TRLG"
	segmentVersion = 1
	headerSize     = 20
	frameSize      = 9 // length u32, crc u32, type u8

	// MaxRecordBytes bounds one record (type byte and payload). A raft
	// entry larger than this cannot be stored.
	MaxRecordBytes = 64 << 20
)

// Record types.
const (
	recEntry     = 1
	recHardState = 2
	recSnapshot  = 3
	recCompact   = 4
	recBoot      = 5
)

// ErrCorrupt is wrapped by every error reporting damaged files (as
// opposed to a torn tail, which Open repairs).
var ErrCorrupt = errors.New("raft log corrupt")

// CorruptionError locates damage in a file of the log.
type CorruptionError struct {
	Path   string
	Offset int64
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("raft log corrupt: %s at offset %d: %s", e.Path, e.Offset, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Unwrap() error { return ErrCorrupt }

func appendHeader(b []byte, seq uint64) []byte {
	start := len(b)
	b = append(b, segmentMagic...)
	b = append(b, segmentVersion, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, seq)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// parseHeader checks a segment header and returns its sequence number.
func parseHeader(b []byte) (uint64, error) {
	if len(b) < headerSize {
		return 0, fmt.Errorf("header is %d bytes, want %d", len(b), headerSize)
	}
	if string(b[:4]) != segmentMagic {
		return 0, fmt.Errorf("bad magic %q", b[:4])
	}
	if crc32.Checksum(b[:16], castagnoli) != binary.LittleEndian.Uint32(b[16:20]) {
		return 0, errors.New("header checksum mismatch")
	}
	if b[4] != segmentVersion {
		return 0, fmt.Errorf("version %d, want %d", b[4], segmentVersion)
	}
	return binary.LittleEndian.Uint64(b[8:16]), nil
}

// appendRecord frames one record: length, CRC, type, payload.
func appendRecord(b []byte, typ byte, payload []byte) []byte {
	start := len(b)
	b = binary.LittleEndian.AppendUint32(b, uint32(1+len(payload)))
	b = append(b, 0, 0, 0, 0) // CRC, filled below
	b = append(b, typ)
	b = append(b, payload...)
	crc := crc32.Update(crc32.Checksum(b[start:start+4], castagnoli), castagnoli, b[start+8:])
	binary.LittleEndian.PutUint32(b[start+4:], crc)
	return b
}

// nextRecord parses the record at the start of b. It returns the type, the
// payload and the bytes consumed, or an error saying why b does not start
// with a valid record.
func nextRecord(b []byte) (typ byte, payload []byte, n int, err error) {
	if len(b) < frameSize {
		return 0, nil, 0, fmt.Errorf("%d bytes cannot hold a record frame", len(b))
	}
	length := binary.LittleEndian.Uint32(b)
	switch {
	case length == 0:
		return 0, nil, 0, errors.New("zero record length")
	case length > MaxRecordBytes:
		return 0, nil, 0, fmt.Errorf("record length %d exceeds %d", length, MaxRecordBytes)
	case uint64(length) > uint64(len(b)-8):
		return 0, nil, 0, fmt.Errorf("record length %d runs past the end (%d bytes left)", length, len(b)-8)
	}
	body := b[8 : 8+length]
	crc := crc32.Update(crc32.Checksum(b[:4], castagnoli), castagnoli, body)
	if crc != binary.LittleEndian.Uint32(b[4:8]) {
		return 0, nil, 0, errors.New("record checksum mismatch")
	}
	return body[0], body[1:], 8 + int(length), nil
}

// payload decoding

// ids reads a list appendIDs wrote (nil when empty).
func ids(r *binread.Reader) []uint64 {
	n := r.Count("id")
	if n == 0 {
		return nil
	}
	ids := make([]uint64, 0, n)
	for range n {
		ids = append(ids, r.Uvarint())
	}
	return ids
}

func encodeEntry(b []byte, e raftpb.Entry) []byte {
	b = binary.AppendUvarint(b, e.Index)
	b = binary.AppendUvarint(b, e.Term)
	b = append(b, byte(e.Type))
	return append(b, e.Data...)
}

// decodeEntry decodes an entry record. The entry's Data aliases payload.
func decodeEntry(payload []byte) (raftpb.Entry, error) {
	r := binread.New(payload)
	e := raftpb.Entry{Index: r.Uvarint(), Term: r.Uvarint(), Type: raftpb.EntryType(r.Byte())}
	if err := r.Err(); err != nil {
		return e, err
	}
	if e.Type > raftpb.EntryConfChangeV2 {
		return e, fmt.Errorf("unknown entry type %d", e.Type)
	}
	if e.Index == 0 {
		return e, errors.New("entry index 0")
	}
	if rest := r.Rest(); len(rest) > 0 {
		e.Data = rest
	}
	return e, nil
}

func encodeHardState(b []byte, hs raftpb.HardState) []byte {
	b = binary.AppendUvarint(b, hs.Term)
	b = binary.AppendUvarint(b, hs.Vote)
	return binary.AppendUvarint(b, hs.Commit)
}

func decodeHardState(payload []byte) (raftpb.HardState, error) {
	r := binread.New(payload)
	hs := raftpb.HardState{Term: r.Uvarint(), Vote: r.Uvarint(), Commit: r.Uvarint()}
	return hs, r.Done()
}

func appendIDs(b []byte, ids []uint64) []byte {
	b = binary.AppendUvarint(b, uint64(len(ids)))
	for _, id := range ids {
		b = binary.AppendUvarint(b, id)
	}
	return b
}

func encodeConfState(b []byte, cs raftpb.ConfState) []byte {
	b = appendIDs(b, cs.Voters)
	b = appendIDs(b, cs.Learners)
	b = appendIDs(b, cs.VotersOutgoing)
	b = appendIDs(b, cs.LearnersNext)
	if cs.AutoLeave {
		return append(b, 1)
	}
	return append(b, 0)
}

// confState reads what encodeConfState wrote.
func confState(r *binread.Reader) raftpb.ConfState {
	cs := raftpb.ConfState{Voters: ids(r), Learners: ids(r), VotersOutgoing: ids(r), LearnersNext: ids(r)}
	switch r.Byte() {
	case 0:
	case 1:
		cs.AutoLeave = true
	default:
		r.Fail(errors.New("bad auto-leave byte"))
	}
	return cs
}

// snapMeta describes a snapshot file.
type snapMeta struct {
	Index, Term uint64
	ConfState   raftpb.ConfState
	// FileCRC is the CRC stored at the end of the snapshot file; it ties a
	// snapshot record to one file's contents.
	FileCRC uint32
}

func (m snapMeta) equal(o snapMeta) bool {
	return m.Index == o.Index && m.Term == o.Term && m.FileCRC == o.FileCRC && confStateEqual(m.ConfState, o.ConfState)
}

func confStateEqual(a, b raftpb.ConfState) bool {
	return slices.Equal(a.Voters, b.Voters) && slices.Equal(a.Learners, b.Learners) &&
		slices.Equal(a.VotersOutgoing, b.VotersOutgoing) && slices.Equal(a.LearnersNext, b.LearnersNext) &&
		a.AutoLeave == b.AutoLeave
}

const snapFlagReset = 1

func encodeSnapshotRecord(b []byte, m snapMeta, reset bool) []byte {
	flags := byte(0)
	if reset {
		flags |= snapFlagReset
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, m.Index)
	b = binary.AppendUvarint(b, m.Term)
	b = binary.LittleEndian.AppendUint32(b, m.FileCRC)
	return encodeConfState(b, m.ConfState)
}

func decodeSnapshotRecord(payload []byte) (snapMeta, bool, error) {
	r := binread.New(payload)
	flags := r.Byte()
	m := snapMeta{Index: r.Uvarint(), Term: r.Uvarint(), FileCRC: r.Uint32()}
	m.ConfState = confState(r)
	if err := r.Done(); err != nil {
		return m, false, err
	}
	if flags&^snapFlagReset != 0 {
		return m, false, fmt.Errorf("unknown snapshot flags %#x", flags)
	}
	if m.Index == 0 {
		return m, false, errors.New("snapshot index 0")
	}
	return m, flags&snapFlagReset != 0, nil
}

func encodeCompact(b []byte, index, term uint64) []byte {
	b = binary.AppendUvarint(b, index)
	return binary.AppendUvarint(b, term)
}

func decodeCompact(payload []byte) (index, term uint64, err error) {
	r := binread.New(payload)
	index, term = r.Uvarint(), r.Uvarint()
	return index, term, r.Done()
}

func decodeBoot(payload []byte) (uint64, error) {
	r := binread.New(payload)
	n := r.Uvarint()
	return n, r.Done()
}

// Snapshot files.
const (
	snapMagic   = "TRSN"
	snapVersion = 1
)

// snapFileHead is the start of a snapshot file, up to its data: magic,
// version, 3 zero bytes, index u64, term u64, conf state length u32, conf
// state, data length u64. The data and then the CRC-32C of every byte
// before the CRC follow.
func snapFileHead(index, term uint64, cs raftpb.ConfState, dataLen int) []byte {
	csb := encodeConfState(nil, cs)
	b := make([]byte, 0, 36+len(csb))
	b = append(b, snapMagic...)
	b = append(b, snapVersion, 0, 0, 0)
	b = binary.LittleEndian.AppendUint64(b, index)
	b = binary.LittleEndian.AppendUint64(b, term)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(csb)))
	b = append(b, csb...)
	return binary.LittleEndian.AppendUint64(b, uint64(dataLen))
}

// decodeSnapFile checks a snapshot file and returns its metadata and data
// (aliasing b).
func decodeSnapFile(b []byte) (snapMeta, []byte, error) {
	var m snapMeta
	if len(b) < 36+4 {
		return m, nil, fmt.Errorf("%d bytes is too short for a snapshot file", len(b))
	}
	if string(b[:4]) != snapMagic || b[4] != snapVersion {
		return m, nil, fmt.Errorf("bad magic or version %q/%d", b[:4], b[4])
	}
	body := b[:len(b)-4]
	m.FileCRC = binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != m.FileCRC {
		return m, nil, errors.New("snapshot file checksum mismatch")
	}
	m.Index = binary.LittleEndian.Uint64(body[8:])
	m.Term = binary.LittleEndian.Uint64(body[16:])
	csLen := uint64(binary.LittleEndian.Uint32(body[24:]))
	rest := body[28:]
	if csLen > uint64(len(rest)) {
		return m, nil, errors.New("conf state runs past the end")
	}
	r := binread.New(rest[:csLen])
	m.ConfState = confState(r)
	if err := r.Done(); err != nil {
		return m, nil, fmt.Errorf("conf state: %w", err)
	}
	rest = rest[csLen:]
	if len(rest) < 8 {
		return m, nil, errors.New("data length missing")
	}
	n := binary.LittleEndian.Uint64(rest)
	if n != uint64(len(rest)-8) {
		return m, nil, fmt.Errorf("data length %d, file holds %d", n, len(rest)-8)
	}
	return m, rest[8:], nil
}
