// Package query is a coordinator's query front end: it answers the same
// queries as a storage node (it implements backend.Backend, so gRPC, PromQL
// and OpenTSDB run on a coordinator unchanged) from the whole fleet.
//
// A query is resolved in the catalog: its matchers select series, and the
// series name the edges that registered them. For each edge e, with
// watermark W (the edge's data at or before W is on its replica
// coordinators, except inside recorded gaps), the range is split at S:
// replicas answer [start, S) and the edge itself [S, end]. Raw queries split
// at S = W+1; downsampling queries at the start of the bucket holding W+1,
// so that no bucket is split between two sources; last-point queries ask
// both and keep the newest sample. Sub-queries carry no cross-series
// aggregation: downsampling is pushed down, series come back one by one,
// and the front end merges them and then aggregates across series with
// the node's own implementation (model/aggregate; the edge client's
// re-bucketing of raw samples, for an offset the gRPC API cannot carry,
// uses it too). An oracle test (oracle_test.go) holds the front end, a
// node and the OpenTSDB API to one naive model of the semantics.
//
// The catalog learns an edge's series when a segment holding them is
// replicated (so every series with data at or before an edge's watermark
// is in it), and, from edges that announce them, as they are created: the
// edge's registration watermark (catalog.FSM.Registration) says that
// every series it created before then is registered. An edge that
// registered a matching series is planned as below. Any other edge is
// asked for [S, end] (the whole range if a recorded gap may hide series;
// the edge resolves the matchers in its own index) only when it may hold
// a matching series the catalog does not know: it has no registration
// watermark (it does not announce), or the query ends after it. The
// others are vouched for by the catalog and not asked at all, so a query
// over one series ending before the fleet's registration watermarks
// (a dashboard range aligned to its step) asks one edge, not the fleet.
// The replicas are asked only for edges with catalog-matching series.
// Series, LabelNames and LabelValues are the catalog's answer and that of
// every edge without a registration watermark; the edges that cannot be
// asked, and those whose registration watermark is older than ListingLag
// (their newest series may be missing), are named in the listing's
// warnings (backend.Warn; the gRPC and Prometheus APIs send them). At
// most MaxParallelEdges edges are asked at once.
//
// A staleness allowance D (model.Query.MaxStaleness, or
// Options.MaxStaleness for a query that gives none; 0: none) lets a query
// accept the data the cloud holds: an edge with catalog-matching series
// whose watermark W is within D of the end has its replicas answer the
// whole range (legPlan.stale; the edge is asked only when they lack part
// of it or none answers), and an edge without catalog-matching series is
// left unasked when the catalog knows its series within D of the end
// (seriesKnownThrough: its registration watermark, or for an edge that
// does not announce its data watermark when no recorded gap hides
// series). The points after W not asked for are not missing: the
// answer's QueryInfo.FreshThroughMs, the oldest of the end and the
// watermarks of the edges left unasked, says up to when it is whole.
//
// When a source cannot answer, another is asked and the answer says what
// is missing, never silently less, and never more than may be missing:
//   - edge unreachable (no address, dial error, timeout): the replicas
//     answer the whole range; the points after W (if the range reaches
//     past it) are reported missing;
//   - no replica answers: the edge answers the whole range;
//   - neither: the edge's range is reported missing;
//   - an edge without catalog-matching series unreachable: the part of
//     [S, end] after W (and of its recorded gaps) is reported missing in
//     its coverage, where series the catalog does not know may lie, and
//     all such edges share one warning line (series they created after
//     their watermark would be missing); an edge replicated past the end
//     is no alarm, although a bucket holding W makes it asked;
//   - a recorded gap whose time span meets [start, S): the edge answers the
//     whole range when it is reachable, otherwise the gap is reported
//     missing.
//
// Execution is kept apart from accounting. Per edge, runLegs runs the
// planned legs and the fallbacks that askReplicasForEdgePart and
// askEdgeForRepPart call for, and queryEdge takes the answers of the legs
// that answered; account, a pure function of the plan and the legs'
// outcomes, says what the answer lacks (EdgeCoverage.Missing, Reason) and
// which warnings that calls for (accountFresh for an edge without
// catalog-matching series). The fallback matrix above is its table test.
//
// A replica placed after an edge's first placement (rebalancing,
// SetPlacement, the replacement of a departed coordinator) holds only the
// segments stored since: nothing copies the history to it. The catalog
// says, per replica, the newest time it lacks data at
// (catalog.ReplicaFrom.LacksThroughMs). The replica part of a query goes
// only to the replicas that hold all of it; when none does, the edge
// answers the whole range; when the edge cannot be asked either, the
// replicas (lacking the least first) answer, and the part the answering
// one lacks is reported missing with the warning "edge e: data before T
// is not on its current replicas (placement changed; history not copied)
// and the edge is unreachable". The same holds when the replicas answer
// the edge's part for an unreachable edge.
//
// Edges whose replica legs have the same first replica and the same range
// (their split points coincide: last-point queries, or watermarks in the
// same bucket) share one request to that coordinator naming all of them.
// A replica leg is hedged: if the first replica has not answered within
// HedgeAfter, the same leg goes to the next replica and the first complete
// answer wins.
//
// The same series from two edges (a series moved between edges) is merged
// per bucket: sum and count add, min and max combine; for avg, first and
// last, and for duplicate raw timestamps, the edge that sorts last by id
// wins, because partial averages cannot be combined without their counts.
//
// A Frontend is safe for concurrent use. Answers are buffered in memory
// per query (bounded by the series limit and the bucket limit).
package query
