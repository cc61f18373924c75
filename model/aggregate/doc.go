// Package aggregate is the one implementation of the query semantics every
// backend must share, so that a coordinator answers exactly as a storage
// node does and the OpenTSDB API exactly as either:
//
//   - downsampling buckets: a bucket of width step shifted by an offset
//     is [k*step+off, (k+1)*step+off) and is reported by its start
//     (BucketStart); the samples of a series that fall in one bucket fold
//     into one value with a rollup function (Downsampler, Downsample);
//   - cross-series aggregation: series are grouped by the values of the
//     group-by labels, and the values the series of a group have at one
//     timestamp fold into one value (Groups, GroupKey);
//   - the sorted id lists that matchers select are intersected and
//     subtracted (Intersect, Subtract).
//
// The storage node (node), the coordinator's query front end
// (coordinator/query) and the OpenTSDB API (httpapi/opentsdb) call these
// functions; none keeps a copy. An oracle test in coordinator/query holds
// all three to a deliberately naive model of the same rules.
//
// # Folding
//
// Values fold with rollup.Agg, in the order they are added: samples of a
// bucket in time order, the series of a group in label order. So avg is
// the float64 sum divided by the count, first and last are the first and
// the last value folded (across series: of the first and the last series
// in label order that have a value at that timestamp), and count counts
// values.
//
// NaN (a Prometheus staleness marker, or a fill value) is a value like
// any other unless a caller asks to skip it (GroupOptions.SkipNaN, which
// the OpenTSDB API sets for its fill policies): it makes sum and avg NaN,
// is counted by count and can be first or last. min and max compare with
// < and >, so a NaN folded first stays the result, and a NaN folded later
// is passed over. A group cell into which nothing was folded (only
// skipped NaNs) is NaN.
//
// The node answers a downsampling query whose step is a whole number of
// hours from its rollups, merging one rollup.Agg per hour (or day): that
// equals folding the bucket's samples in time order, up to the rounding
// of float64 sums, unless the function is min or max and an hour of the
// bucket other than its first begins with a NaN (that hour's min is NaN,
// and the merge passes over the whole hour). This is the one place where
// an answer depends on how the data was stored.
//
// # Concurrency
//
// The functions keep no state and are safe for concurrent use. A
// Downsampler or a Groups is not safe for concurrent use.
package aggregate
