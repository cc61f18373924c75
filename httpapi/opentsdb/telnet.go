package opentsdb

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// Draining on Shutdown: read until the client pauses for drainIdle, for
// at most drainMax.
const (
	drainIdle = 100 * time.Millisecond
	drainMax  = time.Second
)

// ErrServerClosed is returned by TelnetServer.Serve after Shutdown or
// Close.
var ErrServerClosed = errors.New("opentsdb: telnet server closed")

// TelnetOptions configure a TelnetServer. Zero fields take the defaults
// given with each.
type TelnetOptions struct {
	// MaxLineBytes bounds one line; a longer line is answered with an
	// error and skipped, and the connection stays open. Default 64 KiB.
	MaxLineBytes int
	// MaxConns bounds concurrent connections; one more is told so and
	// closed. Default 256.
	MaxConns int
	// IdleTimeout closes a connection that sends nothing for this long.
	// Default 5 minutes.
	IdleTimeout time.Duration
	// FlushPoints and FlushInterval bound how many parsed points a
	// connection holds before writing them to the backend in one batch,
	// and for how long. Defaults 5,000 points and 200 ms.
	FlushPoints   int
	FlushInterval time.Duration
	// WriteTimeout bounds writing a reply line; a client that does not
	// read its error lines is disconnected. Default 10 s.
	WriteTimeout time.Duration
	// Authenticate, when set, makes a connection send "auth <token>"
	// before anything but version, help and exit; a wrong token closes
	// the connection. Standard OpenTSDB senders do not do this: leave it
	// nil for them (and keep the listener on a trusted network).
	Authenticate func(token string) bool
	Logger       *slog.Logger
}

// Defaults for TelnetOptions.
const (
	DefaultTelnetMaxLineBytes  = 64 << 10
	DefaultTelnetMaxConns      = 256
	DefaultTelnetIdleTimeout   = 5 * time.Minute
	DefaultTelnetFlushPoints   = 5000
	DefaultTelnetFlushInterval = 200 * time.Millisecond
	DefaultTelnetWriteTimeout  = 10 * time.Second
)

// Validate fills defaults and rejects impossible values.
func (o *TelnetOptions) Validate() error {
	switch {
	case o.MaxLineBytes < 0, o.MaxConns < 0, o.FlushPoints < 0:
		return fmt.Errorf("opentsdb telnet options: MaxLineBytes %d, MaxConns %d and FlushPoints %d must not be negative", o.MaxLineBytes, o.MaxConns, o.FlushPoints)
	case o.IdleTimeout < 0, o.FlushInterval < 0, o.WriteTimeout < 0:
		return fmt.Errorf("opentsdb telnet options: IdleTimeout %s, FlushInterval %s and WriteTimeout %s must not be negative", o.IdleTimeout, o.FlushInterval, o.WriteTimeout)
	case o.MaxLineBytes > 0 && o.MaxLineBytes < 256:
		return fmt.Errorf("opentsdb telnet options: MaxLineBytes %d is below 256", o.MaxLineBytes)
	}
	o.MaxLineBytes = cmp.Or(o.MaxLineBytes, DefaultTelnetMaxLineBytes)
	o.MaxConns = cmp.Or(o.MaxConns, DefaultTelnetMaxConns)
	o.IdleTimeout = cmp.Or(o.IdleTimeout, DefaultTelnetIdleTimeout)
	o.FlushPoints = cmp.Or(o.FlushPoints, DefaultTelnetFlushPoints)
	o.FlushInterval = cmp.Or(o.FlushInterval, DefaultTelnetFlushInterval)
	o.WriteTimeout = cmp.Or(o.WriteTimeout, DefaultTelnetWriteTimeout)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// TelnetServer accepts OpenTSDB's line protocol ("put <metric>
// <timestamp> <value> <tagk=tagv> ...") on TCP connections. Its methods
// are safe for concurrent use; Serve may be called on several listeners.
type TelnetServer struct {
	b    backend.Backend
	cfg  *httpapi.Config
	opts TelnetOptions
	// maxTags bounds the tags of a put line: the label limit less the
	// metric name (0: no limit).
	maxTags int

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*telnetConn]struct{}
	closing   atomic.Bool
	done      chan struct{} // closed when handlers must give up retries
	stopOnce  sync.Once
	wg        sync.WaitGroup
}

