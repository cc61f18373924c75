// Package influxql serves InfluxQL on the InfluxDB 1.x /query endpoint
// from a backend.Backend, so that InfluxDB clients (the client
// libraries' query() and management calls, Grafana's InfluxQL data
// source, Telegraf's database creation, TSBS) read what the line protocol
// API (httpapi/influx) wrote, on a node, on tributary local and on a
// coordinator alike. docs/influx.md ("Querying with InfluxQL") is the
// user-facing specification; this comment is the summary the code is
// held to.
//
// # Requests and answers
//
// GET or POST /query, parameters in the URL or a form body: q (one or
// more statements separated by ';', parsed by the InfluxDB project's own
// parser, github.com/influxdata/influxql), db, rp (ignored: there is one
// retention), epoch (h, m, s, ms, u/us/µ, ns; default RFC3339Nano
// strings), pretty, chunked and chunk_size, params (bound parameters, a
// JSON object). Answers are InfluxDB 1.8's: {"results":[{"statement_id":
// N,"series":[{"name","tags","columns","values"}]}]}; a statement's error
// is {"statement_id":N,"error":"..."} with HTTP 200 and the statements
// after it are "not executed"; a request that cannot run (no q, a parse
// error, bad params) is 400 {"error":"..."}. Chunked answers are one
// JSON document per line, one series chunk of at most chunk_size rows
// each, "partial":true on every chunk of a series that continues.
//
// # Names
//
// The line protocol API stores field f of measurement m as the series
// named influx.MetricName(m, f) ("m_f", each part made a label name)
// with the tags as labels and the database as the label db. A statement
// naming its measurement (FROM "cpu") reads the series whose name starts
// with "cpu_", except those a listing assigns to a longer measurement
// starting with the same prefix; a field reads the series MetricName
// gives. Listings (SHOW MEASUREMENTS, FROM /regex/, SHOW FIELD KEYS
// without FROM) split a name before a final "_value", else at its first
// '_' after the first character: cpu_load_short_value is measurement
// cpu_load_short, field value; cpu_usage_user is cpu, usage_user. Every
// value is a float ("float" in SHOW FIELD KEYS).
//
// # Evaluation
//
// WHERE is split into a time range (InfluxQL's own ConditionExpr), label
// matchers for the tag comparisons of its top-level AND (=, !=, =~, !~;
// an OR of equalities on one tag becomes one regular expression;
// InfluxQL regular expressions match anywhere in a value), and the whole
// condition evaluated again on each series' tags, or on each row when it
// names a field. count, sum, mean, min, max and spread over whole-
// millisecond buckets are pushed down: the backend answers count, sum,
// min and max per series and bucket (its rollups for hour and day
// buckets), and the series of a group are merged here, which is exact.
// The other functions (median, percentile, stddev, first, last, and
// selectors alone without GROUP BY time(), whose answer carries the
// selected point's time) are computed from raw points. A raw ORDER BY
// time DESC LIMIT 1 query reads each series' last point only; with no
// upper time bound, up to an hour past the clock when counting the
// points after that finds none. Subqueries
// run their inner statement, whose series become the outer statement's
// input, within the outer time range.
//
// # Limits
//
// A statement holds at most Options.MaxPoints points (samples read,
// pushed-down buckets, filled buckets and answer rows); past it the
// reading stops and the statement fails with "max-select-point limit
// exceeded". The series of one backend query are bounded by the
// request's MaxSeriesPerQuery, GROUP BY time() by model.MaxBuckets
// buckets, a form body by MaxBodyBytes, a request by RequestTimeout, and
// concurrent requests by Options.MaxConcurrentQueries.
//
// # Concurrency
//
// An API is safe for concurrent use; each request runs its statements
// one after the other on its own executor.
package influxql
