package influx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
)

// wideLine returns "<measurement> f0=1,f1=1,...": one line of n fields.
func wideLine(measurement string, n int) string {
	var b strings.Builder
	b.WriteString(measurement)
	b.WriteByte(' ')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "f%d=1", i)
	}
	return b.String()
}

// firstError returns the first entry of the errors list of a partial
// write answer.
func firstError(t *testing.T, ans map[string]any) (line, column int, msg string) {
	t.Helper()
	errs, _ := ans["errors"].([]any)
	if len(errs) == 0 {
		t.Fatalf("no errors listed: %v", ans)
	}
	e := errs[0].(map[string]any)
	col, _ := e["column"].(float64)
	return int(e["line"].(float64)), int(col), e["message"].(string)
}

// TestWrite_LineWithTooManyFieldsIsRefusedAlone: a line over the fields
// limit is a bad line (400, partial write); the lines around it are
// stored, and the error names the line, the column of the first field
// past the limit, and the limit.
func TestWrite_LineWithTooManyFieldsIsRefusedAlone(t *testing.T) {
	s := newTestServer(t, httpapi.Limits{})
	wide := wideLine("wide", httpapi.DefaultMaxFieldsPerLine+1)
	body := "before v=1\n" + wide + "\nafter v=2\n"
	status, ans, _ := s.post(t, "/write?db=d", []byte(body))
	if status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %v", status, ans)
	}
	if ans["accepted"].(float64) != 2 || ans["rejected"].(float64) != float64(httpapi.DefaultMaxFieldsPerLine+1) {
		t.Fatalf("accepted %v rejected %v, want 2 and %d", ans["accepted"], ans["rejected"], httpapi.DefaultMaxFieldsPerLine+1)
	}
	line, col, msg := firstError(t, ans)
	wantCol := strings.Index(wide, fmt.Sprintf(",f%d=", httpapi.DefaultMaxFieldsPerLine)) + 2
	if line != 2 || col != wantCol || !strings.Contains(msg, fmt.Sprintf("at most %d fields", httpapi.DefaultMaxFieldsPerLine)) {
		t.Fatalf("error line %d column %d %q, want line 2 column %d naming the limit", line, col, msg, wantCol)
	}
	if got := dump(t, s.node, "(before|after|wide)_.*"); strings.Contains(got, "wide") || strings.Count(got, "\n") != 2 {
		t.Fatalf("stored:\n%s", got)
	}
}

// TestWrite_LineLongerThanTheLimitIsSkipped: a line over the length limit
// is refused on its own (the lines around it are stored), even when its
// content would be valid.
func TestWrite_LineLongerThanTheLimitIsSkipped(t *testing.T) {
	s := newTestServer(t, httpapi.Limits{})
	// 1,000 fields with 300-byte keys: valid, but over 256 KiB.
	var b strings.Builder
	b.WriteString("long ")
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s%04d=1", strings.Repeat("k", 296), i)
	}
	long := b.String()
	if len(long) <= httpapi.DefaultMaxLineBytes {
		t.Fatalf("test line is only %d bytes", len(long))
	}
	body := "before v=1\n" + long + "\n# a comment longer than the limit is still only a comment " + strings.Repeat("#", httpapi.DefaultMaxLineBytes) + "\nafter v=2\n"
	status, ans, _ := s.post(t, "/write?db=d", []byte(body))
	if status != http.StatusBadRequest {
		t.Fatalf("status %d, want 400: %v", status, ans)
	}
	line, col, msg := firstError(t, ans)
	if line != 2 || col != httpapi.DefaultMaxLineBytes+1 || !strings.Contains(msg, fmt.Sprintf("%d bytes", len(long))) ||
		!strings.Contains(msg, fmt.Sprintf("limit is %d bytes", httpapi.DefaultMaxLineBytes)) {
		t.Fatalf("error line %d column %d %q", line, col, msg)
	}
	if ans["accepted"].(float64) != 2 || ans["rejected_lines"].(float64) != 1 {
		t.Fatalf("answer %v", ans)
	}
	if got := dump(t, s.node, "(before|after|long)_.*"); strings.Contains(got, "long") || strings.Count(got, "\n") != 2 {
		t.Fatalf("stored:\n%s", got)
	}
}

