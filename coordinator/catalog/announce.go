package catalog

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tributarydb/tributary/node/labels"
)

// AnnounceSeries records what edges announced as they created series
// (before any segment holding them ships), for many edges in one command:
// a coordinator batches the announcements of the edges streaming to it, so
// that a fleet's announcements cost a few raft entries a second, not one
// per edge. Each EdgeAnnouncement registers its series as RegisterSeries
// does (known series keep their ids, invalid ones are rejected one by
// one) and advances the edge's registration watermark to its ThroughMs:
// the edge says that every series it created before its clock read
// ThroughMs is in this announcement or an earlier one. When a series of an
// edge is rejected, that edge's watermark does not move in this command
// (not by a later announcement of the same edge in it either): the edge
// then holds a series the catalog does not list, and a query must keep
// asking it. An
// edge that is not registered (or not an edge) is skipped with a reason;
// the others apply. The watermark never goes back, so applying the
// command twice, or after a later one, changes nothing. Result:
// AnnounceSeriesResult.
//
// Encoded as kind 15, which coordinators of an earlier version cannot
// decode: propose it only when AnnounceReady says every member applies
// it (see the package documentation, "Version skew").
type AnnounceSeries struct {
	Edges []EdgeAnnouncement
}

// EdgeAnnouncement is one edge's part of an AnnounceSeries.
type EdgeAnnouncement struct {
	Edge string
	// ThroughMs is the new registration watermark; NoWatermark: the
	// series only (a part of an announcement too long for one message).
	ThroughMs int64
	Series    []labels.Labels
}

// NoWatermark as an EdgeAnnouncement's ThroughMs registers its series and
// leaves the watermark as it is.
const NoWatermark = math.MinInt64

// AnnounceSeriesResult is the result of AnnounceSeries: one entry per
// announcement, in order.
type AnnounceSeriesResult struct {
	Edges []EdgeAnnounced
}

// EdgeAnnounced is the result of one EdgeAnnouncement.
type EdgeAnnounced struct {
	RegisterSeriesResult
	// ThroughMs is the edge's registration watermark after the command
	// (when Registered).
	ThroughMs  int64
	Registered bool
	// Skipped says why nothing of the announcement was applied ("": it
	// was).
	Skipped string
}

// Kind implements Command.
func (AnnounceSeries) Kind() Kind { return KindAnnounceSeries }

func (c AnnounceSeries) appendBody(b []byte) []byte {
	return appendList(b, c.Edges, func(b []byte, a EdgeAnnouncement) []byte {
		b = appendString(b, a.Edge)
		b = appendVarint(b, a.ThroughMs)
		return appendList(b, a.Series, appendLabels)
	})
}

func (d *decoder) announceSeries() AnnounceSeries {
	return AnnounceSeries{Edges: decodeList(d, "announcement", 3, func(d *decoder) EdgeAnnouncement {
		var a EdgeAnnouncement
		a.Edge = d.string("edge id", maxDecodedString)
		a.ThroughMs = d.varint()
		a.Series = decodeList(d, "series", 1, (*decoder).labels)
		return a
	})}
}

func (s *state) announceSeries(c AnnounceSeries) (any, error) {
	res := AnnounceSeriesResult{Edges: make([]EdgeAnnounced, len(c.Edges))}
	rejected := map[string]bool{} // edges with a series rejected in this command
	for i, a := range c.Edges {
		out := &res.Edges[i]
		n := s.nodes[a.Edge]
		switch {
		case n == nil:
			out.Skipped = fmt.Sprintf("node %q is not registered", a.Edge)
			continue
		case n.Role != RoleEdge:
			out.Skipped = fmt.Sprintf("node %q is a %s; only edges announce series", a.Edge, n.Role)
			continue
		}
		r, err := s.registerSeries(RegisterSeries{Edge: a.Edge, Series: a.Series})
		if err != nil {
			out.Skipped = err.Error() // not reached: the node is registered
			continue
		}
		out.RegisterSeriesResult = r.(RegisterSeriesResult)
		if len(out.Rejected) > 0 {
			rejected[a.Edge] = true
		}
		have, ok := s.registered[a.Edge]
		if !rejected[a.Edge] && a.ThroughMs != NoWatermark && (!ok || a.ThroughMs > have) {
			s.registered[a.Edge] = a.ThroughMs
			have, ok = a.ThroughMs, true
		}
		out.ThroughMs, out.Registered = have, ok
	}
	return res, nil
}

