package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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

	"github.com/tributarydb/tributary/httpapi/csv"
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
	fs, cf := newClientFlagSet("write", stderr, "give up on one write request after this long (the whole input has no time limit)",
		"Usage: tributary write [flags] [FILE|-]\n\nReads points from FILE (or standard input) and writes them to a server, then prints a summary.\nExits with status 1 when any point was not stored.")
	format := fs.String("format", "lp", "input format: lp (InfluxDB line protocol) or csv (header metric,timestamp,value,<label>...; see docs/sdk-go.md)")
	precision := fs.String("precision", "", "unit of numeric timestamps: ns, us, ms or s (default: ns for lp, ms for csv)")
	db := fs.String("db", "", "add the label db=NAME to every point, as the InfluxDB write API's db parameter does (a db tag or column of the input wins)")
	batchPoints := fs.Int("batch-points", tributary.DefaultMaxBatchPoints, "points per write request")
	progressMode := fs.String("progress", "auto", "progress on stderr: auto (when stderr is a terminal), always or never")
	file, err := parseOperand(fs, args, false, "input file")
	if err != nil {
		return err
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

	in, err := openInput(file)
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
	if *format == "csv" {
		err = readCSV(ctx, r, w, sum, prec, *db)
	} else {
		err = readLineProtocol(ctx, r, w, sum, prec, *db)
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

// readLineProtocol reads line protocol a chunk of lines at a time
// (influx.ChunkReader) and adds the points to w.
func readLineProtocol(ctx context.Context, r io.Reader, w *tributary.Writer, sum *writeSummary, prec influx.Precision, db string) error {
	cr, err := influx.NewChunkReader(r, influx.ChunkOptions{Precision: prec, DB: db, MaxLineBytes: maxLineBytes, ChunkBytes: lpChunkBytes})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var ls tributary.Labels
	for {
		ch, err := cr.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		for _, line := range ch.TooLong {
			sum.lines++
			sum.invalid++
			sum.problem("line %d: longer than %d bytes; skipped", line, maxLineBytes)
		}
		sum.lines += int64(ch.Lines)
		sum.invalid += int64(ch.RejectedLines)
		sum.stringsSkipped += int64(ch.SkippedStringFields)
		for _, e := range ch.Errors {
			sum.problem("%v", e)
		}
		sum.unlisted += int64(ch.RejectedLines - len(ch.Errors))
		for _, b := range ch.Batches {
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
	}
}

// readCSV reads CSV (httpapi/csv) and adds the points to w.
func readCSV(ctx context.Context, r io.Reader, w *tributary.Writer, sum *writeSummary, prec influx.Precision, db string) error {
	cr, err := csv.NewReader(r, csv.Options{Precision: prec, DB: db, MaxLineBytes: maxLineBytes})
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var ls tributary.Labels
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p, err := cr.Next()
		var lineErr *csv.LineError
		var headerErr *csv.HeaderError
		switch {
		case err == io.EOF:
			return nil
		case errors.As(err, &headerErr):
			return fmt.Errorf("%w: %v", errUsage, err)
		case errors.As(err, &lineErr):
			sum.lines++
			sum.invalid++
			sum.problem("%v", err)
			continue
		case err != nil:
			return err
		}
		sum.lines++
		ls = ls[:0]
		for _, l := range p.Labels {
			ls = append(ls, tributary.Label{Name: l.Name, Value: l.Value})
		}
		if err := w.Add(ctx, ls, p.TimestampMs, p.Value); err != nil {
			if errors.Is(err, tributary.ErrInvalidSeries) {
				sum.invalid++
				sum.problem("line %d: %v", p.Line, err)
				continue
			}
			return err
		}
	}
}

// writeSummary collects what the summary reports. problem and rejected
// are called from the Writer's goroutine too.
type writeSummary struct {
	lines, invalid int64 // read by the reading goroutine only
	stringsSkipped int64 // string fields of line protocol, not stored

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
	if s.stringsSkipped > 0 {
		fmt.Fprintf(w, "fields:   %s string fields skipped (numbers only are stored)\n", commas(s.stringsSkipped))
	}
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