// TestWrite_TooManySeriesInOneRequestIs413: a request with more distinct
// series than the limit is refused whole with 413 (clients split the
// batch), and nothing of it is stored.
func TestWrite_TooManySeriesInOneRequestIs413(t *testing.T) {
	s := newTestServer(t, httpapi.Limits{})
	var b strings.Builder
	for i := range httpapi.DefaultMaxSeriesPerRequest + 1 {
		fmt.Fprintf(&b, "many,h=%d v=1\n", i)
	}
	status, ans, _ := s.post(t, "/write?db=d", []byte(b.String()))
	msg, _ := ans["message"].(string)
	want := fmt.Sprintf("line %d, column 1: ", httpapi.DefaultMaxSeriesPerRequest+1)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(msg, want) ||
		!strings.Contains(msg, fmt.Sprintf("more than %d series", httpapi.DefaultMaxSeriesPerRequest)) {
		t.Fatalf("status %d %q, want 413 with %q and the limit", status, msg, want)
	}
	if got := dump(t, s.node, "many_.*"); got != "" {
		t.Fatalf("stored %d series of a refused request", strings.Count(got, "\n"))
	}
	if got := s.cfg.Stats.Get(httpapi.ViolationTooManySeries); got != 1 {
		t.Fatalf("too_many_series violations %d, want 1", got)
	}
}

// TestWrite_PointsLimitIsCheckedWhileParsingALine: the points limit stops
// the parse at the first point past it, inside a line, and names where.
func TestWrite_PointsLimitIsCheckedWhileParsingALine(t *testing.T) {
	s := newTestServer(t, httpapi.Limits{MaxPointsPerRequest: 100})
	wide := wideLine("pts", 500)
	status, ans, _ := s.post(t, "/write?db=d", []byte("first v=1\n"+wide+"\n"))
	msg, _ := ans["message"].(string)
	// Point 101 is the field f99 of line 2 (line 1 holds one point).
	want := fmt.Sprintf("line 2, column %d: ", strings.Index(wide, ",f99=")+2)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(msg, want) || !strings.Contains(msg, "more than 100 points") {
		t.Fatalf("status %d %q, want 413 with %q", status, msg, want)
	}
	if got := dump(t, s.node, "(first|pts)_.*"); got != "" {
		t.Fatalf("stored:\n%s", got)
	}
}

// countingBackend accepts every write without storing it.
type countingBackend struct {
	backend.Backend
	points atomic.Int64
}

func (c *countingBackend) Write(_ context.Context, batches []model.Batch) (model.WriteResult, error) {
	var n int64
	for _, b := range batches {
		n += int64(len(b.Ts))
	}
	c.points.Add(n)
	return model.WriteResult{Accepted: n}, nil
}

// wideBody streams one line of line protocol with n distinct fields
// ("m a000000=1,a000001=1,...") without holding it in memory, and without
// allocating, so that the heap measured is the server's.
type wideBody struct {
	n, i int
	buf  [16]byte
	pend []byte
}

func (w *wideBody) Read(p []byte) (int, error) {
	out := 0
	for out < len(p) {
		if len(w.pend) == 0 {
			b := w.buf[:0]
			switch {
			case w.i == 0:
				b = append(b, "m "...)
			case w.i > w.n+1:
				if out == 0 {
					return 0, io.EOF
				}
				return out, nil
			case w.i == w.n+1:
				b = append(b, '\n')
			default:
				b = append(b, 'a')
				var digits [8]byte
				s := strconv.AppendInt(digits[:0], int64(w.i-1), 36)
				for range 6 - len(s) {
					b = append(b, '0')
				}
				b = append(b, s...)
				b = append(b, "=1"...)
				if w.i < w.n {
					b = append(b, ',')
				}
			}
			w.pend = b
			w.i++
		}
		k := copy(p[out:], w.pend)
		w.pend = w.pend[k:]
		out += k
	}
	return out, nil
}

// wideBodyLen is the length of a wideBody of n fields.
func wideBodyLen(n int) int64 { return int64(2 + 10*n) }

