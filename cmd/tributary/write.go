package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/sdk/go/tributary"
)

// stdin is what `tributary write -` reads; tests replace it.
var stdin io.Reader = os.Stdin

// maxLineBytes bounds one input line; longer lines are skipped and
// reported, so memory stays bounded whatever the input.
const maxLineBytes = 1 << 20

// lpChunkBytes is how much line protocol is parsed at a time.
const lpChunkBytes = 1 << 20

// maxProblems bounds the problems the summary lists.
const maxProblems = 10

func runWrite(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("write", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cf clientFlags
	cf.register(fs, "give up on one write request after this long (the whole input has no time limit)")
	format := fs.String("format", "lp", "input format: lp (InfluxDB line protocol) or csv (header metric,timestamp,value,<label>...; see docs/sdk-go.md)")
	precision := fs.String("precision", "", "unit of numeric timestamps: ns, us, ms or s (default: ns for lp, ms for csv)")
	db := fs.String("db", "", "add the label db=NAME to every point, as the InfluxDB write API's db parameter does (a db tag or column of the input wins)")
	batchPoints := fs.Int("batch-points", tributary.DefaultMaxBatchPoints, "points per write request")
	progressMode := fs.String("progress", "auto", "progress on stderr: auto (when stderr is a terminal), always or never")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: tributary write [flags] [FILE|-]")
		fmt.Fprintln(stderr, "\nReads points from FILE (or standard input) and writes them to a server, then prints a summary.")
		fmt.Fprintln(stderr, "Exits with status 1 when any point was not stored.")
		fs.PrintDefaults()
	}
	args, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(args) > 1 {
		fs.Usage()
		return fmt.Errorf("%w: want at most one input file, got %d arguments", errUsage, len(args))
	}
	if *batchPoints <= 0 {
		return fmt.Errorf("%w: --batch-points %d is not positive", errUsage, *batchPoints)
	}
	if *format != "lp" && *format != "csv" {
		return fmt.Errorf("%w: --format %q: want lp or csv", errUsage, *format)
	}
	if *progressMode != "auto" && *progressMode != "always" && *progressMode != "never" {
		return fmt.Errorf("%w: --progress %q: want auto, always or never", errUsage, *progressMode)
	}
	precName := *precision
	if precName == "" {
		precName = map[string]string{"lp": "ns", "csv": "ms"}[*format]
	}
	prec, err := influx.ParsePrecision(precName, false)
	if err != nil || precName == "" {
		return fmt.Errorf("%w: --precision %q: want ns, us, ms or s", errUsage, *precision)
	}
	if err := checkDatabase(*db); err != nil {
		return fmt.Errorf("%w: --db %q: %v", errUsage, *db, err)
	}

	in, err := openInput(arg(args, 0))
	if err != nil {
		return err
	}
	defer in.close()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := cf.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	sum := &writeSummary{}
	w, err := c.NewWriter(tributary.WriterOptions{
		MaxBatchPoints: *batchPoints,
		OnRejected:     sum.rejected,
		OnError:        func(err error) { sum.problem("not delivered: %v", err) },
	})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}

	start := time.Now()
	var read atomic.Int64
	r := &countingReader{r: in.r, n: &read}
	var prog *progress
	if *progressMode == "always" || (*progressMode == "auto" && isTerminal(stderr)) {
		prog = startProgress(stderr, isTerminal(stderr), in.size, &read, func() int64 { return w.Stats().Added }, start)
	}
	lr := &lineReader{br: bufio.NewReaderSize(r, maxLineBytes)}
	if *format == "csv" {
		err = readCSV(ctx, lr, w, sum, &csvFormat{prec: prec, db: *db})
	} else {
		err = readLineProtocol(ctx, lr, w, sum, prec, *db)
	}
	readInterrupted := ctx.Err() != nil
	closeCtx := ctx
	if readInterrupted {
		// Send what was read, but wait at most a few seconds for it, and
		// let a second interrupt end the process.
		stop()
		var cancel context.CancelFunc
		closeCtx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
	}
	closeErr := w.Close(closeCtx)
	interrupted := ctx.Err() != nil
	if prog != nil {
		prog.stop()
	}
	if err != nil && !interrupted && errors.Is(err, errUsage) {
		return err // the input is unusable (a bad CSV header): no summary
	}
	st := w.Stats()
	sum.print(stdout, st, time.Since(start), read.Load(), readInterrupted, interrupted)
	if err != nil && !interrupted {
		return err
	}
	if interrupted {
		return errors.New("interrupted (the summary says what was stored)")
	}
	var we *tributary.WriteError
	if closeErr != nil && !errors.As(closeErr, &we) {
		return closeErr
	}
	if sum.invalid > 0 || st.Rejected > 0 || st.Failed > 0 {
		return fmt.Errorf("not everything was stored: %d lines refused, %d points rejected by the server, %d points not delivered", sum.invalid, st.Rejected, st.Failed)
	}
	return nil
}

