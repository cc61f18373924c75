// Package prom serves the Prometheus protocols from a backend.Backend:
// remote_write ingestion (POST /api/v1/write), remote_read (POST
// /api/v1/read; wire format in remoteread.go) and the Prometheus HTTP query
// API (/api/v1/query, /api/v1/query_range, /api/v1/series, /api/v1/labels,
// /api/v1/label/<name>/values and what Grafana's Prometheus data source
// calls besides), evaluated by the upstream PromQL engine over a
// storage.Queryable adapter (storage.go). /api/v1/rules, /api/v1/alerts
// and POST /-/reload answer from a RuleSource (rules.go), which the rules
// package of the project implements; the engine and queryable are
// exported for it.
//
// # Concurrency
//
// An API is safe for concurrent use: one PromQL engine serves every
// request. At most Options.MaxConcurrentQueries queries and
// Options.MaxConcurrentWrites remote_write requests run at once; others
// wait for a slot until their deadline. Per-query state (the queryable
// and its sample count) is built per request and used by one goroutine.
//
// # remote_write 1.0 wire format
//
// A request body is one snappy block (not the framed stream format): a
// uvarint holding the decoded length, then snappy literal and copy
// elements. The decoded length is checked against the body limit before
// anything is allocated for it. The decoded bytes are one protobuf (proto3)
// message prometheus.WriteRequest; this package reads these fields:
//
//	WriteRequest   { repeated TimeSeries timeseries = 1;       // length-delimited
//	                 repeated MetricMetadata metadata = 3; }   // length-delimited
//	TimeSeries     { repeated Label labels = 1;                // length-delimited
//	                 repeated Sample samples = 2;              // length-delimited
//	                 repeated Exemplar exemplars = 3;          // counted, not stored
//	                 repeated Histogram histograms = 4; }      // counted, not stored
//	Label          { string name = 1; string value = 2; }      // length-delimited
//	Sample         { double value = 1; int64 timestamp = 2; }  // fixed64, varint (ms)
//	MetricMetadata { MetricType type = 1;                      // varint
//	                 string metric_family_name = 2;            // length-delimited
//	                 string help = 4; string unit = 5; }
//
// As in any proto3 decoder, an absent field is zero (a sample with value 0
// at timestamp 0 may be the empty message), the last occurrence of a
// scalar field wins, and unknown fields of any valid wire type are skipped.
// A known field with the wrong wire type, a length running past its
// message, a truncated varint or fixed64, or an end-group tag without its
// start is an error naming the byte offset in the decoded message.
//
// Labels with a value are passed to the backend as given (the node sorts
// and validates them: __name__ is required; it drops labels with an empty
// value, and so does the decoder), and a value keeps its exact bit
// pattern, so Prometheus staleness markers (a particular NaN) survive.
// Decoding runs in two passes: the first validates the structure, counts
// series, labels and samples and checks each series against the label
// limits (httpapi.Limits.Labels) without allocating; the second fills
// exactly sized arrays. A series with samples beyond the label limits is
// refused there, not built, and reported as an invalid series; more
// samples than Limits.MaxPointsPerRequest or more series with samples
// than Limits.MaxSeriesPerRequest refuse the request (413) before anything
// is allocated; metadata entries past Limits.MaxSeriesPerRequest are
// dropped and counted. A snappy block decodes to at most 64/3 of its
// bytes, so a declared size beyond that is refused before the decoded
// buffer is allocated. One request therefore allocates at most 16 bytes
// per decoded byte plus about 512 bytes per series, and the decoded size
// is at most 64/3 of the body and at most Limits.MaxBodyBytes
// (FuzzDecodeWriteRequestAllocations holds the decoder to that).
//
// # remote_write statuses
//
// Prometheus retries a 5xx (and a 429 with retry_on_http_429) and drops
// the batch on any other 4xx:
//
//	204  every float sample is stored (metadata-only requests too)
//	400  malformed body, or some data not stored: samples the node rejected
//	     (invalid series, too old, too far in the future, limits), native
//	     histograms, exemplars. The valid samples of the request are stored;
//	     the text body gives counts by reason, then the first rejections.
//	413  body, decoded size, sample or series count over the limits
//	415  not snappy remote_write 1.0 (remote_write 2.0 is not supported)
//	503  backend overloaded or unavailable, or no write slot before the
//	     deadline; nothing stored; Retry-After is set (Options.
//	     WriteOverloadStatus may make overload a 429)
//
// # Query API
//
// Answers use the Prometheus JSON envelope and error types (bad_data 400,
// execution 422, canceled 499, timeout 503, unavailable 503, internal
// 500, not_found 404), encoded by hand (response.go). Range functions whose
// window equals the step are answered from per-window samples computed by
// the node when that gives exactly the engine's answer on raw data, and a
// max or min aggregation by labels over them may get one folded series per
// group; the rules are in downsample.go and docs/prometheus.md. Regular
// expression matchers that match one string reach the engine as equality
// matchers, byte offsets kept (literal.go).
package prom