// heapPeak samples the heap in use until stop is closed and returns the
// highest value seen.
func heapPeak(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				out <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

// Hostile wide lines: the case of 20 concurrent requests, each
// one 20 MB line of 2,000,000 fields, with a valid token (no auth here).
const (
	hostileRequests = 20
	hostileFields   = 2_000_000
	// hostileHeapBound is what the HTTP layer may hold for all of them at
	// once, above the heap in use before.
	hostileHeapBound = 32 << 20
)

// TestWrite_ConcurrentHostileWideLinesStayWithinAMemoryBound sends the
// hostile requests at once against the default limits (32 MiB bodies are
// allowed, so each 20 MB body is read): each is refused as a bad line
// with 400, and neither the peak heap in use nor the bytes allocated per
// request grow with the body.
func TestWrite_ConcurrentHostileWideLinesStayWithinAMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 400 MB")
	}
	cb := &countingBackend{}
	cfg := &httpapi.Config{}
	mux := http.NewServeMux()
	Register(mux, cb, cfg)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	if cfg.Limits.MaxBodyBytes < wideBodyLen(hostileFields) {
		t.Fatalf("body limit %d refuses the %d-byte body before parsing", cfg.Limits.MaxBodyBytes, wideBodyLen(hostileFields))
	}
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: hostileRequests, MaxIdleConnsPerHost: hostileRequests}}
	defer client.CloseIdleConnections()

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	stop := make(chan struct{})
	peakc := heapPeak(stop)
	var wg sync.WaitGroup
	type answer struct {
		status int
		body   string
	}
	answers := make([]answer, hostileRequests)
	for i := range hostileRequests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/write?db=d", &wideBody{n: hostileFields})
			if err != nil {
				t.Error(err)
				return
			}
			req.ContentLength = wideBodyLen(hostileFields)
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			answers[i] = answer{resp.StatusCode, string(b)}
		}()
	}
	wg.Wait()
	close(stop)
	peak := <-peakc
	var after runtime.MemStats
	runtime.ReadMemStats(&after)

	growth := int64(peak) - int64(before.HeapInuse)
	perRequest := (after.TotalAlloc - before.TotalAlloc) / hostileRequests
	t.Logf("%d requests of %d bytes: peak heap in use %.1f MiB above the %.1f MiB before; %.2f MiB allocated per request",
		hostileRequests, wideBodyLen(hostileFields), float64(growth)/(1<<20), float64(before.HeapInuse)/(1<<20), float64(perRequest)/(1<<20))
	for i, a := range answers {
		if a.status != http.StatusBadRequest || !strings.Contains(a.body, `"line":1,"column":262145`) ||
			!strings.Contains(a.body, "limit is 262144 bytes") {
			t.Errorf("request %d: %d %.300s", i, a.status, a.body)
		}
	}
	if growth > hostileHeapBound {
		t.Errorf("peak heap grew by %.1f MiB, bound %d MiB", float64(growth)/(1<<20), hostileHeapBound>>20)
	}
	if perRequest > 2<<20 {
		t.Errorf("%.1f MiB allocated per request of %.1f MiB", float64(perRequest)/(1<<20), float64(wideBodyLen(hostileFields))/(1<<20))
	}
	if n := cb.points.Load(); n != 0 {
		t.Errorf("%d points of refused lines reached the backend", n)
	}
}

// TestParse_FieldsPerLineLimit: a line of exactly the limit is parsed; one
// more field refuses the line before anything is built for it, counting
// every field as a rejected point and naming the first field past the
// limit. Quoted strings and escapes do not fool the count.
func TestParse_FieldsPerLineLimit(t *testing.T) {
	p := NewParser(Options{MaxFieldsPerLine: 3})
	for _, tc := range []struct {
		name, line string
		col        int // 0: accepted
		fields     int
	}{
		{"at the limit", "m a=1,b=2,c=3", 0, 3},
		{"one more", "m a=1,b=2,c=3,d=4", 15, 4},
		{"many more", "m a=1,b=2,c=3,d=4,e=5,f=6", 15, 6},
		{"commas in a string", `m a=1,s="x,y=1,z=2",c=3,d=4`, 25, 4},
		{"escaped commas in keys", `m a\,b=1,c\,d=2,e=3`, 0, 3},
		{"escaped commas, one more", `m a\,b=1,c\,d=2,e=3,f=4`, 21, 4},
		{"leading blanks shift the column", "  m a=1,b=2,c=3,d=4", 17, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := parse(t, p, "ok v=1 1\n"+tc.line+" 2\n", "", Millisecond)
			if tc.col == 0 {
				if res.RejectedLines != 0 && !strings.Contains(tc.line, `"`) {
					t.Fatalf("refused: %v", res.Errors)
				}
				return
			}
			if len(res.Errors) != 1 || res.Errors[0].Line != 2 || res.Errors[0].Column != tc.col ||
				!strings.Contains(res.Errors[0].Msg, fmt.Sprintf("has %d fields; a line holds at most 3", tc.fields)) {
				t.Fatalf("errors %+v, want line 2 column %d", res.Errors, tc.col)
			}
			if res.RejectedPoints != tc.fields || res.Points != 1 {
				t.Fatalf("rejected points %d, points %d; want %d and 1", res.RejectedPoints, res.Points, tc.fields)
			}
		})
	}
}

