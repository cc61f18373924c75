// Checksum verification of one SST file, outside any open DB, through
// RocksDB's C++ SstFileReader (the C API of the linked RocksDB has none).
// See sst.go for the contract.

#ifndef TRIBUTARY_STORE_VERIFY_H
#define TRIBUTARY_STORE_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// store_sst_info is what store_verify_sst learns about a file. Every
// pointer is malloc'ed (or NULL) and freed by store_sst_info_free.
typedef struct {
	int opened;          // the table's footer, index and properties were read
	char *column_family; // from the table properties; NULL if unknown
	uint64_t entries;    // point entries (puts and deletions)
	uint64_t deletions;
	uint64_t range_deletions;
	char *smallest; // first and last user key, when they could be read
	size_t smallest_len;
	char *largest;
	size_t largest_len;
	char *err; // NULL: every block verified; else why not
} store_sst_info;

// store_verify_sst opens path as a table and verifies the checksum of
// every block in it. It never throws.
void store_verify_sst(const char *path, store_sst_info *info);

void store_sst_info_free(store_sst_info *info);

#ifdef __cplusplus
}
#endif

#endif
