// Package csv reads points from CSV, the second input format of
// `tributary write` (the first is InfluxDB line protocol, read by
// influx.ChunkReader):
//
//   - The first line that is not blank or a comment ('#' first) is the
//     header. It names the columns: "metric" (or "__name__"), "value",
//     optionally "timestamp" (or "time"); every other column is a label,
//     and its name must be a valid label name. Column order is free.
//   - Each following line is one point. Fields are separated by commas and
//     may be quoted with double quotes ("" inside quotes is one quote); a
//     record is one line (quoted fields may not span lines). Blanks before
//     a field are ignored; blanks after it are kept, except around value
//     and timestamp.
//   - value is a decimal number; NaN, +Inf and -Inf are accepted.
//   - timestamp is RFC 3339 ("2024-05-01T12:00:00.250Z"), a date-time
//     without a zone (UTC: "2024-05-01 12:00:00"), or an epoch number in
//     the Precision unit (integer, or decimal such as 1714564800.25).
//     Empty, or no timestamp column: the time the line is read.
//   - An empty label cell means the series has no such label. A "db"
//     column wins over Options.DB.
//
// Lines are read through httpapi.LineReader, so memory stays bounded
// whatever the input: a line longer than MaxLineBytes is skipped and
// reported. A Reader is not safe for concurrent use.
package csv

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/node/labels"
)

// Options configure a Reader. The zero value of a field means its default.
type Options struct {
	// Precision is the unit of numeric timestamps (the zero value is
	// influx.Nanosecond; `tributary write` defaults to milliseconds).
	Precision influx.Precision
	// DB adds the label db=DB to every point whose db cell is empty;
	// empty: none.
	DB string
	// MaxLineBytes bounds one line: a longer one is skipped. Default
	// 1 MiB.
	MaxLineBytes int
	// Now dates the points without a timestamp. Default time.Now.
	Now func() time.Time
}

// Validate fills in defaults and rejects impossible values.
func (o *Options) Validate() error {
	o.MaxLineBytes = cmp.Or(o.MaxLineBytes, 1<<20)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxLineBytes < 16 {
		return fmt.Errorf("csv options: MaxLineBytes %d is below 16", o.MaxLineBytes)
	}
	if _, ok := msPerUnit[o.Precision]; !ok {
		return fmt.Errorf("csv options: unknown precision %s", o.Precision)
	}
	return nil
}

// Point is the point of one data line. Labels holds the metric name first,
// then the label columns in column order; it is valid until the next call
// of Next.
type Point struct {
	Line        int // 1-based line number in the input
	Labels      []labels.Label
	TimestampMs int64
	Value       float64
}