// checkDatabase accepts what can be the value of the db label: valid
// UTF-8 without control characters, within the default value length.
func checkDatabase(db string) error {
	if !utf8.ValidString(db) {
		return errors.New("not valid UTF-8")
	}
	if len(db) > labels.DefaultLimits.MaxValueBytes {
		return fmt.Errorf("%d bytes, the limit is %d", len(db), labels.DefaultLimits.MaxValueBytes)
	}
	for _, r := range db {
		if unicode.IsControl(r) {
			return fmt.Errorf("control character %U", r)
		}
	}
	return nil
}

// input is the file or stream points are read from.
type input struct {
	r     io.Reader
	size  int64 // -1 when unknown
	close func() error
}

func openInput(name string) (*input, error) {
	if name == "" || name == "-" {
		return &input{r: stdin, size: -1, close: func() error { return nil }}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open input: %w", err)
	}
	size := int64(-1)
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	return &input{r: f, size: size, close: f.Close}, nil
}

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// lineReader splits input into lines of at most maxLineBytes.
type lineReader struct {
	br   *bufio.Reader
	line int // number of the line last returned, 1-based
}

// next returns the next line without its line break (LF or CRLF); the
// slice is valid until the next call. A line longer than the reader's
// buffer is skipped and returned as tooLong. At the end it returns io.EOF.
func (lr *lineReader) next() (line []byte, tooLong bool, err error) {
	b, err := lr.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		for err == bufio.ErrBufferFull {
			_, err = lr.br.ReadSlice('\n')
		}
		lr.line++
		if err != nil && err != io.EOF {
			return nil, false, fmt.Errorf("read input: %w", err)
		}
		return nil, true, nil
	}
	if err != nil && err != io.EOF {
		return nil, false, fmt.Errorf("read input: %w", err)
	}
	if err == io.EOF && len(b) == 0 {
		return nil, false, io.EOF
	}
	lr.line++
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b, false, nil
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

// readLineProtocol parses the input a chunk of lines at a time with the
// InfluxDB line protocol parser and adds the points to w.
func readLineProtocol(ctx context.Context, lr *lineReader, w *tributary.Writer, sum *writeSummary, prec influx.Precision, db string) error {
	p := influx.NewParser(influx.Options{MaxLineBytes: maxLineBytes})
	chunk := make([]byte, 0, lpChunkBytes+4096)
	firstLine := 0 // input line number of the chunk's first line
	var ls tributary.Labels
	flush := func() error {
		if len(chunk) == 0 {
			return nil
		}
		res, err := p.Parse(chunk, db, prec, time.Now().UnixMilli())
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		sum.lines += int64(res.Lines)
		sum.invalid += int64(res.RejectedLines)
		for _, e := range res.Errors {
			sum.problem("line %d, column %d: %s", firstLine+e.Line-1, e.Column, e.Msg)
		}
		sum.unlisted += int64(res.RejectedLines - len(res.Errors))
		for _, b := range res.Batches {
			ls = ls[:0]
			for _, l := range b.Labels {
				ls = append(ls, tributary.Label{Name: l.Name, Value: l.Value})
			}
			if err := w.AddSeries(ctx, ls, b.Ts, b.Vs); err != nil {
				if errors.Is(err, tributary.ErrInvalidSeries) {
					sum.problem("%v", err)
					continue
				}
				return err
			}
		}
		chunk = chunk[:0]
		return nil
	}
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		line, tooLong, err := lr.next()
		if err == io.EOF {
			return flush()
		}
		if err != nil {
			return err
		}
		if len(chunk) == 0 {
			firstLine = lr.line
		}
		if tooLong {
			// Keep the line count of the chunk right for the parser's
			// line numbers.
			sum.lines++
			sum.invalid++
			sum.problem("line %d: longer than %d bytes; skipped", lr.line, maxLineBytes)
			chunk = append(chunk, '\n')
		} else {
			chunk = append(chunk, line...)
			chunk = append(chunk, '\n')
		}
		if len(chunk) >= lpChunkBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
}