// parseBoth parses body with Parse and with ParseReader through r (a
// reader of the same body), and requires the same answer from both.
func parseBoth(t *testing.T, opts Options, body []byte, r io.Reader) *Result {
	t.Helper()
	want, werr := NewParser(opts).Parse(body, "db", Millisecond, 7)
	got, gerr := NewParser(opts).ParseReader(r, "db", Millisecond, 7)
	if fmt.Sprint(werr) != fmt.Sprint(gerr) {
		t.Fatalf("Parse error %v, ParseReader error %v", werr, gerr)
	}
	if werr != nil {
		return nil
	}
	if render(got) != render(want) || fmt.Sprint(got.Errors) != fmt.Sprint(want.Errors) ||
		got.Lines != want.Lines || got.RejectedLines != want.RejectedLines || got.Points != want.Points || got.RejectedPoints != want.RejectedPoints {
		t.Fatalf("ParseReader\n%s%v %d/%d lines %d/%d points\nParse\n%s%v %d/%d lines %d/%d points\nbody %.300q",
			render(got), got.Errors, got.Lines, got.RejectedLines, got.Points, got.RejectedPoints,
			render(want), want.Errors, want.Lines, want.RejectedLines, want.Points, want.RejectedPoints, body)
	}
	return got
}

// TestParse_LineBytesLimit: lines up to the limit (not counting CR LF)
// are parsed, longer ones are refused with their length, and comments
// are skipped whatever their length; Parse and ParseReader agree, and
// ParseReader holds no more than the limit of a line.
func TestParse_LineBytesLimit(t *testing.T) {
	const limit = 300
	opts := Options{MaxLineBytes: limit}
	fill := func(n int) string { // a valid line of exactly n bytes
		return "m,t=" + strings.Repeat("x", n-len("m,t= v=1")) + " v=1"
	}
	body := "ok v=1\n" + fill(limit) + "\r\n" + fill(limit+1) + "\n" + fill(limit+1) + "\r\n" +
		"# " + strings.Repeat("c", 3*limit) + "\n" + fill(5*limit) + "\nok w=2\n" + fill(limit+7)
	res := parseBoth(t, opts, []byte(body), strings.NewReader(body))
	if res.Lines != 7 || res.RejectedLines != 4 || res.Points != 3 {
		t.Fatalf("lines %d refused %d points %d, want 7 4 3; %v", res.Lines, res.RejectedLines, res.Points, res.Errors)
	}
	for i, want := range []struct{ line, n int }{{3, limit + 1}, {4, limit + 1}, {6, 5 * limit}, {8, limit + 7}} {
		e := res.Errors[i]
		if e.Line != want.line || e.Column != limit+1 || !strings.Contains(e.Msg, fmt.Sprintf("is %d bytes, the limit is %d bytes", want.n, limit)) {
			t.Errorf("error %d: %+v, want line %d of %d bytes", i, e, want.line, want.n)
		}
	}
	for _, r := range []io.Reader{iotest.OneByteReader(strings.NewReader(body)), iotest.HalfReader(strings.NewReader(body)), iotest.DataErrReader(strings.NewReader(body))} {
		parseBoth(t, opts, []byte(body), r)
	}
	p := NewParser(opts)
	if _, err := p.ParseReader(strings.NewReader(body), "", Millisecond, 0); err != nil || cap(p.rbuf) > limit+2 {
		t.Fatalf("ParseReader: %v; its buffer grew to %d bytes for a limit of %d", err, cap(p.rbuf), limit)
	}
}

