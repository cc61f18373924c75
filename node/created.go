package node

import "github.com/tributarydb/tributary/node/labels"

// CreatedSeries returns, in creation order, up to limit of the node's
// series from the node-local series id from on (ids count up as series
// are created; ids of series lost with a damaged store leave holes), and
// the id to ask from next. A replicator announces the series a node
// creates with it (replicator.SeriesSource): from 1 once, then from the
// returned next. Safe for concurrent use; it never blocks a write for
// longer than a read of the series index.
func (n *Node) CreatedSeries(from uint64, limit int) (series []labels.Labels, next uint64) {
	from = max(from, 1)
	n.idxMu.RLock()
	defer n.idxMu.RUnlock()
	high := n.highID
	id := from
	for ; id <= high && len(series) < limit; id++ {
		if s := n.byID[id]; s != nil {
			series = append(series, s.lset)
		}
	}
	return series, id
}
