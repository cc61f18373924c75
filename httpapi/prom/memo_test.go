package prom

// Test helpers of memo (memo.go): what the caches hold.

// len is the number of keys remembered.
func (c *memo[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// has reports whether key is remembered.
func (c *memo[V]) has(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.m[key]
	return ok
}
