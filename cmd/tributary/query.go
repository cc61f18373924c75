package main

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tributarydb/tributary/sdk/go/tributary"
)

func runQuery(args []string, stdout, stderr io.Writer) error {
	fs, cf := newClientFlagSet("query", stderr, "give up after this long",
		"Usage: tributary query [flags] 'metric{label=\"value\",...}'\n\nSelects series with a PromQL-style selector (=, !=, =~, !~) and prints their samples.")
	var qf queryFlags
	qf.register(fs)
	format := fs.String("format", "table", "output: table (aligned columns, with a sparkline for a single series), csv or json")
	selector, err := parseOperand(fs, args, true, "selector")
	if err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) { qf.fnSet = qf.fnSet || f.Name == "fn" })
	q, err := qf.query(selector, time.Now())
	if err != nil {
		return err
	}
	out, err := newQueryOutput(*format)
	if err != nil {
		return err
	}
	return cf.call(func(ctx context.Context, c *tributary.Client) error {
		return printQuery(ctx, c, q, out, stdout, stderr)
	})
}

// queryFlags are the flags of `tributary query` that make the query.
type queryFlags struct {
	since, step time.Duration
	start, end  string
	fn, agg, by string
	last        bool
	limit       int
	fnSet       bool // --fn was given
}

func (f *queryFlags) register(fs *flag.FlagSet) {
	f.since = time.Hour
	fs.Var(durationFlag{&f.since}, "since", "query the last DURATION, e.g. 15m, 6h, 7d (ignored with --start)")
	fs.StringVar(&f.start, "start", "", "start time: RFC 3339, YYYY-MM-DD, Unix seconds or milliseconds, now, or relative such as -1h or now-30m (default: --end minus --since)")
	fs.StringVar(&f.end, "end", "", "end time, same forms as --start (default now)")
	fs.Var(durationFlag{&f.step}, "step", "downsample to buckets of DURATION, e.g. 1m, 1h, 1d (0: raw samples)")
	fs.StringVar(&f.fn, "fn", "avg", "downsample function (with --step): avg, sum, min, max, count, first, last")
	fs.StringVar(&f.agg, "agg", "", "aggregate across series with this function (avg, sum, min, max, count, first, last)")
	fs.StringVar(&f.by, "by", "", "comma-separated labels to group by (with --agg)")
	fs.StringVar(&f.by, "group-by", "", "same as --by")
	fs.BoolVar(&f.last, "last", false, "only the newest point of each series (looking back to --start or --since)")
	fs.IntVar(&f.limit, "limit", 0, "most series the query may touch; more is an error (0: the server's limit)")
}

// query checks the flags and makes the query of selector, with times
// relative to now.
func (f *queryFlags) query(selector string, now time.Time) (tributary.Query, error) {
	q := tributary.Query{Selector: selector, Last: f.last, LimitSeries: f.limit}
	if _, err := tributary.ParseSelector(q.Selector); err != nil {
		return q, fmt.Errorf("%w: %v", errUsage, err)
	}
	endMs, err := parseTime(f.end, now, now.UnixMilli())
	if err != nil {
		return q, fmt.Errorf("%w: --end: %v", errUsage, err)
	}
	if f.since < 0 {
		return q, fmt.Errorf("%w: --since %s is negative", errUsage, f.since)
	}
	startMs, err := parseTime(f.start, now, endMs-f.since.Milliseconds())
	if err != nil {
		return q, fmt.Errorf("%w: --start: %v", errUsage, err)
	}
	if endMs < startMs {
		return q, fmt.Errorf("%w: --end %s is before --start %s", errUsage, fmtTime(endMs), fmtTime(startMs))
	}
	q.Start, q.End = time.UnixMilli(startMs), time.UnixMilli(endMs)
	switch {
	case f.step < 0 || f.step%time.Millisecond != 0:
		return q, fmt.Errorf("%w: --step %s: want a positive whole number of milliseconds", errUsage, f.step)
	case f.step > 0 && f.last:
		return q, fmt.Errorf("%w: --step and --last exclude each other", errUsage)
	case f.step > 0:
		fn, err := tributary.ParseFunc(f.fn)
		if err != nil || fn == tributary.FuncNone {
			return q, fmt.Errorf("%w: --fn %q: want avg, sum, min, max, count, first or last", errUsage, f.fn)
		}
		q.Step, q.Fn = f.step, fn
	case f.fnSet:
		return q, fmt.Errorf("%w: --fn needs --step", errUsage)
	}
	if f.agg == "" {
		if f.by != "" {
			return q, fmt.Errorf("%w: --by needs --agg", errUsage)
		}
		return q, nil
	}
	agg, err := tributary.ParseFunc(f.agg)
	if err != nil || agg == tributary.FuncNone {
		return q, fmt.Errorf("%w: --agg %q: want avg, sum, min, max, count, first or last", errUsage, f.agg)
	}
	q.Aggregate = agg
	for _, l := range strings.Split(f.by, ",") {
		if l = strings.TrimSpace(l); l != "" {
			q.GroupBy = append(q.GroupBy, l)
		}
	}
	return q, nil
}

