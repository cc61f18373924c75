// Package opentsdb serves the OpenTSDB 2.4 API from a backend.Backend:
// the HTTP endpoints real clients use (Grafana's OpenTSDB data source,
// HTTP senders) through Register, and the telnet-style "put" line protocol
// (TCollector, scollector, StatsD back ends, netcat) through TelnetServer.
// docs/opentsdb.md is the user guide; this comment is the format spec.
//
// # Concurrency
//
// The handlers Register mounts are safe for concurrent use. A
// TelnetServer's methods are safe for concurrent use; each connection is
// served by one goroutine that owns its buffers.
//
// # Names
//
// A metric name and a tag key may hold ASCII letters and digits, '-',
// '_', '.', '/' and Unicode letters (OpenTSDB's set); anything else
// refuses the point. The metric is stored as the label __name__, as is.
// A tag becomes a label: the key is mapped onto the node's label names
// ([a-zA-Z_][a-zA-Z0-9_.:-]*) by replacing '/' and each non-ASCII letter
// with '_' and prefixing '_' when the key starts with a digit, '-' or '.'
// ("rack/slot" → rack_slot, "température" → temp_rature, "9lives" →
// _9lives). Queries map their tag keys the same way, and answers carry
// the mapped names. Two keys of one point that map to the same name, and
// the key "__name__", are refused. A tag value is any non-empty valid
// UTF-8 without control characters, kept as is. Points without tags are
// accepted (OpenTSDB requires one).
//
// # Timestamps and values
//
// A put timestamp is an integer: up to 4294967295 it is seconds, above it
// milliseconds, up to 9999999999999 (OpenTSDB's rule); "1700000000.250"
// (seconds with up to three decimals) is accepted too, and in JSON a
// number with a fraction is seconds. Zero, negative and larger values are
// refused. A value is a decimal number, in JSON also a numeric string;
// NaN, infinities and numbers beyond float64 are refused, as OpenTSDB
// does. Values are stored as float64 (integers beyond 2^53 lose precision).
//
// # POST /api/put
//
// The body is one datapoint object or an array of them:
//
//	{"metric": "sys.cpu.user", "timestamp": 1700000000, "value": 42.5, "tags": {"host": "web01"}}
//
// Each datapoint is validated on its own; the valid ones are stored in one
// backend write. With ?details the answer is
// {"success":N,"failed":M,"errors":[{"datapoint":{...},"error":"..."}]}
// (at most 100 errors are listed; the echoed datapoint is cut to 32 tags
// and 256 bytes a string), with ?summary the same without errors; the
// status is 200 when nothing failed, else 400. Without either: 204, or 400
// with an error body. A body that is not JSON, not an object or array, or
// an empty array is refused as a whole (400, nothing stored); more than
// Limits.MaxPointsPerRequest datapoints, more than
// Limits.MaxSeriesPerRequest distinct series or a body over
// Limits.MaxBodyBytes is 413, nothing stored. A datapoint with more tags
// than a series may hold (Limits.Labels.MaxLabels less the metric name)
// fails alone; its tags are counted, not decoded. A backend that refuses
// the whole write answers 429 (overloaded) or 503 (unavailable, timeout)
// with Retry-After; nothing is stored.
//
// The body is read whole (up to Limits.MaxBodyBytes), checked with
// json.Valid, and its datapoints decoded one at a time in place; a
// request allocates at most 8 bytes per byte of body plus about 2 KiB per
// distinct series (FuzzDecodePutAllocations holds it to that).
//
// # Telnet lines
//
//	put <metric> <timestamp> <value> [<tagk>=<tagv> ...]\n
//
// Fields are separated by spaces or tabs; "\r\n" ends a line too; a tag
// value may contain '='. Other commands: version, stats (the counters as
// "tributary.<name> <unix seconds> <count>"), help, exit, and auth <token>
// when TelnetOptions.Authenticate is set. There is no acknowledgement: a
// bad line is answered with one line, "put: illegal argument: line N:
// <why>", and the connection stays open. A line with more tags than a
// series may hold (Limits.Labels.MaxLabels less the metric name) is
// refused before its tags are parsed; only that many fields of a line
// are kept. Lines are parsed into batches of up to FlushPoints points (or
// 1 MiB of label strings of new series, which are copied out of their
// lines), written to the backend when full, after FlushInterval, and when
// the connection ends (a clean close is flushed before the handler
// returns, a final line without '\n' included). A point the backend
// refuses is reported the same way, naming its line. A line longer than
// MaxLineBytes is answered and skipped. A write the backend refuses as
// overloaded or unavailable is retried with backoff for up to
// Limits.RequestTimeout (reading stops meanwhile, so TCP pushes back on
// the sender), then dropped, counted and reported with
// "put: unable to store N data points: <why>".
//
// # GET /api/query
//
// Parameters: start (required), end (default now), m (repeatable), ms or
// msResolution (millisecond timestamps), arrays (dps as [[t, v], ...]),
// show_query, tz (a time zone for dates; default UTC), use_calendar.
// Times are "now", "<n><unit>-ago" (units ms, s, m, h, d, w, n = 30 d,
// y = 365 d), a Unix timestamp (up to 10 digits seconds, more digits
// milliseconds, "s.mmm") or "yyyy/MM/dd[-HH:mm[:ss[.SSS]]]" (a space may
// replace '-'). The m= grammar:
//
//	m        = aggregator ":" [downsample ":"] [rate ":"] ["explicit_tags:"] metric [filters [filters]]
//	downsample = interval "-" aggregator ["-" fill]      e.g. 1m-avg, 1h-sum-zero, 0all-max
//	interval = number unit ["c"] | "0all"                 a fraction is rounded to the ms
//	fill     = "" | "none" | "nan" | "null" | "zero"
//	rate     = "rate" ["{" ("counter"|"dropcounter") ["," max ["," reset]] "}"]
//	filters  = "{" [tagk "=" filter {"," tagk "=" filter}] "}"
//	filter   = "*" | value {"|" value} | type "(" expression ")"
//
// Filters in the first braces group the answer by their tag keys; those in
// the second only select. Types: literal_or, iliteral_or, not_literal_or,
// not_iliteral_or, wildcard, iwildcard, regexp (RE2, matching anywhere in
// the value), not_key. Every filter but not_key requires the tag.
//
// # POST /api/query
//
// The body Grafana sends: {"start", "end", "queries": [{"aggregator",
// "metric", "downsample", "rate", "rateOptions": {"counter", "counterMax",
// "resetValue", "dropResets"}, "tags": {...}, "filters": [{"type", "tagk",
// "filter", "groupBy"}], "explicitTags"}], "msResolution", "showQuery",
// "timezone", "useCalendar"}; start and end may be numbers or strings.
// Legacy tags become group-by filters.
//
// # Query semantics
//
// Aggregators: avg, sum, min, max, count, first, last; zimsum, mimmax and
// mimmin are sum, max and min; none returns every series apart. Per series:
// downsample (in the backend; buckets start at multiples of the interval
// since the epoch, and the query start is moved back to its bucket start),
// fill, rate. Then series are grouped by the group-by tag values and
// aggregated at identical timestamps: there is no interpolation (with a
// downsampler, series share bucket timestamps; without one, only equal
// timestamps combine). The aggregation runs in the backend (model.Query
// GroupBy/Aggregate) unless a rate, a fill policy or "none" needs per
// series work first; both ways it is model/aggregate's, the one every
// backend uses, except that here NaN values (of a nan or null fill, or
// written through another protocol) are left out of the fold, and a
// timestamp with nothing but NaN stays NaN. Rate is per second between
// consecutive points; with
// counter a decrease is a reset: dropped with dropResets (dropcounter),
// else counted across counterMax (default 2^63-1) and zeroed when above a
// positive resetValue. In seconds resolution the points of one second are
// combined with the downsampler's (else the aggregator's; for none, last)
// function.
//
// The answer is an array of {"metric", "tags" (tags shared by the group's
// series), "aggregateTags" (tag keys in which they differ), ["query"
// (with showQuery, holding the sub-query and its "index")], "dps"}; NaN and
// infinities are written as null. In the backend path tags and
// aggregateTags are computed from every series the query selects, also
// those without points in the range. An answer over DefaultMaxQueryPoints
// points is refused with 400.
//
// # Other endpoints
//
// /api/query/last (GET timeseries=metric{tags}&back_scan=hours, or POST
// {"queries":[{"metric","tags"}],"backScan"}): the newest point of each
// selected series as {"metric","timestamp" (ms),"value" (a string),"tags",
// "tsuid"}; back_scan 0 looks back as far as the node keeps data.
// /api/suggest (type metrics, tagk or tagv; q prefix; max, default 25).
// /api/search/lookup (m=metric{k=v,...}, '*' for any metric, key or value;
// limit, default 25). /api/aggregators, /api/config/filters, /api/version
// and /api/stats. A tsuid is an opaque stable hash of the series; queries
// by tsuid are not supported. Expressions, annotations, UID, tree and
// other search endpoints answer 501.
//
// Errors have OpenTSDB's shape {"error":{"code":400,"message":"...",
// "details":"..."}} with statuses from httpapi.StatusFor.
package opentsdb
