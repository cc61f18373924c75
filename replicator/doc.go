// Package replicator is the edge side of replication: a Shipper ships a
// node's sealed WAL segments to the cloud coordinators over one long-lived
// gRPC stream that the edge opens (ReplicationService.Ship, specified in
// proto/tributary/v1/replication.proto and docs/replication.md), and keeps
// every segment on the node's disk until the cloud has acknowledged it.
//
// # Wiring
//
//	s, err := replicator.New(replicator.Options{Targets: coords, TLS: nodeTLS, CursorPath: dir + "/replication.cursor"})
//	n, err := node.Open(node.Options{..., WALRetention: s.RetainFrom, WriteGate: s.WriteGate})
//	go s.Run(ctx, n) // until ctx is done; stop it before n.Close
//
// New loads the cursor before the node opens, so that the node's replay
// (which may flush and remove segments) already keeps what is unshipped.
//
// # What it does
//
// One goroutine (Run's) owns all state and runs an event loop:
//
//	         +--------------------------------------------+
//	         v                                            |
//	[backoff] --due--> [dialing] --hello, welcome--> [streaming] --stream ends / ack timeout--+
//	    ^                  |                             |  send: gap declarations, then segments
//	    +---dial fails-----+                             |        within the window and rate limits,
//	                                                     |        then backfills and reships
//	                                                     |  recv: acks advance the cursor;
//	                                                     |        refusals schedule a resend;
//	                                                     |        reship requests queue a job
//
// In more detail:
//
//   - Connect to the current target; after any failure wait a jittered
//     exponential backoff and move to the next target (a stream that
//     got an acknowledgement resets the backoff).
//   - Hello with the cursor; the welcome says what the cloud already holds
//     (acked_through and held runs), so nothing held is sent again, on any
//     coordinator. Segments missing from the node's disk (deleted before
//     replication began, quarantined) are declared as MISSING gaps, and
//     so are segments that turn out damaged or gone when read.
//   - Send each sealed segment not yet held, compacted into one record
//     (segment.Compact; as written with Options.ShipAsWritten, or after
//     the cloud refused the compacted form as a CONFLICT) and
//     zstd-compressed, in parts of at most 1 MiB: first the newest Options.FreshSegments, then the
//     backlog oldest first (after an outage, fresh data arrives first),
//     with at most WindowSegments / WindowBytes unacknowledged, within
//     MaxBytesPerSec and, for the backlog, BacklogBytesPerSec. A segment
//     of a WAL format version the welcome does not list (segment_formats;
//     none listed means version 1 only) is not sent: it stays on disk,
//     the reason is logged once a stream and kept in Stats.LastError, and
//     it ships on a stream to a coordinator that lists its version.
//   - A stream that makes no progress for AckTimeout while something is
//     outstanding (no welcome, no part written, no ack) is dead: a peer that
//     stopped reading blocks Send under flow control, and the watchdog
//     cancels it. gRPC keepalives detect a dead TCP connection.
//   - On each ack, the covered sequence numbers grow; Released is how far
//     they run unbroken from 1. The cursor is saved (write, fsync, rename,
//     fsync the directory) and only then does RetainFrom move to
//     Released+1, so the node never deletes a segment the cursor on disk
//     does not vouch for.
//   - Every PollInterval the node's segment list is read and the disk
//     budget enforced: past BudgetBytes of kept segments the overflow
//     policy releases the oldest unshipped segments (recording a gap with
//     their points: keep-in-store, the default, or drop-oldest) or blocks
//     writers until the backlog ships.
//   - Lowest priority, once the cloud acknowledged a keep-in-store
//     (BACKLOG_OVERFLOW) gap: backfill it from the node's store
//     (Source.ExportRange over the gap's time span) as segment files
//     built in memory that cover the gap's sequence numbers, marked with
//     the gap's points (backfill.go); on their acks the gap is marked
//     backfilled in the cursor and never backfilled again. DROPPED gaps
//     are never backfilled.
//   - Lowest too, after gap backfills: runs of held segments the cloud
//     asks to ship again (ShipResponse.reship: no live replica can copy
//     them to the replicas that lack them; the hello lists the feature
//     "reship"). From the WAL when its sealed files chain over the run
//     exactly (each sent as it is), else rebuilt from the store as
//     backfills of 0 points covering the run's numbers, or answered
//     ShipReshipUnavailable with the reason when the store may not hold
//     all of it (reship.go). Jobs live in memory; repeats of a queued run
//     are ignored.
//   - MISSING gaps are backfilled the same way when the node's store
//     holds every point of their segments — the segments are below the
//     node's WALReplayFrom (flushed before it opened), or the node listed
//     them in this process — and their count and time span are known
//     (from the node's listing, or from the segment summaries the
//     Shipper records as it first sees each sealed segment). Otherwise
//     they are marked unrecoverable in the cursor and stay gaps with
//     their count (missing.go).
//
// The cursor file's format is in package replicator/internal/cursor, the
// segment summaries file's (<CursorPath>.segments) in
// replicator/internal/segsum. Both are read and written through
// Options.FS, the project's file-system seam (internal/vfs), where their
// power-cut tests reach them.
//
// # Concurrency
//
// New, RetainFrom, WriteGate and Stats are safe for concurrent use;
// RetainFrom and WriteGate never block (the node calls them on its write
// and flush paths). Run may be called once; it returns when its context
// is done, after ending the stream and saving the cursor.
package replicator