// NewTelnetServer returns a server writing to b and counting into
// cfg.Stats; a write the backend keeps refusing as overloaded is retried
// for up to cfg.Limits.RequestTimeout. cfg is not modified (it may be in
// use by running HTTP handlers): defaults apply to a copy.
func NewTelnetServer(b backend.Backend, cfg *httpapi.Config, opts TelnetOptions) (*TelnetServer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	c := *cfg
	c.Normalize()
	return &TelnetServer{b: b, cfg: &c, opts: opts, maxTags: maxTags(c.Limits.Labels), listeners: map[net.Listener]struct{}{},
		conns: map[*telnetConn]struct{}{}, done: make(chan struct{})}, nil
}

// Serve accepts connections on l until Shutdown or Close, and then returns
// ErrServerClosed. It closes l when it returns.
func (s *TelnetServer) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
		l.Close()
	}()
	var delay time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors and the like: back off and retry.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.opts.Logger.Warn("opentsdb telnet: accept failed; retrying", "err", err, "delay", delay)
			t := time.NewTimer(delay)
			select {
			case <-t.C:
			case <-s.done:
				t.Stop()
			}
			continue
		}
		delay = 0
		s.start(c)
	}
}

// start registers and serves c, or refuses it when at the connection limit.
func (s *TelnetServer) start(c net.Conn) {
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		c.Close()
		return
	}
	if len(s.conns) >= s.opts.MaxConns {
		s.mu.Unlock()
		s.cfg.Stats.Inc(httpapi.ViolationOverloaded)
		s.cfg.Stats.Inc("opentsdb_telnet_connections_refused")
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		fmt.Fprintf(c, "put: too many connections (limit %d); try again later\n", s.opts.MaxConns)
		c.Close()
		return
	}
	tc := &telnetConn{s: s, c: c, out: bufio.NewWriterSize(c, 4096)}
	s.conns[tc] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.cfg.Stats.Inc("opentsdb_telnet_connections")
	go tc.serve()
}

// Shutdown stops accepting and waits for every connection to finish: each
// keeps reading while its client keeps sending (until a pause of 100 ms,
// for at most 1 s), handles the complete lines it has, writes their points
// to the backend and closes. A partial last line is dropped. When ctx ends
// first, connections are closed at once (points already parsed are still
// written, without retries) and ctx's error returned.
func (s *TelnetServer) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.mu.Lock()
	for l := range s.listeners {
		l.Close()
	}
	for tc := range s.conns {
		// Wake a blocked read; the handler then sees closing.
		_ = tc.c.SetReadDeadline(time.Now())
	}
	s.mu.Unlock()
	finished := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(finished)
	}()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		s.stop()
		<-finished
		return ctx.Err()
	}
}

// Close closes the listeners and every connection, and waits for the
// handlers (each writes the points it has parsed, without retries).
func (s *TelnetServer) Close() error {
	s.closing.Store(true)
	s.mu.Lock()
	for l := range s.listeners {
		l.Close()
	}
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	return nil
}

func (s *TelnetServer) stop() {
	s.stopOnce.Do(func() { close(s.done) })
	s.mu.Lock()
	for tc := range s.conns {
		tc.c.Close()
	}
	s.mu.Unlock()
}