// newQueryOutput is the renderer of --format.
func newQueryOutput(format string) (queryOutput, error) {
	switch format {
	case "table":
		return &tableOutput{}, nil
	case "csv":
		return &csvOutput{}, nil
	case "json":
		return &jsonOutput{}, nil
	}
	return nil, fmt.Errorf("%w: --format %q: want table, csv or json", errUsage, format)
}

// printQuery runs q and renders its answer on stdout as it streams in;
// warnings, and a note when nothing matched, go to stderr.
func printQuery(ctx context.Context, c *tributary.Client, q tributary.Query, out queryOutput, stdout, stderr io.Writer) error {
	bw := bufio.NewWriterSize(stdout, 64<<10)
	if err := out.begin(ctx, c, q, bw); err != nil {
		return err
	}
	it := c.Query(ctx, q)
	defer it.Close()
	n := 0
	for it.Next() {
		n++
		if err := out.series(it.Series()); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		bw.Flush()
		return err
	}
	if err := out.end(it); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	for _, w := range it.Warnings() {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if n == 0 {
		fmt.Fprintf(stderr, "no series matched %s between %s and %s\n", q.Selector, fmtTime(q.Start.UnixMilli()), fmtTime(q.End.UnixMilli()))
	}
	return nil
}

// queryOutput renders an answer as it streams in.
type queryOutput interface {
	begin(ctx context.Context, c *tributary.Client, q tributary.Query, w *bufio.Writer) error
	series(s tributary.Series) error
	end(it *tributary.SeriesIter) error
}

// timeLayout has a fixed width, so table columns stay aligned.
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func fmtTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(timeLayout) }

