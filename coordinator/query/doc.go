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
// and the front end merges them and then aggregates across series exactly
// as a node does.
//
// When a source cannot answer, another is asked and the answer says what
// is missing, never silently less:
//   - edge unreachable (no address, dial error, timeout): the replicas
//     answer the whole range; the points after W are reported missing;
//   - no replica answers: the edge answers the whole range;
//   - neither: the edge's range is reported missing;
//   - a recorded gap whose time span meets [start, S): the edge answers the
//     whole range when it is reachable, otherwise the gap is reported
//     missing.
//
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