// LineError is a data line that holds no point: it is skipped, and the
// input goes on.
type LineError struct {
	Line int    // 1-based line number in the input
	Msg  string // what is wrong
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// HeaderError is an input whose header cannot be used (or that has none):
// nothing can be read from it.
type HeaderError struct {
	Line int    // 1-based line number of the header; 0: no header line
	Msg  string // what is wrong
}

func (e *HeaderError) Error() string {
	if e.Line == 0 {
		return e.Msg
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
}

// Reader reads points from CSV. Create it with NewReader.
type Reader struct {
	o  Options
	lr *httpapi.LineReader
	f  format
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader, o Options) (*Reader, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Reader{o: o, lr: httpapi.NewLineReader(r, o.MaxLineBytes), f: format{prec: o.Precision, db: o.DB}}, nil
}

// Next returns the point of the next data line, reading the header first.
// A data line without a point returns a *LineError, and Next may be called
// again; an unusable header a *HeaderError; the end of the input io.EOF;
// an error reading it that error, wrapped.
func (r *Reader) Next() (Point, error) {
	for {
		line, tooLong, err := r.lr.Next()
		if err == io.EOF && r.f.cols == nil {
			return Point{}, &HeaderError{Msg: "the input has no CSV header line"}
		}
		if err != nil {
			return Point{}, err
		}
		n := r.lr.Line()
		if tooLong {
			if r.f.cols == nil {
				return Point{}, &HeaderError{Line: n, Msg: fmt.Sprintf("the header is longer than %d bytes", r.o.MaxLineBytes)}
			}
			return Point{}, &LineError{Line: n, Msg: fmt.Sprintf("longer than %d bytes; skipped", r.o.MaxLineBytes)}
		}
		if skippable(line) {
			continue
		}
		if r.f.cols == nil {
			if err := r.f.header(line); err != nil {
				return Point{}, &HeaderError{Line: n, Msg: "header: " + err.Error()}
			}
			continue
		}
		ls, ts, v, err := r.f.record(line, r.o.Now)
		if err != nil {
			return Point{}, &LineError{Line: n, Msg: err.Error()}
		}
		return Point{Line: n, Labels: ls, TimestampMs: ts, Value: v}, nil
	}
}

// skippable reports whether a line holds no point: blank, or a comment
// (first non-blank byte '#').
func skippable(line []byte) bool {
	for _, c := range line {
		switch c {
		case ' ', '\t':
			continue
		case '#':
			return true
		}
		return false
	}
	return true
}

// format is the header of an input and what reads its records.
type format struct {
	prec influx.Precision
	db   string

	cols              []string // label name per column, "" for the reserved ones; nil before the header
	metric, ts, value int      // column index, -1 when absent
	dbCol             bool
	fields            []string
	labels            []labels.Label
}

func (f *format) header(line []byte) error {
	names, err := splitCSV(line, nil)
	if err != nil {
		return err
	}
	f.metric, f.ts, f.value = -1, -1, -1
	cols := make([]string, len(names))
	seen := map[string]int{}
	for i, n := range names {
		n = strings.TrimRight(n, " \t")
		key := strings.ToLower(n)
		if key == "__name__" {
			key = "metric"
		}
		if key == "time" {
			key = "timestamp"
		}
		if j, dup := seen[key]; dup {
			return fmt.Errorf("columns %d and %d are both %q", j+1, i+1, key)
		}
		seen[key] = i
		switch key {
		case "metric":
			f.metric = i
		case "timestamp":
			f.ts = i
		case "value":
			f.value = i
		default:
			if _, err := labels.New([]labels.Label{{Name: labels.MetricName, Value: "x"}, {Name: n, Value: "x"}}, labels.Limits{}); err != nil {
				return fmt.Errorf("column %d: %q is not a valid label name ([a-zA-Z_][a-zA-Z0-9_.:-]*)", i+1, n)
			}
			cols[i] = n
			if n == "db" {
				f.dbCol = true
			}
		}
	}
	if f.metric < 0 || f.value < 0 {
		return fmt.Errorf("want columns metric and value (and optionally timestamp and labels), got %q", names)
	}
	f.cols = cols
	return nil
}

// record parses one data line.
func (f *format) record(line []byte, now func() time.Time) ([]labels.Label, int64, float64, error) {
	var err error
	f.fields, err = splitCSV(line, f.fields[:0])
	if err != nil {
		return nil, 0, 0, err
	}
	if len(f.fields) != len(f.cols) {
		return nil, 0, 0, fmt.Errorf("%d fields, the header has %d", len(f.fields), len(f.cols))
	}
	metric := f.fields[f.metric]
	if metric == "" {
		return nil, 0, 0, errors.New("empty metric")
	}
	v, err := strconv.ParseFloat(strings.TrimRight(f.fields[f.value], " \t"), 64)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("value %.40q is not a number", f.fields[f.value])
	}
	var ts int64
	if tsField := strings.TrimRight(f.fields[max(f.ts, 0)], " \t"); f.ts < 0 || tsField == "" {
		ts = now().UnixMilli()
	} else if ts, err = f.timestamp(tsField); err != nil {
		return nil, 0, 0, err
	}
	f.labels = append(f.labels[:0], labels.Label{Name: labels.MetricName, Value: metric})
	hasDB := false
	for i, n := range f.cols {
		if n != "" && f.fields[i] != "" {
			f.labels = append(f.labels, labels.Label{Name: n, Value: f.fields[i]})
			hasDB = hasDB || n == "db"
		}
	}
	if f.db != "" && !(f.dbCol && hasDB) {
		f.labels = append(f.labels, labels.Label{Name: "db", Value: f.db})
	}
	return f.labels, ts, v, nil
}

// msPerUnit is the length of one precision unit in milliseconds.
var msPerUnit = map[influx.Precision]float64{
	influx.Nanosecond: 1e-6, influx.Microsecond: 1e-3, influx.Millisecond: 1,
	influx.Second: 1e3, influx.Minute: 6e4, influx.Hour: 3.6e6,
}

func (f *format) timestamp(s string) (int64, error) {
	if httpapi.IsDigits(strings.TrimPrefix(s, "-")) {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("timestamp %q is out of range", s)
		}
		ms, ok := f.prec.ToMillis(n)
		if !ok {
			return 0, fmt.Errorf("timestamp %q in %s is out of range", s, f.prec)
		}
		return ms, nil
	}
	if x, err := strconv.ParseFloat(s, 64); err == nil && strings.ContainsAny(s, "0123456789") && !strings.ContainsAny(s, "xXpPnN") {
		ms := math.Floor(x * msPerUnit[f.prec])
		if math.IsNaN(ms) || math.Abs(ms) > 1<<62 {
			return 0, fmt.Errorf("timestamp %q in %s is out of range", s, f.prec)
		}
		return int64(ms), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, fmt.Errorf("timestamp %.40q: want RFC 3339, YYYY-MM-DD HH:MM:SS or an epoch number in %s", s, f.prec)
}

// splitCSV splits one CSV line into fields (RFC 4180 quoting within the
// line, blanks before a field ignored, as encoding/csv does with
// TrimLeadingSpace), appending to dst.
func splitCSV(line []byte, dst []string) ([]string, error) {
	i := 0
	for {
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i < len(line) && line[i] == '"' {
			var b strings.Builder
			i++
			for {
				j := i
				for j < len(line) && line[j] != '"' {
					j++
				}
				b.Write(line[i:j])
				if j >= len(line) {
					return nil, fmt.Errorf("field %d: unterminated quoted field", len(dst)+1)
				}
				if j+1 < len(line) && line[j+1] == '"' {
					b.WriteByte('"')
					i = j + 2
					continue
				}
				i = j + 1
				break
			}
			dst = append(dst, b.String())
			for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
				i++
			}
			if i < len(line) && line[i] != ',' {
				return nil, fmt.Errorf("field %d: unexpected %q after a quoted field", len(dst), line[i])
			}
		} else {
			j := i
			for j < len(line) && line[j] != ',' {
				j++
			}
			dst = append(dst, string(line[i:j]))
			i = j
		}
		if i >= len(line) {
			return dst, nil
		}
		i++ // the comma
	}
}
