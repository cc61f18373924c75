// Package store is the storage node's RocksDB layer: the series dictionary,
// label postings, sealed chunks, hourly and daily rollups, and node metadata,
// each in its own column family.
//
// It is the only package that talks to RocksDB. No RocksDB type appears in
// its API; bytes read from RocksDB are either copied out or handed to a
// callback that may use them only until it returns.
//
// # Concurrency
//
// A DB is safe for concurrent use. A Batch is not: build it in one goroutine,
// then hand it to DB.Write. Close waits for the calls already running to
// return and makes later calls fail with ErrClosed; do not call it from inside
// a callback of the same DB (it would wait for itself).
//
// # Units
//
// Timestamps are int64 milliseconds since the Unix epoch (UTC), as everywhere
// in Tributary. Stored timestamps must lie in [MinTimestampMs,
// MaxTimestampMs] (about ±146 million years), which keeps every partition
// computation free of overflow; query ranges are clamped to it.
//
// # Encodings
//
// All integers in keys are big-endian, so byte order equals numeric order.
// Series ids are uint64 (u64). Timestamps (i64) are stored as
// uint64(t) XOR 1<<63, big-endian: flipping the sign bit makes negative times
// sort before positive ones.
//
// Label names and values in postings keys are escaped and terminated, which
// keeps them in byte order and makes a name that is a prefix of another ("a",
// "ab") impossible to confuse with it:
//
//	esc(s) = s with every 0x00 byte replaced by 0x00 0xFF
//	term   = 0x00 0x01
//
// esc(s)+term sorts exactly like s (the terminator is smaller than any
// continuation), so a skip-scan can jump past every key of a name or value
// by seeking to esc(s)+0x00 0x02. Label names cannot contain 0x00 today; the
// escape costs nothing for them and keeps the format independent of that rule.
//
// # Column families
//
//	series     key:   seriesID u64                                  (8 bytes)
//	           value: canonical labels (labels.Labels.AppendKey)
//	           Whole-key bloom filter (10 bits/key); read by id.
//
//	postings   key:   esc(name) term esc(value) term seriesID u64
//	           value: empty
//	           One key per label of every series; labels with an empty value
//	           are skipped (an empty value is the same as no label). All keys
//	           of one name are contiguous, and within a name all keys of one
//	           value, with ids ascending.
//
//	chunks     key:   partitionStart i64 | seriesID u64 | minT i64  (24 bytes)
//	           value: uvarint(maxT-minT) | chunk bytes (opaque)
//	           A chunk lives in the partition of its minT and never crosses
//	           a partition boundary (minT <= maxT < partitionStart+width).
//	           Partition width is Options.PartitionDuration (default 24h), a
//	           positive multiple of 1h; it is recorded in meta on first open
//	           and a later open with a different width is refused.
//
//	rollup_1h  key:   partitionStart i64 | seriesID u64 | bucketStart i64
//	rollup_1d  value: rollup bytes (opaque)
//	           Partition width 8 days (rollup_1h, 192 hourly buckets per
//	           series) and 128 days (rollup_1d).
//
//	meta       key:   string
//	           value: bytes
//	           Keys starting with "store." belong to this package:
//	           "store.layout"            = version u8 (1) | chunk partition width ms u64
//	           "store.max_chunk_span_ms" = u64, the longest maxT-minT of any chunk
//	           written; DB.Write adds it to the batch that raises it, so it is
//	           never behind the chunks. A chunk query seeks to minT minus this
//	           span instead of reading its first partition from the start.
//
// Partitions are fixed windows aligned to the Unix epoch:
// partitionStart(t) = floor(t / width) * width. The 16-byte prefix
// partitionStart|seriesID is the RocksDB prefix of chunks and rollup keys: a
// prefix bloom filter (10 bits per prefix) lets a query for one series skip
// every SST file that holds nothing of it in that partition, and a query
// walks the partitions of its range with one seek each.
//
// Rollup widths trade the precision of retention against seeks: DropBefore
// removes only whole partitions, so a tier keeps up to one width of data past
// its retention (8 days of hourly rollups, 128 days of daily ones), while a
// 5-year daily query costs 15 seeks, small next to reading 1,826 buckets.
//
// # Reads
//
// Point reads (the labels of a series, a meta key) use RocksDB's Get and
// return copies. Every range read (chunks, rollups, postings, the series
// dictionary) and every skip-scan (label names and values, partitions) goes
// through a batched scan (scan.go, scan.c): a small C helper owns the
// iterator and its read options, and each cgo call seeks if asked to, then
// copies as many entries as fit into a pooled Go buffer as
//
//	[u32 key length][key][u32 value length][value]   lengths in host byte order
//
// so a scan costs one cgo call per batch instead of about four cgo calls and
// four allocations per entry. The buffer starts at 32 KiB and grows when one
// entry alone does not fit. Each batch stops at the caller's exclusive limit
// key (for a series' time range, the key of hi+1 in the partition), so a
// scan reads no further than a one-entry-at-a-time iterator would; only a
// callback that stops a scan early leaves up to one batch read in vain.
// Skip-scans read one entry per seek and skip the step past it.
//
// Keys and values handed to callbacks point into the batch buffer, which the
// next batch overwrites: they are valid only until the callback returns.
//
// The C helper needs the RocksDB objects behind grocksdb's DB and column
// family handles, which grocksdb v1.7.11 does not export: cPtr reads them
// from the first field of each struct, and Open checks what it read against
// grocksdb.
//
// # Checking and repairing
//
// Inspect and Repair (repair.go) work on a stopped store: verify.cc reads
// each table file on its own through RocksDB's C++ SstFileReader (the C
// API has no equivalent) and checks every block's checksum; damaged files
// are moved to a quarantine directory and RocksDB's repairer rebuilds the
// manifest from the rest. Span decodes a file's key range into
// partitions and series. Classify (fault.go) sorts errors into
// corruption, a full disk, other I/O errors and the rest, from the RocksDB
// status code of the innermost error.
//
// # Retention
//
// Because the partition start leads every chunks and rollup key, all data of
// the partitions before a time is one contiguous key range. DropBefore
// deletes it with a range tombstone and then drops the SST files that lie
// wholly inside it: its cost depends on the number of partitions and files,
// never on the number of series.
//
// # Memory
//
// RocksDB memory is bounded by the options (defaults in brackets):
//
//   - block cache: BlockCacheBytes [8 MiB], one LRU cache shared by every
//     column family; it also holds the index and filter blocks, so they do
//     not grow with the data (index and filter blocks of L0 files stay pinned
//     and may push it a little over its capacity).
//   - memtables: at most 6 × WriteBufferBytes × 2 (two memtables a column
//     family) [6 × 4 MiB × 2 = 48 MiB], plus 128 KiB for RocksDB's unused
//     "default" column family; a column family that reaches two memtables
//     stalls writes until a flush finishes. A DB-wide write buffer
//     budget of 2 × WriteBufferBytes × 2 [16 MiB] makes
//     RocksDB flush the oldest memtable before that ceiling, so the steady
//     state stays near 16 MiB.
//   - table readers: at most MaxOpenFiles [256] open SST files, each a few
//     KiB of bookkeeping outside the cache.
//   - scans: a 32 KiB batch buffer per running scan, pooled; one grown past
//     1 MiB for a large entry is dropped when its scan ends.
//
// The default total is about 8 + 48 + 2 MiB in the worst case.
package store