// write stores batches, retrying while the backend is overloaded or
// unavailable (telnet has no way to ask the sender to retry), for up to
// the request timeout or until the server is closed.
func (s *TelnetServer) write(batches []model.Batch) (model.WriteResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Limits.RequestTimeout)
	defer cancel()
	delay := 50 * time.Millisecond
	for {
		res, err := s.b.Write(ctx, batches)
		if k := backend.Classify(err); err == nil || (k != backend.KindOverloaded && k != backend.KindUnavailable) {
			return res, err
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return res, err
		case <-s.done:
			t.Stop()
			return res, err
		}
		delay = min(2*delay, time.Second)
	}
}

// telnetConn is one connection; only its own goroutine uses it (Shutdown
// and Close only touch c, which is safe for concurrent use).
type telnetConn struct {
	s    *TelnetServer
	c    net.Conn
	out  *bufio.Writer
	b    batcher
	line int64 // lines read so far
	// uncounted lines are added to the stats at the next flush (one lock
	// per batch rather than per line).
	uncounted int64
	first     time.Time
	authed    bool
	broken    bool // a reply could not be written
	fields    []string
	tags      []labels.Label
}

func (tc *telnetConn) serve() {
	s := tc.s
	defer func() {
		tc.flush()
		tc.flushOut()
		tc.c.Close()
		s.mu.Lock()
		delete(s.conns, tc)
		s.mu.Unlock()
		s.wg.Done()
	}()
	opts := &s.opts
	buf := make([]byte, opts.MaxLineBytes+1) // a line and its '\n'
	r, w := 0, 0                             // unread bytes are buf[r:w]
	discard := false                         // skipping the rest of a too-long line
	eof := false
	draining, drained := false, false // Shutdown was called; the client paused since
	var drainEnd time.Time
	lastRead := time.Now()
	for {
		for {
			i := bytes.IndexByte(buf[r:w], '\n')
			if i < 0 {
				break
			}
			line := buf[r : r+i]
			r += i + 1
			if discard {
				discard = false
				continue
			}
			if !tc.handle(line) || tc.broken {
				return
			}
		}
		if eof || drained {
			if eof && r < w && !discard {
				tc.handle(buf[r:w])
			}
			return
		}
		switch {
		case r == w:
			r, w = 0, 0
		case w == len(buf) && r > 0:
			w = copy(buf, buf[r:w])
			r = 0
		case w == len(buf) && discard:
			r, w = 0, 0 // more of the same too-long line
		case w == len(buf):
			tc.line++
			tc.reply("put: illegal argument: line %d is longer than %d bytes; skipped", tc.line, opts.MaxLineBytes)
			tc.rejected(1)
			discard = true
			r, w = 0, 0
		}
		if tc.b.points > 0 && time.Since(tc.first) >= opts.FlushInterval {
			tc.flush()
		}
		if !tc.flushOut() {
			return
		}
		if s.closing.Load() && !draining {
			// Shutdown: read on while the client keeps sending, then stop.
			draining, drainEnd = true, time.Now().Add(drainMax)
		}
		deadline := lastRead.Add(opts.IdleTimeout)
		switch {
		case draining:
			deadline = time.Now().Add(drainIdle)
			if deadline.After(drainEnd) {
				deadline = drainEnd
			}
		case tc.b.points > 0:
			deadline = tc.first.Add(opts.FlushInterval)
		}
		_ = tc.c.SetReadDeadline(deadline)
		if s.closing.Load() && !draining {
			// Shutdown may have set its wake-up deadline before ours.
			continue
		}
		n, err := tc.c.Read(buf[w:])
		if n > 0 {
			w += n
			lastRead = time.Now()
		}
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout():
			if draining && n == 0 {
				drained = true // the client paused: finish the complete lines
				continue
			}
			if tc.b.points == 0 && !s.closing.Load() && !time.Now().Before(lastRead.Add(opts.IdleTimeout)) {
				s.cfg.Stats.Inc("opentsdb_telnet_idle_closed")
				return
			}
		default:
			eof = true // EOF, reset: a final line without '\n' still counts
		}
	}
}

