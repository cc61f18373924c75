// Package influx ingests InfluxDB line protocol: a fast parser that turns
// a body into batches (model.Batch, one per series), and the HTTP write API
// (/write, /api/v2/write, /ping, /health) that InfluxDB clients, Telegraf
// and Node-RED talk to. docs/influx.md is the user-facing specification;
// this comment is the summary the code is held to.
//
// # Syntax
//
// A body is a sequence of lines separated by LF (a CR before the LF is
// dropped; a UTF-8 byte-order mark at the start of the body is ignored).
// A newline always ends a line, even inside a quoted string.
// Blank lines, and lines whose first non-blank byte is '#', are skipped.
// Leading and trailing blanks (space, tab) are ignored. Every other line is
//
//	measurement[,tag_key=tag_value...] field_key=field_value[,field_key=field_value...] [timestamp]
//
// with one or more spaces between the three sections. A backslash escapes
// the byte after it for the purpose of finding separators; when
// unescaping, a backslash followed by one of the element's special
// characters or a backslash stands for that character, and any other
// backslash is literal:
//
//	element      special characters
//	measurement  comma, space
//	tag key      comma, equals sign, space
//	tag value    comma, equals sign, space
//	field key    comma, equals sign, space
//
// So "\\" is one backslash, and a name may end in a backslash written
// "\\". Tag values may not hold an unescaped '='.
//
// # Values and timestamps
//
// A field value is a float ([-]digits[.digits][e[+-]digits]), an integer
// ([-]digits followed by i, int64), an unsigned integer (digits followed
// by u, uint64) or a boolean (t, T, true, True, TRUE, f, F, false, False,
// FALSE, stored as 1 and 0); all are stored as float64 (integers beyond
// 2^53 lose precision). NaN and Inf are not line protocol and refuse the
// line. A string value ("...", with \" and \\ escapes) is skipped and
// counted (Result.SkippedStringFields): Tributary stores numbers only; the
// line's other fields are stored. Options.RefuseStringFields refuses such a
// line whole instead. Otherwise a line is stored entirely or not at all.
//
// A timestamp is an integer in the request's precision (ParsePrecision).
// It is converted to milliseconds since the epoch: finer precisions are
// truncated towards the earlier millisecond (floor), coarser ones are
// multiplied, and a product that overflows int64 refuses the line. A line
// without a timestamp gets the default the caller passes (the server's
// clock when the request arrived).
//
// # Series
//
// Each field of a line is one point of the series
//
//	{__name__="<measurement>_<field key>", <tag key>="<tag value>"..., db="<db>"}
//
// The db label comes from the request (v1 db, v2 bucket) unless the line
// has a tag that becomes the label db, which then wins. In the metric name
// and in label names every character outside [a-zA-Z0-9_.:-] becomes '_'
// (one per character), and a name whose first character is a digit, '.',
// ':' or '-' gets a leading '_'. A tag with an empty value is dropped.
// Names must be valid UTF-8; tag values must be valid UTF-8 without control
// characters (C0, DEL, C1). A tag key that becomes __name__, two tag keys
// that become the same label, and series beyond the label limits (labels
// per series including __name__ and db, name and value lengths) refuse the
// line.
//
// # Limits
//
// The HTTP handlers parse a body as it arrives (Parser.ParseReader), and
// every limit that bounds memory is checked before anything is allocated
// for what it counts: a line over Options.MaxLineBytes is dropped while it
// is read (the parser never holds more of it), a line with more than
// Options.MaxFieldsPerLine fields is refused before its fields are parsed
// (both are line errors; comment lines are skipped whatever their
// length), and the point or series past Options.MaxPoints or
// Options.MaxSeries fails the whole call with ErrTooManyPoints or
// ErrTooManySeries, naming its line and column. Series here are the
// distinct series of the call and its distinct series keys (measurement
// and tag set as written, refused lines included). One call allocates at
// most 16 bytes per byte of body, about 2 KiB per distinct series and per
// series key, and its line buffer (FuzzParseReaderAllocations).
//
// # Concurrency
//
// A Parser is not safe for concurrent use; the HTTP handlers keep a small
// pool of parsers and are safe for concurrent use.
package influx