// readCSV parses CSV input (format in csvFormat) and adds the points to w.
func readCSV(ctx context.Context, lr *lineReader, w *tributary.Writer, sum *writeSummary, f *csvFormat) error {
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		line, tooLong, err := lr.next()
		if err == io.EOF {
			if f.cols == nil {
				return fmt.Errorf("%w: the input has no CSV header line", errUsage)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if tooLong {
			if f.cols == nil {
				return fmt.Errorf("%w: line %d: the header is longer than %d bytes", errUsage, lr.line, maxLineBytes)
			}
			sum.lines++
			sum.invalid++
			sum.problem("line %d: longer than %d bytes; skipped", lr.line, maxLineBytes)
			continue
		}
		if skippable(line) {
			continue
		}
		if f.cols == nil {
			if err := f.header(line); err != nil {
				return fmt.Errorf("%w: line %d: header: %v", errUsage, lr.line, err)
			}
			continue
		}
		sum.lines++
		ls, ts, v, err := f.record(line, time.Now)
		if err != nil {
			sum.invalid++
			sum.problem("line %d: %v", lr.line, err)
			continue
		}
		if err := w.Add(ctx, ls, ts, v); err != nil {
			if errors.Is(err, tributary.ErrInvalidSeries) {
				sum.invalid++
				sum.problem("line %d: %v", lr.line, err)
				continue
			}
			return err
		}
	}
}

// csvFormat reads the CSV input format:
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
//     the --precision unit (integer, or decimal such as 1714564800.25).
//     Empty, or no timestamp column: the time the line is read.
//   - An empty label cell means the series has no such label. A "db"
//     column wins over --db.
type csvFormat struct {
	prec influx.Precision
	db   string

	cols              []string // label name per column, "" for the reserved ones
	metric, ts, value int      // column index, -1 when absent
	dbCol             bool
	fields            []string
	labels            tributary.Labels
}

func (f *csvFormat) header(line []byte) error {
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
func (f *csvFormat) record(line []byte, now func() time.Time) (tributary.Labels, int64, float64, error) {
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
	f.labels = append(f.labels[:0], tributary.Label{Name: labels.MetricName, Value: metric})
	for i, n := range f.cols {
		if n != "" && f.fields[i] != "" {
			f.labels = append(f.labels, tributary.Label{Name: n, Value: f.fields[i]})
		}
	}
	if f.db != "" && !(f.dbCol && f.labels.Get("db") != "") {
		f.labels = append(f.labels, tributary.Label{Name: "db", Value: f.db})
	}
	return f.labels, ts, v, nil
}

// msPerUnit is the length of one precision unit in milliseconds.
var msPerUnit = map[influx.Precision]float64{
	influx.Nanosecond: 1e-6, influx.Microsecond: 1e-3, influx.Millisecond: 1,
	influx.Second: 1e3, influx.Minute: 6e4, influx.Hour: 3.6e6,
}

func (f *csvFormat) timestamp(s string) (int64, error) {
	if isDigits(strings.TrimPrefix(s, "-")) {
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

// writeSummary collects what the summary reports. problem and rejected
// are called from the Writer's goroutine too.
type writeSummary struct {
	lines, invalid int64 // read by the reading goroutine only

	mu       sync.Mutex
	problems []string
	unlisted int64 // problems beyond the listed ones
}

func (s *writeSummary) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.problems) < maxProblems {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
		return
	}
	s.unlisted++
}

func (s *writeSummary) rejected(r tributary.Rejection) {
	s.problem("rejected %s", r)
}

func (s *writeSummary) print(w io.Writer, st tributary.WriterStats, elapsed time.Duration, bytes int64, readInterrupted, interrupted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case readInterrupted:
		fmt.Fprintln(w, "interrupted: the input was not read to its end")
	case interrupted:
		fmt.Fprintln(w, "interrupted while sending the last points")
	}
	fmt.Fprintf(w, "lines:    %s read, %s refused\n", commas(s.lines), commas(s.invalid))
	fmt.Fprintf(w, "points:   %s accepted, %s rejected by the server, %s not delivered\n", commas(st.Accepted), commas(st.Rejected), commas(st.Failed))
	rate := 0.0
	if elapsed > 0 {
		rate = float64(st.Accepted) / elapsed.Seconds()
	}
	fmt.Fprintf(w, "elapsed:  %s (%s points/s, %s read", elapsed.Round(time.Millisecond), commas(int64(rate)), fmtBytes(bytes))
	if st.Retries > 0 {
		fmt.Fprintf(w, ", %d requests retried", st.Retries)
	}
	fmt.Fprintln(w, ")")
	if len(s.problems) > 0 {
		fmt.Fprintln(w, "problems:")
		for _, p := range s.problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
		if more := s.unlisted + max(st.Rejected-int64(s.rejectedListed()), 0); more > 0 {
			fmt.Fprintf(w, "  ... and more not listed\n")
		}
	}
}

// rejectedListed counts the listed problems that are server rejections.
// REQUIRES: s.mu held.
func (s *writeSummary) rejectedListed() int {
	n := 0
	for _, p := range s.problems {
		if strings.HasPrefix(p, "rejected ") {
			n++
		}
	}
	return n
}

// commas formats n with thousands separators.
func commas(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progress draws a progress line on stderr while the input is read: on a
// terminal redrawn in place every 250 ms (starting after 500 ms, so small
// inputs show nothing), elsewhere one line a second.
type progress struct {
	w      io.Writer
	tty    bool
	size   int64
	read   *atomic.Int64
	points func() int64
	start  time.Time
	quit   chan struct{}
	done   chan struct{}
	drawn  bool
}

func startProgress(w io.Writer, tty bool, size int64, read *atomic.Int64, points func() int64, start time.Time) *progress {
	p := &progress{w: w, tty: tty, size: size, read: read, points: points, start: start, quit: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *progress) run() {
	defer close(p.done)
	every, first := time.Second, time.Second
	if p.tty {
		every, first = 250*time.Millisecond, 500*time.Millisecond
	}
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
			p.draw()
			t.Reset(every)
		}
	}
}

func (p *progress) draw() {
	p.drawn = true
	elapsed := time.Since(p.start).Seconds()
	read, pts := p.read.Load(), p.points()
	rate := 0.0
	if elapsed > 0 {
		rate = float64(pts) / elapsed
	}
	var line string
	if p.size > 0 {
		frac := min(float64(read)/float64(p.size), 1)
		const width = 30
		full := int(frac * width)
		line = fmt.Sprintf("[%s%s] %3.0f%%  %s / %s  %s points  %s points/s",
			strings.Repeat("#", full), strings.Repeat(".", width-full), frac*100,
			fmtBytes(read), fmtBytes(p.size), commas(pts), commas(int64(rate)))
	} else {
		line = fmt.Sprintf("%s read  %s points  %s points/s", fmtBytes(read), commas(pts), commas(int64(rate)))
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}

// stop ends the progress display: a terminal line is cleared; elsewhere a
// last line is printed.
func (p *progress) stop() {
	close(p.quit)
	<-p.done
	switch {
	case p.tty && p.drawn:
		fmt.Fprint(p.w, "\r\033[K")
	case !p.tty:
		p.draw()
	}
}