// handle runs one line; it returns false to close the connection.
func (tc *telnetConn) handle(line []byte) bool {
	tc.line++
	tc.uncounted++
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	// Only the fields a valid put can have are kept; the others are
	// counted, so that a line of many tags costs no more than a valid one.
	keep := -1
	if tc.s.maxTags > 0 {
		keep = putFields + tc.s.maxTags
	}
	var nf int
	tc.fields, nf = splitFields(string(line), tc.fields[:0], keep)
	f := tc.fields
	if len(f) == 0 {
		return true
	}
	needAuth := tc.s.opts.Authenticate != nil && !tc.authed
	switch f[0] {
	case "put":
		if needAuth {
			tc.reply("put: authentication required: send 'auth <token>' first")
			tc.rejected(1)
			return true
		}
		metric, tags, tMs, v, err := parsePut(f[1:], nf-1, tc.s.maxTags, tc.tags[:0])
		tc.tags = tags
		if err == nil {
			err = tc.b.add(metric, tags, tMs, v, tc.line)
		}
		if err != nil {
			tc.reply("put: illegal argument: line %d: %v", tc.line, err)
			tc.rejected(1)
			return true
		}
		if tc.b.points == 1 {
			tc.first = time.Now()
		}
		if tc.b.points >= tc.s.opts.FlushPoints || tc.b.labelBytes >= telnetFlushLabelBytes {
			tc.flush()
		}
	case "auth":
		if tc.s.opts.Authenticate == nil {
			return true
		}
		if len(f) != 2 || !tc.s.opts.Authenticate(f[1]) {
			tc.s.cfg.Stats.Inc(httpapi.ViolationUnauthorized)
			tc.reply("auth: the token is not valid; closing")
			return false
		}
		tc.authed = true
	case "version":
		tc.reply("tributary: OpenTSDB %s compatible telnet API", Version)
	case "help":
		tc.reply("available commands: put <metric> <timestamp> <value> <tagk=tagv> ..., version, stats, help, exit")
	case "exit":
		return false
	case "stats":
		if needAuth {
			tc.reply("stats: authentication required: send 'auth <token>' first")
			return true
		}
		now := time.Now().Unix()
		for _, nc := range tc.s.cfg.Stats.Snapshot() {
			tc.reply("tributary.%s %d %d", nc.Name, now, nc.Count)
		}
	default:
		tc.reply("unknown command: %.64q; try help", f[0])
	}
	return true
}

// putFields is the number of fields of a put line before its tags:
// put, metric, timestamp and value.
const putFields = 4

// telnetFlushLabelBytes bounds the label bytes of the new series a
// connection holds before it writes them (as FlushPoints bounds points).
const telnetFlushLabelBytes = 1 << 20

// errPutArgs are the errors of put lines of 0, 1 and 2 arguments, made
// once: a stream of bare "put" lines costs no formatting.
var errPutArgs = func() (errs [3]error) {
	for n := range errs {
		errs[n] = fmt.Errorf("not enough arguments (need at least 3, got %d): want put <metric> <timestamp> <value> [<tagk=tagv> ...]", n)
	}
	return errs
}()

// splitFields splits s at runs of spaces and tabs into dst, keeping at
// most keep fields (all when keep < 0). It returns dst and the number of
// fields s has.
func splitFields(s string, dst []string, keep int) ([]string, int) {
	n := 0
	for i := 0; i < len(s); {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
			i++
		}
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '\t' {
			j++
		}
		if j > i {
			if keep < 0 || n < keep {
				dst = append(dst, s[i:j])
			}
			n++
		}
		i = j
	}
	return dst, n
}