// TestParseReader_GivesParsesAnswers parses random bodies (good and bad
// lines, long lines, CR LF, comments, a byte-order mark) with Parse and
// with ParseReader over readers that return a byte, half the request or
// data with EOF at a time, with a buffer that must grow and one that
// must not.
func TestParseReader_GivesParsesAnswers(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 16))
	for round := range 300 {
		var b strings.Builder
		if rng.IntN(5) == 0 {
			b.Write(utf8BOM)
		}
		for range rng.IntN(40) {
			switch rng.IntN(8) {
			case 0:
				fmt.Fprintf(&b, "m,h=%d %s\n", rng.IntN(5), strings.Repeat("f=1,", rng.IntN(200))+"g=2")
			case 1:
				fmt.Fprintf(&b, "m,h=%s v=1\r\n", strings.Repeat("y", rng.IntN(700)))
			case 2:
				fmt.Fprintf(&b, "#%s\n", strings.Repeat("#", rng.IntN(2000)))
			case 3:
				b.WriteString("bad line\n")
			case 4:
				fmt.Fprintf(&b, "m v=%d %d\n", rng.IntN(9), rng.IntN(99))
			case 5:
				b.WriteString("\n  \t\r\n")
			case 6:
				fmt.Fprintf(&b, "m%d a=1,b=%di,s=\"x\" 1\n", rng.IntN(3), rng.IntN(9))
			default:
				fmt.Fprintf(&b, "m,t=a\\ b w=1 %d", rng.IntN(9)) // maybe the last line, without LF
				if rng.IntN(2) == 0 {
					b.WriteByte('\n')
				}
			}
		}
		body := b.String()
		for _, opts := range []Options{{MaxLineBytes: 256, MaxFieldsPerLine: 100}, {MaxLineBytes: 100 << 10}} {
			var r io.Reader = strings.NewReader(body)
			switch round % 3 {
			case 0:
				r = iotest.OneByteReader(r)
			case 1:
				r = iotest.HalfReader(r)
			default:
				r = iotest.DataErrReader(r)
			}
			parseBoth(t, opts, []byte(body), r)
		}
	}
}

// TestParse_SeriesLimitCountsSeriesAndKeys: MaxSeries bounds the distinct
// series of a call and its distinct series keys (measurement and tags as
// written, refused lines included); the error names the line and column
// where the limit was passed.
func TestParse_SeriesLimitCountsSeriesAndKeys(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		err        string // "" accepted
	}{
		{"three fields of one key", "m a=1,b=2,c=3\n", ""},
		{"a fourth field", "m a=1,b=2,c=3\nm d=4\n", "line 2, column 3: too many series"},
		{"repeated series are free", "m a=1,b=2\nm a=3,b=4\nm,t=x a=1\n", ""},
		{"keys of refused lines count", "a v=x\nb v=x\nc v=x\nd v=x\n", "line 4, column 1: too many series"},
		{"two spellings are two keys", "m,a=1,b=2 v=1\nm,b=2,a=1 v=1\nm,a=1,b=2 v=1\nn,a=1 v=1\nn,b=1 v=1", "line 5, column 1: too many series"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParser(Options{MaxSeries: 3})
			for range 2 { // a second call starts counting again, from a warm cache
				_, err := p.Parse([]byte(tc.body), "", Millisecond, 0)
				if tc.err == "" && err != nil || tc.err != "" && (!errors.Is(err, ErrTooManySeries) || !strings.HasPrefix(err.Error(), tc.err)) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				if _, rerr := p.ParseReader(strings.NewReader(tc.body), "", Millisecond, 0); fmt.Sprint(rerr) != fmt.Sprint(err) {
					t.Fatalf("ParseReader err = %v, Parse err = %v", rerr, err)
				}
			}
			if _, err := p.Parse([]byte("ok v=1\n"), "", Millisecond, 0); err != nil {
				t.Fatalf("the parser is not usable after the limit: %v", err)
			}
		})
	}
}

// TestParseReader_ReadErrorFailsTheCall: an error reading the body fails
// the call, wrapped, with no Result; the parser stays usable.
func TestParseReader_ReadErrorFailsTheCall(t *testing.T) {
	boom := errors.New("connection reset")
	p := NewParser(Options{})
	r := io.MultiReader(strings.NewReader("m v=1\nm v=2\n"), iotest.ErrReader(boom))
	if res, err := p.ParseReader(r, "", Millisecond, 0); !errors.Is(err, boom) || res != nil {
		t.Fatalf("ParseReader = %v, %v; want the read error", res, err)
	}
	res, err := p.ParseReader(strings.NewReader("m v=3 3\n"), "", Millisecond, 0)
	if err != nil || render(res) != "m_v{} 3:3 @1\n" {
		t.Fatalf("after a failed read: %v %v", err, res)
	}
}
