package node

import (
	"time"

	"github.com/tributarydb/tributary/internal/pace"
	"github.com/tributarydb/tributary/node/internal/store"
)

// retentionLoop applies retention at once and then every
// RetentionInterval, until the node stops.
func (n *Node) retentionLoop() {
	defer n.wg.Done()
	n.applyRetention()
	pace.Every(n.stop, n.opts.RetentionInterval, nil, n.applyRetention)
}

// applyRetention drops whole partitions past each tier's retention. Its
// cost depends on the number of partitions, not of series.
func (n *Node) applyRetention() {
	now := n.opts.Now()
	raw, hourly, daily := n.Retention()
	for _, tier := range []struct {
		kind store.Kind
		name string
		keep time.Duration
	}{
		{store.KindChunks, "raw", raw},
		{store.KindRollup1h, "1h", hourly},
		{store.KindRollup1d, "1d", daily},
	} {
		cut := now.Add(-tier.keep).UnixMilli()
		dropped, err := n.db.DropBefore(tier.kind, cut)
		if err != nil {
			n.noteStoreErr(err) // a damaged file found by listing partitions
			n.log.Error("retention failed", "tier", tier.name, "before", fmtMs(cut), "err", err)
			continue
		}
		if dropped > 0 {
			n.stats.retentionDropped.Add(int64(dropped))
			n.log.Info("retention dropped partitions", "tier", tier.name, "partitions", dropped, "before", fmtMs(cut))
		}
	}
}

// ApplyRetention runs retention now (tests and operators).
func (n *Node) ApplyRetention() { n.applyRetention() }