// parsePut parses the arguments of a put line: <metric> <timestamp>
// <value> [<tagk=tagv> ...]. The line has n arguments, of which f holds
// the first; more than maxTags tags (0: no limit) refuse the line before
// any tag is parsed. tags is scratch space the result may alias.
func parsePut(f []string, n, maxTags int, tags []labels.Label) (metric string, _ []labels.Label, tMs int64, v float64, err error) {
	if n < 3 {
		return "", tags, 0, 0, errPutArgs[n]
	}
	if maxTags > 0 && n-3 > maxTags {
		return "", tags, 0, 0, tooManyTags(n-3, maxTags)
	}
	if len(f) < n {
		return "", tags, 0, 0, fmt.Errorf("BUG: put line of %d arguments split into %d", n, len(f))
	}
	if err := checkName("metric name", f[0]); err != nil {
		return "", tags, 0, 0, err
	}
	if tMs, err = parseTimestamp(f[1]); err != nil {
		return "", tags, 0, 0, err
	}
	if v, err = parseValue(f[2]); err != nil {
		return "", tags, 0, 0, err
	}
	for _, kv := range f[3:] {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || k == "" || val == "" {
			return "", tags, 0, 0, fmt.Errorf("invalid tag %.64q: want tagk=tagv", kv)
		}
		l, err := tagLabel(k, val)
		if err != nil {
			return "", tags, 0, 0, err
		}
		tags = append(tags, l)
	}
	return f[0], tags, tMs, v, nil
}

// reply queues one line to the client; a client that does not read its
// replies within WriteTimeout is disconnected.
func (tc *telnetConn) reply(format string, a ...any) {
	if tc.broken {
		return
	}
	_ = tc.c.SetWriteDeadline(time.Now().Add(tc.s.opts.WriteTimeout))
	fmt.Fprintf(tc.out, format, a...)
	if err := tc.out.WriteByte('\n'); err != nil {
		tc.broken = true
	}
}

func (tc *telnetConn) flushOut() bool {
	if tc.broken {
		return false
	}
	if tc.out.Buffered() == 0 {
		return true
	}
	_ = tc.c.SetWriteDeadline(time.Now().Add(tc.s.opts.WriteTimeout))
	if err := tc.out.Flush(); err != nil {
		tc.broken = true
		return false
	}
	return true
}

func (tc *telnetConn) rejected(n int64) {
	st := tc.s.cfg.Stats
	st.Add("opentsdb_points_rejected", n)
	st.Add(httpapi.ViolationRejectedPoints, n)
}

// flush writes the pending points to the backend in one batch and replies
// with an error line for each point (or series) it refused.
func (tc *telnetConn) flush() {
	tc.s.cfg.Stats.Add("opentsdb_telnet_lines", tc.uncounted)
	tc.uncounted = 0
	if tc.b.points == 0 {
		return
	}
	n := int64(tc.b.points)
	batches, origin := tc.b.take()
	res, err := tc.s.write(batches)
	st := tc.s.cfg.Stats
	if err != nil {
		httpapi.CountError(st, err)
		tc.rejected(n)
		tc.s.opts.Logger.Warn("opentsdb telnet: write failed; points dropped", "points", n, "remote", tc.c.RemoteAddr().String(), "err", err)
		tc.reply("put: unable to store %d data points: %v", n, err)
		return
	}
	st.Add("opentsdb_points_accepted", res.Accepted)
	tc.rejected(res.Rejected)
	for _, rj := range mapRejections(res, origin) {
		switch len(rj.origins) {
		case 0:
			tc.reply("put: illegal argument: %s", rj.msg)
		case 1:
			tc.reply("put: illegal argument: line %d: %s", rj.origins[0], rj.msg)
		default:
			tc.reply("put: illegal argument: lines %s: %s", lineList(rj.origins), rj.msg)
		}
	}
}

// lineList renders line numbers, eliding after a few.
func lineList(lines []int64) string {
	var b strings.Builder
	for i, l := range lines {
		if i == 5 {
			fmt.Fprintf(&b, " and %d more", len(lines)-5)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.FormatInt(l, 10))
	}
	return b.String()
}
