// Package raftlog is the coordinator's durable raft log: it implements
// raft.Storage (go.etcd.io/raft/v3) and the writes a Ready asks for — hard
// state, entries (replacing a conflicting suffix), snapshots — plus local
// snapshots and log compaction, on segmented append-only files with a
// CRC per record.
//
// # Using a Log
//
//	l, err := raftlog.Open(raftlog.Options{Dir: dir})
//	// raft.Config{Storage: l, ...}
//	err = l.Save(rd.HardState, rd.Entries, rd.Snapshot, rd.MustSync) // before sending rd.Messages
//	err = l.CreateSnapshot(applied, confState, fsm.Snapshot())
//	err = l.Compact(applied - keep)
//
// Save returns only once everything it wrote is fsynced (when asked to
// sync, or when it carries a snapshot); the caller may then send the
// Ready's messages. Every record written before an fsync is durable after
// it: files are only appended to, and each fsync covers the whole file.
//
// # Concurrency
//
// Every method is safe for concurrent use; raft calls the Storage methods
// from the goroutine that drives it, which is also the one that writes.
// All live entries (those after the last compaction) are kept in memory,
// so memory is bounded by how often the caller snapshots and compacts.
//
// # Failure
//
// The first failed write or fsync of a segment fails the Log for good:
// every later write returns that error (after a failed fsync the kernel
// may have dropped the dirty pages, so a retry could report success for
// lost data). Reopening recovers from what is on the disk. Writing a
// snapshot file can fail without failing the Log: nothing refers to the
// file until it is durable.
//
// # Files
//
//	<Dir>/00000000000000000007.rlog                           segment 7 (20 digits, so names sort)
//	<Dir>/snap/00000000000000001200-00000000000000000005.snap snapshot at index 1200, term 5
//	<Dir>/snap/*.tmp                                          a snapshot being written; removed by Open
//
// One Log at a time may use a directory; nothing locks it. Every file
// operation goes through Options.FS, the project's file-system seam
// (internal/vfs), so the crash tests run the log, and the raft simulator
// its members, on a vfs.CrashFS that keeps only what was fsynced.
//
// # Segment layout
//
// All fixed-width integers are little-endian; CRCs are CRC-32C
// (Castagnoli); varints are unsigned LEB128 (uvarint).
//
//	+--------+--------+--------+-----+
//	| header | record | record | ... |
//	+--------+--------+--------+-----+
//
// Header, 20 bytes:
//
//	+-------+---------+---------+-----+--------+
//	| magic | version | 3 zeros | seq | crc32c |
//	| TRLG  |    1    |         |  8  |   4    |
//	+-------+---------+---------+-----+--------+
//
// seq matches the file name; the CRC covers the 16 bytes before it.
//
// Record frame:
//
//	+--------+--------+------+---------+
//	| length | crc32c | type | payload |
//	|   4    |   4    |  1   |         |
//	+--------+--------+------+---------+
//
// length counts type and payload (1..MaxRecordBytes); the CRC covers the
// length bytes, the type and the payload. A zero length is never a record
// (it is what a pre-allocated or zero-filled tail looks like).
//
// Record types and payloads:
//
//	1 entry      uvarint index, uvarint term, u8 entry type (0 normal, 1 conf change,
//	             2 conf change v2), data (the rest of the payload)
//	2 hard state uvarint term, uvarint vote, uvarint commit
//	3 snapshot   u8 flags (bit 0: reset), uvarint index, uvarint term,
//	             u32 CRC of the snapshot file, conf state
//	4 compact    uvarint index, uvarint term
//	5 boot       uvarint count
//
//	conf state = ids voters, ids learners, ids votersOutgoing, ids learnersNext, u8 autoLeave
//	ids        = uvarint n, n × uvarint id
//
// Replaying the records in order rebuilds the log:
//
//   - An entry at index i replaces every entry at i or after (raft may
//     overwrite an uncommitted suffix), unless i is at or before the
//     compaction point, in which case it is ignored.
//   - A hard state record replaces the hard state.
//   - A snapshot record names the latest snapshot file (by index, term and
//     the file's CRC). With the reset flag (a snapshot received from the
//     leader) it also discards every entry and moves the compaction point
//     to the snapshot.
//   - A compact record moves the compaction point: entries at or before it
//     are dropped, and its term is what Term returns for it.
//   - A boot record counts how many times the log was opened.
//
// Every segment starts, after its header, with records restating the
// whole state but the entries: boot, latest snapshot, compaction point,
// hard state. A segment none of whose entry records is still live can
// therefore be deleted (oldest first); Compact and Save of a snapshot do
// so. After deletions the first entries replayed may start after the
// compaction point, until a later compact or snapshot record closes the
// gap; a gap left at the end is corruption.
//
// Ordering. Save writes snapshot, entries, hard state, in that order, in
// one write, and then fsyncs. A new segment is created (O_EXCL), written
// and fsynced, and its directory fsynced, only after the previous segment
// was fsynced, so only the newest segment can have a torn tail. A compact
// record is fsynced before any segment is deleted.
//
// # Snapshot files
//
//	+-------+---------+---------+-------+------+-------+------------+---------+------+--------+
//	| magic | version | 3 zeros | index | term | csLen | conf state | dataLen | data | crc32c |
//	| TRSN  |    1    |         |   8   |  8   |   4   |   csLen    |    8    |      |   4    |
//	+-------+---------+---------+-------+------+-------+------------+---------+------+--------+
//
// The CRC covers every byte before it. A snapshot file is written to a
// temporary name, fsynced, renamed, and its directory fsynced
// (vfs.WriteFileAtomic) before the snapshot record that names it is
// written, so a record never names a file that a power cut can take away.
// Files other than the latest are deleted.
//
// # Torn tails and recovery
//
// Open replays every segment in order. In the newest segment, the first
// record that is cut short, fails its CRC, or cannot be applied is where
// a crash interrupted a write: the file is truncated there (logged with
// the bytes cut) and fsynced; nothing after it was acknowledged, because
// Save returns only after its fsync. A newest segment whose header is
// incomplete (shorter than a header or all zeros) is removed. The same
// damage in any older segment, a missing or damaged latest snapshot file,
// a gap in the entries, or a commit index past the last entry is
// corruption: Open fails with a *CorruptionError (errors.Is ErrCorrupt)
// naming the file and offset, and changes nothing. A raft member whose log
// is corrupt must be removed from the cluster and re-added with an empty
// directory; silently dropping records could lose a vote or an
// acknowledged entry. Open then removes stale snapshot files and starts a
// new segment holding one more boot.
package raftlog
