// Package wal is the storage node's segmented write-ahead log.
//
// Every accepted write becomes one record in the log, and the write is
// acknowledged only once its record is durable. The log is cut into segment
// files. A sealed segment never changes again, can be verified by itself,
// and is the unit the replicator ships to the cloud, so it carries its node
// id, its sequence number, its time range and its point count.
//
// # Using a Log
//
//	l, err := wal.Open(wal.Options{Dir: dir, NodeID: "pi-7"})
//	seq, cut, err := l.MaybeCut() // caller's lock held: a new segment may need series re-declared
//	pos, err := l.Append(wal.Record{Data: batch, MinT: t0, MaxT: t1, Points: n})
//	// caller's lock released
//	err = l.Sync(pos) // acknowledge the write only if this returns nil
//
// Append only frames the record into a buffer (handing the buffer to the
// operating system now and then); it never cuts a segment and never waits for
// an fsync. Sync waits for one background goroutine, the syncer, which fsyncs
// on behalf of every record appended before it starts (group commit). With
// SyncPolicy.Interval > 0 the syncer fsyncs at most every Interval and Sync
// returns once the record is with the operating system.
//
// MaybeCut and Cut cut segments. MaybeCut follows the seal policy: it cuts
// a segment that has reached MaxSegmentBytes, or whose first record is
// MaxSegmentAge old and that holds at least MinSegmentPoints points; a
// segment short of its points waits, up to MinPointsWaitFactor (4) times
// MaxSegmentAge, so that a trickle still ships. Waiting never puts a record
// at risk (it is durable once Sync returns, sealed or not); it only delays
// what follows a seal: shipping, and the release of segment files.
// SetSealPolicy changes the age and the minimum while the Log runs (the
// node applies a fleet's lag budget with it). Cut cuts whatever the
// policy. The caller that re-declares series at the
// start of each segment holds its own lock across MaybeCut, encoding and
// Append, so that no cut falls between them; the Log never cuts by itself.
// A cut segment is sealed by the syncer in the background (MaybeCut does not
// wait; Cut does), and Segments reports it Sealed once its footer is durable.
//
// # Concurrency
//
// Every method of a Log is safe for concurrent use. Records keep the order
// of the Append calls. Replay reads the open segment up to where it stood when
// Replay was called. Close must be called to stop the syncer.
//
// # Failure
//
// A failed write or fsync (a full disk, an I/O error) fails the Log: the
// pending group commit and every later Append, Sync, MaybeCut, Cut, Replay
// and RemoveBefore return the error, and Close returns it too. An fsync is
// never retried over the same bytes, because after a failed fsync the
// kernel may have dropped the dirty pages, and a retry could succeed
// without the data ever reaching the disk.
//
// Instead the syncer tries to recover every Options.RetryInterval (1 s by
// default): it truncates each unsealed segment (the open one and any cut
// but not yet sealed) back to what a successful fsync covered and fsyncs
// that, then recovers the directory as Open does (those segments are
// sealed with a footer over what is left, or removed if nothing is; sealed
// segments are verified) and opens a fresh segment with the next sequence
// number. Until that succeeds writes are refused; then they are accepted
// again, without reopening the Log. No record whose Sync returned nil is
// lost by this under the default policy, since it was fsynced; a record cut
// away was never acknowledged, and a later Sync of its position returns
// ErrLost instead of nil. Under an interval policy, records handed to the
// operating system but not yet fsynced are cut, as a power cut would lose
// them.
//
// SyncAll fsyncs everything appended so far whatever the policy; the node
// calls it before it writes data from those records to its store, so the
// store never holds points the log could lose.
//
// # Files
//
//	<Dir>/00000000000000000042.seg   segment 42 (20 digits, so names sort by sequence)
//	<Dir>/wal.state                  sequence counter (see below)
//	<Dir>/quarantine/                damaged files moved aside by Open; never deleted
//
// Sequence numbers start at 1 and never go back: Open continues at the
// state file's counter or after the highest sequence named by any segment
// file in Dir or quarantine/ (or claimed by a segment header), whichever is
// larger. The state file is rewritten (vfs.WriteFileAtomic: write a
// temporary file, fsync, rename, fsync the directory) before anything
// removes segment files, so removing every segment does not reset the
// counter. A damaged state file is quarantined and the names decide alone.
// Numbers can be skipped (an empty segment is removed at Close instead of
// sealed); the header's previous-sequence field lets a reader tell a
// skipped number from a lost segment.
//
// One Log at a time may use a directory; nothing locks it. Every file
// operation goes through Options.FS, the project's file-system seam
// (internal/vfs): the crash tests run the log on a vfs.CrashFS, which keeps
// only what was fsynced and can tear what was not.
//
// # Segment layout
//
// All fixed-width integers are little-endian. CRCs are CRC32C (Castagnoli).
//
//	+--------+-------------------------+---------+-----+---------+--------+
//	| header | record | record | ...   | record  | footer (sealed only)   |
//	+--------+-------------------------+---------+-----+---------+--------+
//
// Header, 34 bytes plus the node id:
//
//	+-------+---------+-------+---------+--------+---------+-----------+--------+
//	| magic | version | idLen | node id |  seq   | prevSeq | createdNs | crc32c |
//	| TWAL  |  1 or 2 |   1   |  idLen  |   8    |    8    |     8     |   4    |
//	+-------+---------+-------+---------+--------+---------+-----------+--------+
//
// version names what the records carry; both versions frame records, and
// are laid out, alike. Version 1 (FormatV1) holds package record's kind 1
// payloads, raw samples; version 2 (FormatV2) its kind 2, compressed
// samples, with series declared through a string table. Options.Format
// picks the version of the segments a Log creates (1 by default; the node
// writes 2 unless told otherwise); every reader here (Open, Replay,
// ReadSealed, VerifySegment) accepts both, so a directory may hold
// segments of both versions, as after a node is restarted with another
// format, and each keeps its own. A reader older than version 2 refuses a
// version 2 segment by its header ("unsupported format version 2") rather
// than misreading its records; replication keeps version 2 segments from
// coordinators that do not say they read them (docs/replication.md).
//
// seq is the segment's sequence number (it matches the file name); prevSeq is
// the sequence of the last segment sealed before this one was created (0 if
// none); createdNs is the wall clock at creation in Unix nanoseconds, for
// people only: nothing orders by it. The CRC covers every header byte
// before it.
//
// Record frame:
//
//	+------------+--------+----------------+----------------------+--------------------+------+
//	| uvarint n  | crc32c | varint(MinT)   | uvarint(MaxT - MinT) | uvarint(Points)    | Data |
//	|  1..10     |   4    |            body: n bytes (n >= 3)                           |      |
//	+------------+--------+----------------+----------------------+--------------------+------+
//
// The CRC covers the bytes of n and the body. A record costs its Data plus
// 8 to 44 bytes, typically 16: a 2-byte length, the CRC, a 6-byte
// millisecond timestamp, a 2-byte span of seconds and a 2-byte point count. MinT <= MaxT and Points >= 0 are required; Data is at
// most MaxRecordBytes. A frame length of zero cannot start a record, and
// marks the footer instead.
//
// Footer, 49 bytes, written when the segment is sealed:
//
//	+------+---------+--------+------+------+------------+--------+-------+
//	| 0x00 | records | points | minT | maxT | totalBytes | crc32c | magic |
//	|  1   |    8    |   8    |  8   |  8   |     8      |   4    | SEAL  |
//	+------+---------+--------+------+------+------------+--------+-------+
//
// records and points count the segment's records and points; minT and maxT
// span the records that carry points (both 0 if none do); totalBytes is the
// file's size, footer included; the CRC covers every byte of the file before
// it, header and records included, so a sealed segment is verified by
// itself, and (node id, seq, crc) identifies its contents for idempotent
// shipping.
//
// Sealing is: fsync the records, append the footer, fsync again. The first
// fsync keeps a footer from ever reaching the disk ahead of the records it
// vouches for. A segment is sealed if and only if it ends in a valid footer.
//
// # Torn tails and recovery
//
// A crash can leave the last segments unsealed, ending in a torn tail: a
// frame whose length runs past the end of the file, whose CRC does not
// match, a partial footer, or bytes that are not a frame at all. Records
// after the last valid frame were never acknowledged (an acknowledged record
// was fsynced, and everything before it with it). Open therefore:
//
//   - verifies every sealed segment (header CRC, every record's CRC, the
//     footer's counts, size and whole-file CRC). Damage in a file that ends
//     in a footer is corruption, not a torn write (records are fsynced
//     before the footer is written), so the file is moved to quarantine/,
//     logged at error level with the file, offset and reason, and counted
//     in Stats.CorruptQuarantined. Its records are not replayed. The one
//     exception is a damaged footer behind intact records, which is
//     rewritten, since it holds nothing the records do not.
//   - truncates an unsealed segment after its last valid record (logged with
//     the bytes cut, counted in Stats.TornTruncations) and seals it; if it
//     holds no valid record it is removed instead. An unsealed file whose
//     header is damaged but long enough to be complete is quarantined.
//   - refuses to open a directory holding another node's segments.
//   - opens a new segment with the next sequence number.
//
// Open reads every segment in full, so its cost grows with the segments kept;
// RemoveBefore keeps that bounded.
package wal
