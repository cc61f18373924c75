// Batched RocksDB range scans: one call copies many entries into a buffer
// owned by the caller. See scan.go for the buffer layout and the contract.

#ifndef TRIBUTARY_STORE_SCAN_H
#define TRIBUTARY_STORE_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include <rocksdb/c.h>

// How store_scan_fill positions the iterator before copying.
enum {
	STORE_SCAN_CONTINUE = 0, // from where the previous fill stopped
	STORE_SCAN_SEEK = 1,     // at the first key >= seek (the first key if seek is empty)
	STORE_SCAN_LAST = 2,     // at the last key
};

typedef struct store_scan store_scan;

// store_batch is the result of one store_scan_fill.
typedef struct {
	size_t used;     // bytes of buf holding entries
	size_t need;     // > 0: the next entry alone needs a buffer this large; nothing was copied
	size_t count;    // entries copied
	int done;        // no entry is left before limit (or the end, or an error)
	const char *err; // iterator error, or NULL; owned by the scan, valid until its next fill or close
} store_batch;

// store_scan_open creates an iterator over cf with its own read options:
// prefix_same_as_start if prefix is non-zero, total-order seek otherwise,
// and an exclusive upper bound if upper is not NULL (copied). It returns
// NULL when out of memory.
store_scan *store_scan_open(rocksdb_t *db, rocksdb_column_family_handle_t *cf,
	int prefix, const char *upper, size_t upper_len);

// store_scan_fill positions the iterator as mode says, then copies entries
// into buf as [u32 key_len][key][u32 val_len][val], lengths in host byte
// order, stepping past each one. It stops before the first key >= limit (if
// limit is not NULL; done is set), when the next entry does not fit into
// the rest of buf, or after max_entries entries (if not 0): then it leaves
// the step past the last one to the next STORE_SCAN_CONTINUE fill, which a
// skip-scan that seeks instead never pays for.
store_batch store_scan_fill(store_scan *s, int mode, const char *seek, size_t seek_len,
	const char *limit, size_t limit_len, size_t max_entries, char *buf, size_t cap);

// store_scan_close frees everything store_scan_open and store_scan_fill
// allocated. s may be NULL.
void store_scan_close(store_scan *s);

#endif