// fmtValue prints integers without a fraction and others with six
// significant digits.
func fmtValue(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// tableOutput prints one aligned row per point. Rows are aligned in runs
// of tableFlushRows, so memory stays bounded for long answers.
type tableOutput struct {
	w     *bufio.Writer
	tw    *tabwriter.Writer
	rows  int
	n     int
	first tributary.Series
}

const tableFlushRows = 8192

func (t *tableOutput) begin(_ context.Context, _ *tributary.Client, _ tributary.Query, w *bufio.Writer) error {
	t.w = w
	t.tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	_, err := fmt.Fprintln(t.tw, "SERIES\tTIME\tVALUE")
	return err
}

func (t *tableOutput) series(s tributary.Series) error {
	t.n++
	if t.n == 1 {
		t.first = s
	} else {
		t.first = tributary.Series{}
	}
	name := s.Labels.String()
	for _, p := range s.Points {
		if _, err := fmt.Fprintf(t.tw, "%s\t%s\t%s\n", name, fmtTime(p.TimestampMs), fmtValue(p.Value)); err != nil {
			return err
		}
		if t.rows++; t.rows%tableFlushRows == 0 {
			if err := t.tw.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

func (t *tableOutput) end(*tributary.SeriesIter) error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	if t.n == 1 && len(t.first.Points) > 1 {
		_, err := fmt.Fprintln(t.w, sparkline(t.first.Points, 60))
		return err
	}
	return nil
}

var sparkChars = []rune("▁▂▃▄▅▆▇█")

// sparkline draws points as at most width bars (averaging runs of points
// when there are more), followed by the range and count. NaN and infinite
// values are left blank.
func sparkline(points []tributary.Point, width int) string {
	nb := min(len(points), width)
	bars := make([]float64, nb)
	lo, hi := math.Inf(1), math.Inf(-1)
	for b := range nb {
		from, to := b*len(points)/nb, (b+1)*len(points)/nb
		sum, n := 0.0, 0
		for _, p := range points[from:to] {
			if !math.IsNaN(p.Value) && !math.IsInf(p.Value, 0) {
				sum += p.Value
				n++
			}
		}
		bars[b] = math.NaN()
		if n > 0 {
			bars[b] = sum / float64(n)
			lo, hi = min(lo, bars[b]), max(hi, bars[b])
		}
	}
	var sb strings.Builder
	for _, v := range bars {
		switch {
		case math.IsNaN(v):
			sb.WriteByte(' ')
		case hi == lo:
			sb.WriteRune(sparkChars[len(sparkChars)/2])
		default:
			i := int((v - lo) / (hi - lo) * float64(len(sparkChars)-1))
			sb.WriteRune(sparkChars[min(max(i, 0), len(sparkChars)-1)])
		}
	}
	if math.IsInf(lo, 1) {
		return sb.String()
	}
	fmt.Fprintf(&sb, "  min %s  max %s  (%d points)", fmtValue(lo), fmtValue(hi), len(points))
	return sb.String()
}

// csvOutput prints the columns metric, timestamp, value and one column per
// label, in the format `tributary write --format csv` reads back.
type csvOutput struct {
	cw     *csv.Writer
	labels []string
	row    []string
}

func (o *csvOutput) begin(ctx context.Context, c *tributary.Client, q tributary.Query, w *bufio.Writer) error {
	if q.Aggregate != tributary.FuncNone {
		o.labels = slices.Sorted(slices.Values(q.GroupBy))
		o.labels = slices.Compact(o.labels)
	} else {
		names, err := c.LabelNames(ctx, q.Selector)
		if err != nil {
			return err
		}
		for _, n := range names {
			if n != tributary.MetricName {
				o.labels = append(o.labels, n)
			}
		}
	}
	o.cw = csv.NewWriter(w)
	o.row = make([]string, 3+len(o.labels))
	return o.cw.Write(append([]string{"metric", "timestamp", "value"}, o.labels...))
}

func (o *csvOutput) series(s tributary.Series) error {
	o.row[0] = s.Labels.Metric()
	for i, n := range o.labels {
		o.row[3+i] = s.Labels.Get(n)
	}
	for _, p := range s.Points {
		o.row[1] = time.UnixMilli(p.TimestampMs).UTC().Format(time.RFC3339Nano)
		o.row[2] = strconv.FormatFloat(p.Value, 'g', -1, 64)
		if err := o.cw.Write(o.row); err != nil {
			return err
		}
	}
	return nil
}

func (o *csvOutput) end(*tributary.SeriesIter) error {
	o.cw.Flush()
	return o.cw.Error()
}

// jsonOutput prints one document:
//
//	{"series":[{"labels":{...},"points":[[timestamp_ms,value],...]},...],"source":"raw","warnings":[]}
//
// Values that JSON cannot hold (NaN, ±Inf) are the strings "NaN", "+Inf"
// and "-Inf".
type jsonOutput struct {
	w *bufio.Writer
	n int
}

func (o *jsonOutput) begin(_ context.Context, _ *tributary.Client, _ tributary.Query, w *bufio.Writer) error {
	o.w = w
	_, err := w.WriteString(`{"series":[`)
	return err
}

func (o *jsonOutput) series(s tributary.Series) error {
	if o.n > 0 {
		o.w.WriteByte(',')
	}
	o.n++
	ls, err := json.Marshal(s.Labels.Map())
	if err != nil {
		return err
	}
	o.w.WriteString("\n{\"labels\":")
	o.w.Write(ls)
	o.w.WriteString(`,"points":[`)
	var buf []byte
	for i, p := range s.Points {
		buf = buf[:0]
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, '[')
		buf = strconv.AppendInt(buf, p.TimestampMs, 10)
		buf = append(buf, ',')
		buf = appendJSONValue(buf, p.Value)
		buf = append(buf, ']')
		if _, err := o.w.Write(buf); err != nil {
			return err
		}
	}
	_, err = o.w.WriteString("]}")
	return err
}

func appendJSONValue(dst []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(dst, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(dst, `"+Inf"`...)
	case math.IsInf(v, -1):
		return append(dst, `"-Inf"`...)
	}
	return strconv.AppendFloat(dst, v, 'g', -1, 64)
}

func (o *jsonOutput) end(it *tributary.SeriesIter) error {
	src, err := json.Marshal(it.Source())
	if err != nil {
		return err
	}
	warns := it.Warnings()
	if warns == nil {
		warns = []string{}
	}
	ws, err := json.Marshal(warns)
	if err != nil {
		return err
	}
	if o.n > 0 {
		o.w.WriteByte('\n')
	}
	_, err = fmt.Fprintf(o.w, "],\"source\":%s,\"warnings\":%s}\n", src, ws)
	return err
}