// Unlisted returns the series of ss that the catalog does not list for
// edge (all of them for an unknown edge), in their order, without
// duplicates.
func (f *FSM) Unlisted(edge string, ss []labels.Labels) []labels.Labels {
	var out []labels.Labels
	seen := map[string]bool{}
	var key []byte
	f.mu.RLock()
	defer f.mu.RUnlock()
	have := f.st.edgeSeries[edge]
	for _, in := range ss {
		ls, err := labels.New(in, labels.Limits{})
		if err != nil {
			out = append(out, in) // Apply says why
			continue
		}
		key = ls.AppendKey(key[:0])
		if seen[string(key)] {
			continue
		}
		seen[string(key)] = true
		if id, ok := f.st.lookup(key, ls); ok {
			if _, found := slices.BinarySearch(have, id); found {
				continue
			}
		}
		out = append(out, in)
	}
	return out
}

// Registration returns an edge's registration watermark: every series the
// edge created before its clock read throughMs is in the catalog. ok is
// false when the edge has announced nothing (an edge of an earlier
// version, or a catalog whose members cannot all apply AnnounceSeries):
// the catalog then learns its series only from the segments it ships.
func (f *FSM) Registration(edge string) (throughMs int64, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	throughMs, ok = f.st.registered[edge]
	return throughMs, ok
}

// EdgesToAsk returns, sorted, the edges other than those in skip that may
// hold series the catalog does not know of at endMs: those without a
// registration watermark, and those whose watermark is before endMs. A
// query front end asks them even when none of their registered series
// matches.
func (f *FSM) EdgesToAsk(endMs int64, skip map[string]bool) (edges []string, vouched int) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	for id, n := range f.st.nodes {
		if n.Role != RoleEdge || skip[id] {
			continue
		}
		if reg, ok := f.st.registered[id]; ok && reg >= endMs {
			vouched++
			continue
		}
		edges = append(edges, id)
	}
	slices.Sort(edges)
	return edges, vouched
}

// The catalog features a coordinator reports, as the value of its node
// label FeaturesLabel (comma-separated, sorted).
const (
	// FeaturesLabel is the node label in which a coordinator lists the
	// catalog features its version applies. A coordinator of an earlier
	// version registers without it.
	FeaturesLabel = "tributary_catalog_features"
	// FeatureAnnounceSeries: the coordinator applies AnnounceSeries
	// (kind 15) and reads snapshot version 5.
	FeatureAnnounceSeries = "announce-series"
	// FeatureRuleGroups: the coordinator applies SetRuleGroup and
	// DeleteRuleGroup (kinds 16 and 17) and reads snapshot version 6.
	FeatureRuleGroups = "rule-groups"
	// FeatureSealPolicy: the coordinator decodes a SetConfig and a
	// snapshot's configuration with a lag budget and minimum points per
	// segment (config-ext2).
	FeatureSealPolicy = "seal-policy"
	// FeatureRecordBatch: the coordinator applies RecordBatch (kind 18).
	FeatureRecordBatch = "record-batch"
)

// Features is the FeaturesLabel value of this version's coordinators.
var Features = strings.Join([]string{FeatureAnnounceSeries, FeatureRuleGroups, FeatureSealPolicy, FeatureRecordBatch}, ",")

// HasFeature reports whether a node's labels list feature in FeaturesLabel.
func HasFeature(ls labels.Labels, feature string) bool {
	return slices.Contains(strings.Split(ls.Get(FeaturesLabel), ","), feature)
}

// AnnounceReady reports whether AnnounceSeries may be proposed: every
// raft member (voter or learner) is a registered coordinator whose
// FeaturesLabel lists FeatureAnnounceSeries. A member of an earlier
// version would reject the command (it cannot decode kind 15) where the
// others apply it, and the catalogs would differ; so until every member
// says it applies the command, edges' announcements are registered with
// RegisterSeries, without a watermark.
func (f *FSM) AnnounceReady() bool { return f.FeatureReady(FeatureAnnounceSeries) }

// FeatureReady reports whether every raft member (voter or learner) is a
// registered coordinator whose FeaturesLabel lists feature: only then may
// the commands of that feature be proposed (see "Version skew" in the
// package documentation).
func (f *FSM) FeatureReady(feature string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if len(f.st.members) == 0 {
		return false
	}
	byRaft := map[uint64]*Node{}
	for _, n := range f.st.nodes {
		if n.Role == RoleCoordinator {
			byRaft[n.RaftID] = n
		}
	}
	for id := range f.st.members {
		n := byRaft[id]
		if n == nil || !HasFeature(n.Labels, feature) {
			return false
		}
	}
	return true
}
