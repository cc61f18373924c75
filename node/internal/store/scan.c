#include "scan.h"

#include <stdlib.h>
#include <string.h>

struct store_scan {
	rocksdb_readoptions_t *opts;
	rocksdb_iterator_t *it;
	// NB: RocksDB keeps a pointer to the upper bound, not a copy: it must
	// outlive the iterator.
	char *upper;
	char *err; // from rocksdb_iter_get_error (malloc'ed), or an own strdup
	// The last fill stopped after copying its max_entries-th entry without
	// stepping past it: a skip-scan seeks next, and the step would be wasted.
	int step_pending;
};

store_scan *store_scan_open(rocksdb_t *db, rocksdb_column_family_handle_t *cf,
	int prefix, const char *upper, size_t upper_len) {
	store_scan *s = calloc(1, sizeof *s);
	if (s == NULL) {
		return NULL;
	}
	s->opts = rocksdb_readoptions_create();
	if (prefix) {
		rocksdb_readoptions_set_prefix_same_as_start(s->opts, 1);
	} else {
		rocksdb_readoptions_set_total_order_seek(s->opts, 1);
	}
	if (upper != NULL) {
		s->upper = malloc(upper_len > 0 ? upper_len : 1);
		if (s->upper == NULL) {
			store_scan_close(s);
			return NULL;
		}
		memcpy(s->upper, upper, upper_len);
		rocksdb_readoptions_set_iterate_upper_bound(s->opts, s->upper, upper_len);
	}
	s->it = rocksdb_create_iterator_cf(db, s->opts, cf);
	return s;
}

void store_scan_close(store_scan *s) {
	if (s == NULL) {
		return;
	}
	// The iterator points at the read options, which point at the bound.
	if (s->it != NULL) {
		rocksdb_iter_destroy(s->it);
	}
	if (s->opts != NULL) {
		rocksdb_readoptions_destroy(s->opts);
	}
	free(s->upper);
	free(s->err);
	free(s);
}

// below reports whether key sorts before limit in RocksDB's default
// bytewise order.
static int below(const char *key, size_t key_len, const char *limit, size_t limit_len) {
	size_t n = key_len < limit_len ? key_len : limit_len;
	int c = n > 0 ? memcmp(key, limit, n) : 0;
	return c < 0 || (c == 0 && key_len < limit_len);
}

static void put_u32(char *dst, uint32_t v) { memcpy(dst, &v, sizeof v); }

store_batch store_scan_fill(store_scan *s, int mode, const char *seek, size_t seek_len,
	const char *limit, size_t limit_len, size_t max_entries, char *buf, size_t cap) {
	store_batch b = {0};
	switch (mode) {
	case STORE_SCAN_CONTINUE:
		if (s->step_pending) {
			rocksdb_iter_next(s->it);
		}
		break;
	case STORE_SCAN_SEEK:
		if (seek_len == 0) {
			rocksdb_iter_seek_to_first(s->it);
		} else {
			rocksdb_iter_seek(s->it, seek, seek_len);
		}
		break;
	case STORE_SCAN_LAST:
		rocksdb_iter_seek_to_last(s->it);
		break;
	}
	s->step_pending = 0;
	for (;;) {
		if (!rocksdb_iter_valid(s->it)) {
			// Invalid means the end or an error; only the status tells.
			free(s->err);
			s->err = NULL;
			rocksdb_iter_get_error(s->it, &s->err);
			b.err = s->err;
			b.done = 1;
			break;
		}
		size_t key_len, val_len;
		const char *key = rocksdb_iter_key(s->it, &key_len);
		if (limit != NULL && !below(key, key_len, limit, limit_len)) {
			b.done = 1;
			break;
		}
		const char *val = rocksdb_iter_value(s->it, &val_len);
		if (key_len > UINT32_MAX || val_len > UINT32_MAX) {
			free(s->err);
			s->err = strdup("store scan: entry longer than 4 GiB");
			b.err = s->err;
			b.done = 1;
			break;
		}
		size_t n = 4 + key_len + 4 + val_len;
		if (n > cap - b.used) {
			if (b.count == 0) {
				b.need = n;
			}
			break;
		}
		char *p = buf + b.used;
		put_u32(p, (uint32_t)key_len);
		memcpy(p + 4, key, key_len);
		put_u32(p + 4 + key_len, (uint32_t)val_len);
		memcpy(p + 8 + key_len, val, val_len);
		b.used += n;
		b.count++;
		if (b.count == max_entries) {
			s->step_pending = 1;
			break;
		}
		rocksdb_iter_next(s->it);
	}
	return b;
}
