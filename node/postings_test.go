package node

import (
	"sync"
	"testing"
)

func TestPostingsCache_StaleReadIsNotCached(t *testing.T) {
	var c postingsCache
	_, gen, ok := c.get("a\x00b")
	if ok {
		t.Fatal("hit on an empty cache")
	}
	c.put("a\x00b", []uint64{1, 2}, gen)
	if ids, _, ok := c.get("a\x00b"); !ok || len(ids) != 2 {
		t.Fatalf("miss after put: %v %v", ids, ok)
	}
	// A series is persisted while a lookup reads the store: the lookup's
	// (possibly stale) answer must not be cached.
	_, gen, _ = c.get("x\x00y")
	c.invalidate()
	c.put("x\x00y", []uint64{7}, gen)
	if _, _, ok := c.get("x\x00y"); ok {
		t.Fatal("an answer read before an invalidation was cached")
	}
	// Invalidation drops every entry.
	if _, _, ok := c.get("a\x00b"); ok {
		t.Fatal("entry survived invalidation")
	}
}

func TestPostingsCache_Bounded(t *testing.T) {
	var c postingsCache
	big := make([]uint64, maxPostingsCacheIDs/2+1)
	_, gen, _ := c.get("k1")
	c.put("k1", big, gen)
	c.put("k2", big, gen) // over the bound: the cache starts over
	if c.ids > maxPostingsCacheIDs {
		t.Fatalf("cache holds %d ids", c.ids)
	}
	c.put("huge", make([]uint64, maxPostingsCacheIDs+1), gen)
	if _, _, ok := c.get("huge"); ok {
		t.Fatal("a list over the bound was cached")
	}
}

func TestPostingsCache_Concurrent(t *testing.T) {
	var c postingsCache
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 1000 {
				key := postingsKey("n", string(rune('a'+j%5)))
				ids, gen, ok := c.get(key)
				if !ok {
					c.put(key, []uint64{uint64(j)}, gen)
				} else if len(ids) != 1 || ids[0]%5 != uint64(j%5) {
					t.Errorf("key %q answered %v, which was stored under another key", key, ids)
				}
				if i == 0 && j%100 == 0 {
					c.invalidate()
				}
			}
		})
	}
	wg.Wait()
}
