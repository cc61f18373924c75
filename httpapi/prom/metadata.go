package prom

import (
	"slices"
	"strings"
	"sync"
)

// metadataCache keeps the newest metadata received per metric family, for
// /api/v1/metadata. It lives in memory only (it is rebuilt from the
// metadata Prometheus resends every minute), holds at most max families
// (later new families are dropped and counted), and is safe for
// concurrent use.
type metadataCache struct {
	mu  sync.Mutex
	max int
	m   map[string]metricMetadata
}

func newMetadataCache(max int) *metadataCache {
	return &metadataCache{max: max, m: map[string]metricMetadata{}}
}

// add stores mds and returns how many were dropped for lack of room.
func (c *metadataCache) add(mds []metricMetadata) (dropped int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, md := range mds {
		if md.Family == "" {
			continue
		}
		if _, ok := c.m[md.Family]; !ok && len(c.m) >= c.max {
			dropped++
			continue
		}
		// NB: the decoder copied the strings out of the request buffer,
		// so an entry does not keep that buffer alive.
		c.m[md.Family] = md
	}
	return dropped
}

// list returns the entries of metric (all when empty), sorted by family,
// at most limit of them (0: all).
func (c *metadataCache) list(metric string, limit int) []metricMetadata {
	c.mu.Lock()
	var out []metricMetadata
	if metric != "" {
		if md, ok := c.m[metric]; ok {
			out = append(out, md)
		}
	} else {
		out = make([]metricMetadata, 0, len(c.m))
		for _, md := range c.m {
			out = append(out, md)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b metricMetadata) int { return strings.Compare(a.Family, b.Family) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}
