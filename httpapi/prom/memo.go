package prom

import "sync"

// memo remembers a function's value per string key, for the caches of
// query strings and tokens that dashboards send again and again. It is
// safe for concurrent use and bounded: at most limit keys (cleared when
// full), and a key longer than maxCachedQueryBytes is computed every time
// and not kept. Values are computed outside the lock, so two callers may
// compute one key at once; the functions memoized depend on the key
// alone, so both get the same value.
type memo[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

// get returns compute(key), remembered.
func (c *memo[V]) get(key string, limit int, compute func(string) V) V {
	if len(key) > maxCachedQueryBytes {
		return compute(key)
	}
	c.mu.Lock()
	v, hit := c.m[key]
	c.mu.Unlock()
	if hit {
		return v
	}
	v = compute(key)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= limit {
		c.m = map[string]V{}
	}
	c.m[key] = v
	c.mu.Unlock()
	return v
}
