// Package replica is a cloud coordinator's replica store: the data that
// edges replicate to it (their sealed WAL segments), held through the same
// storage engine as an edge (one node.Node for all edges), and the
// coordinator-to-coordinator gRPC service (tributary.cluster.v1.ReplicaService)
// through which other coordinators store segments on it, query it, copy
// ranges of an edge from it and ask what it holds.
//
// # Data model
//
// Every stored series carries one reserved label, EdgeLabel
// (__edge__="<edge id>"), so two edges that use the same label set keep
// separate series and a query can be limited to the edges it names.
// Readers never see the label: answers strip it and name the edge beside
// the series. A series that an edge sent with its own __edge__ label is
// refused by the engine (duplicate label name) and counted as rejected.
//
// # Applying a segment
//
// Apply verifies the whole file (wal.VerifySegment) and decodes every
// record (record.Decoder) before it writes anything, so a damaged segment
// stores nothing. The points that pass keeps (up to 64 Ki points, 1 MiB;
// a larger segment is decoded a second time as it is written) are then
// written, with the edge label, through node.Node.Write in batches of up
// to 64 Ki points; Write returns once the engine's WAL is synced (the WAL
// syncs once for every write appended before the sync starts: concurrent
// Applies share its fsyncs). Only then is (edge, seq) → crc32c recorded,
// durably, in the index (the engine's store meta, under node's replica
// prefix), and Apply returns once the record is durable. The records of
// concurrent Applies are written together (group commit, commit.go): the
// first Apply to queue a record writes every record queued, in one engine
// batch with one sync of the store's WAL (node.Node.PutReplicaMetas), the
// others wait for its outcome, and what queues meanwhile goes in the next
// batch; a failed batch fails every Apply in it. A crash in
// between leaves points without an index entry, and the resend applies the
// same points again, which changes nothing (duplicate timestamps are
// last-write-wins with the same values). The index lets Apply recognise a
// resend (Duplicate, nothing written) and a conflict (the same seq with
// another crc32c, e.g. an edge whose disk was wiped): ErrConflict.
//
// The engine runs with options for a replica: the out-of-order window is
// the longest retention, so that only the raw retention limits a point's
// age (backlogs arrive out of order, newest first, edges come back after
// weeks, and one point from a skewed edge clock must not make a series
// refuse the present); a point older than the raw retention is refused and
// counted in Applied.Rejected, exactly. The future window is one year (the
// edge already checked its points against its own clock; only absurd
// timestamps are refused, and counted), MaxSeries 10 M, and label limits
// one label above node's defaults (room for the edge label).
//
// # The index
//
// What the store holds of each edge lives in the engine's replica meta
// (node.Node.GetReplicaMeta and its kin), in three kinds of records. Every
// key is a kind prefix, the edge id, a 0x00 byte (edge ids never hold
// one, so keys of different edges never collide or share a prefix) and
// sequence numbers of 8 bytes, big-endian (so one edge's keys sort by
// them):
//
//	"seg." edge 0x00 seq          → crc32c (4 bytes LE) | prev seq (8 bytes LE)
//	"rng." edge 0x00 first        → last (8 bytes BE)
//	"cpy." edge 0x00 first last   → minT | maxT | through | window ms (4 × 8 bytes LE)
//
// A segment record says the segment was applied with that crc32c; it
// covers prev seq + 1 through seq (the edge's WAL numbers nothing in
// between; records written before prev seq was kept hold the crc32c alone
// and cover their seq). A range record says every point of the edge's
// segments first..last was copied here from another replica (RecordCopy,
// written only once the whole range is applied). A copy record is the
// progress of a Copy still running or interrupted: the time range it
// copies and the timestamp through which it is applied; it is deleted
// when the range record is written. Holdings is the union of segment and
// range records as sorted, merged runs; Forget deletes all three kinds of
// an edge (one range deletion each).
//
// # Copying a range from another replica
//
// Export writes every point of an edge with a timestamp in a time range —
// what a raw query of the edge answers, head and stored chunks merged,
// last write wins — as WAL segment files of a bounded size (package
// node/segment builds them), all with the header (edge, seq = last,
// prev = first - 1): files of one export differ only by their order.
// ApplyCopy verifies and decodes a whole file before writing its points
// (a damaged file stores nothing) and writes them like Apply, keeping up
// to 1 Mi points (a whole file of the default size: decoded once) and
// writing 256 Ki points at a time (fewer WAL syncs; a few copies run at
// once, many segments may be applied at once); RecordCopy then records
// the range. Copy drives both from an ExportSource (a peer's
// store through Client, or a local Store): it walks the time range in
// windows that start at an hour and double while their files stay small
// (a sparse month is a dozen round trips), applies each window's files,
// records the window it is through, paces itself to a byte rate (token
// bucket), and exports the next files while it applies the current one.
// A Copy that stops (cancelled, a peer gone, a restart) resumes after the
// last window it recorded; replaying a window's files changes nothing.
// The files carry every point of the edge in the time span, so points of
// segments outside first..last are copied too (harmless for the same
// reason). Known limit: a timestamp written twice with different values,
// once in the copied range and once in a segment applied here directly
// while the copy ran, keeps whichever arrived last here, which may differ
// from the source.
//
// Export copies raw points only: hours the source holds only as rollups
// (older than its raw retention) are not copied. ExportRollups
// (rollups.go) exports an edge's rollups for a time span, packed as the
// engine stores them (node/rollup's format), for an edge restored from the
// cloud; DecodeRollups checks and decodes an entry.
//
// # Service
//
// Server serves tributary.cluster.v1.ReplicaService over a Store and Client
// calls it. Store requests carry the file zstd-compressed (one frame; the
// server decompresses with an output bound of uncompressed_bytes, at most
// ServerOptions.MaxSegmentBytes); the grpc.Server needs GRPCServerOptions
// for its message limit. Export streams one file a message, compressed as
// the request asks (Client asks for S2: between coordinators zstd's CPU
// cost bounds a copy's rate more than S2's third more bytes; a Client of
// ClientOptions.Uncompressed, which a coordinator uses for a peer at a
// loopback address, asks for none and stores segments uncompressed:
// on one host compressing only spends both processes' CPU), then a final
// message with the number of files; the client decompresses with an
// output bound of the file size it asked for. ExportRollups streams
// entries of about 1 MiB, several to a message, then a final message with
// their number. Holdings answers at most
// 65,536 runs (about 1.5 MiB) and flags a longer answer as truncated.
// Every method calls ServerOptions.Authorize first. Query answers stream series in parts of at most
// 64 Ki points and about 1 MiB a message, the info last. Errors map to
// status codes and back: ErrInvalidSegment and model.ErrBadQuery to
// InvalidArgument, ErrConflict to AlreadyExists, model.ErrOverloaded to
// ResourceExhausted, an Authorize refusal to PermissionDenied, anything
// else to Unavailable (retryable); a Client's errors keep both the status
// and errors.Is with the sentinel.
//
// BenchmarkApply (2 vCPUs): a 2 MB segment of 100 series applies at about
// 43 MB/s, 4.3 M points/s. BenchmarkCopy (200 MB of segment bytes, both
// stores in one process, loopback TCP, 2 vCPUs shared with other work):
// 49 MiB of segment bytes per second of CPU with S2, 57 uncompressed;
// wall-clock rates of 28 to 90 MiB/s followed the machine's other load.
//
// # Concurrency
//
// A Store is safe for concurrent use. Applies of different segments run in
// parallel (sharing only the engine's write lock and syncs); two
// Applies of the same (edge, seq) are serialised, so the second sees the
// first's index record. Query and Export may run
// concurrently with Apply and see each point either before or after a
// concurrent write. One Copy of a given (edge, first, last) runs at a
// time (ErrCopyRunning); Forget must not run concurrently with applies or
// copies of the same edge. Copy starts one goroutine, which ends before
// it returns.
package replica
