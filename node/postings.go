package node

import (
	"sync"
	"sync/atomic"
)

// postingsCache keeps the postings (series ids, sorted) of label pairs that
// equality matchers asked for, so repeated dashboard queries do not read
// them from RocksDB on every request (a third of a small query's cost).
//
// INVARIANT: an entry never holds postings older than the series index in
// the store. Every change to stored postings bumps gen after it is
// written; a lookup records gen before it reads the store, and its result
// is cached only if gen has not moved since, so a series added during the
// read makes the entry be dropped rather than cached stale.
type postingsCache struct {
	gen atomic.Uint64

	mu       sync.Mutex
	entryGen uint64 // the gen the entries were read at
	m        map[string][]uint64
	ids      int // total ids held, bounded by maxPostingsCacheIDs
}

// maxPostingsCacheIDs bounds the memory of the cache (8 bytes an id).
const maxPostingsCacheIDs = 1 << 20

// invalidate is called after postings in the store changed.
func (c *postingsCache) invalidate() { c.gen.Add(1) }

func postingsKey(name, value string) string { return name + "\x00" + value }

// get returns the cached postings of key, or ok=false and the gen to pass
// to put after reading the store.
func (c *postingsCache) get(key string) (ids []uint64, gen uint64, ok bool) {
	gen = c.gen.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entryGen != gen {
		c.m, c.ids, c.entryGen = nil, 0, gen
		return nil, gen, false
	}
	ids, ok = c.m[key]
	return ids, gen, ok
}

// put caches ids (which must not be modified afterwards) read at gen.
func (c *postingsCache) put(key string, ids []uint64, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen.Load() || gen != c.entryGen {
		return // the store changed during the read
	}
	if c.ids+len(ids) > maxPostingsCacheIDs {
		c.m, c.ids = nil, 0
		if len(ids) > maxPostingsCacheIDs {
			return
		}
	}
	if c.m == nil {
		c.m = map[string][]uint64{}
	}
	if _, dup := c.m[key]; !dup {
		c.m[key] = ids
		c.ids += len(ids)
	}
}
