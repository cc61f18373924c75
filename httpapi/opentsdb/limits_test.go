package opentsdb

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/node/labels"
)

// manyTagsJSON returns a tags object of n tags: {"t0":"v","t1":"v",...}.
func manyTagsJSON(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"t%d":"v"`, i)
	}
	b.WriteByte('}')
	return b.String()
}

// TestPut_DatapointWithTooManyTagsFailsAloneWithoutDecodingItsTags: a
// datapoint with more tags than a series may hold fails on its own (the
// others are stored), with an error naming the count and the limit, and
// its tags are counted, not decoded: the request allocates a small
// multiple of its body, not one map entry and label per tag.
func TestPut_DatapointWithTooManyTagsFailsAloneWithoutDecodingItsTags(t *testing.T) {
	e := newEnv(t)
	const tags = 200_000
	body := fmt.Sprintf(`[{"metric":"ok.before","timestamp":%d,"value":1,"tags":{"h":"a"}},`+
		`{"metric":"wide","timestamp":%d,"value":1,"tags":%s},`+
		`{"metric":"ok.after","timestamp":%d,"value":2,"tags":{"h":"a"}}]`, nowSec()-10, nowSec()-10, manyTagsJSON(tags), nowSec()-10)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st, raw, _ := e.do("POST", "/api/put?details", body)
	runtime.ReadMemStats(&after)
	// The body is read whole (1x) and decoded a datapoint at a time, in place.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("a %d-byte body allocated %.1f MiB (%.1fx)", len(body), float64(alloc)/(1<<20), float64(alloc)/float64(len(body)))
	if bound := uint64(2*len(body)) + 1<<20; alloc > bound {
		t.Errorf("the request allocated %d bytes, more than 2x its %d-byte body + 1 MiB", alloc, len(body))
	}
	var ans putAnswer
	if err := json.Unmarshal(raw, &ans); err != nil {
		t.Fatalf("answer %d %s: %v", st, raw, err)
	}
	if st != http.StatusBadRequest || ans.Success != 2 || ans.Failed != 1 || len(ans.Errors) != 1 {
		t.Fatalf("status %d answer %s", st, raw)
	}
	maxTags := labels.DefaultLimits.MaxLabels - 1
	if msg := ans.Errors[0].Error; !strings.Contains(msg, fmt.Sprintf("%d tags", tags)) || !strings.Contains(msg, fmt.Sprintf("at most %d tags", maxTags)) {
		t.Fatalf("error %q, want the count and the limit", msg)
	}
	if e.count("ok.before") != 1 || e.count("ok.after") != 1 || e.count("wide") != 0 {
		t.Fatalf("stored: before %d after %d wide %d", e.count("ok.before"), e.count("ok.after"), e.count("wide"))
	}
}

// TestPut_TooManySeriesInOneRequestIs413: a body with more distinct series
// than the limit is refused whole with 413, naming the datapoint, and
// nothing of it is stored.
func TestPut_TooManySeriesInOneRequestIs413(t *testing.T) {
	e := newEnv(t)
	var b strings.Builder
	b.WriteByte('[')
	for i := range httpapi.DefaultMaxSeriesPerRequest + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"metric":"many","timestamp":%d,"value":1,"tags":{"h":"%d"}}`, nowSec()-10, i)
	}
	b.WriteByte(']')
	st, raw, _ := e.do("POST", "/api/put", b.String())
	want := fmt.Sprintf("datapoint %d: more than %d series", httpapi.DefaultMaxSeriesPerRequest+1, httpapi.DefaultMaxSeriesPerRequest)
	if st != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), want) {
		t.Fatalf("status %d %s, want 413 with %q", st, raw, want)
	}
	if got := e.cfg.Stats.Get(httpapi.ViolationTooManySeries); got != 1 {
		t.Fatalf("too_many_series violations %d, want 1", got)
	}
	if n := e.count("many"); n != 0 {
		t.Fatalf("%d points of a refused request stored", n)
	}
}

// TestTelnet_LineWithTooManyTagsIsRefusedBeforeItsTagsAreParsed: a put
// line with more tags than a series may hold is answered with an error
// naming the count and the limit, and nothing of it is written.
func TestTelnet_LineWithTooManyTagsIsRefusedBeforeItsTagsAreParsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := &fakeBackend{}
		srv, err := NewTelnetServer(fb, &httpapi.Config{}, TelnetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l := newPipeListener()
		stop := startTelnet(t, srv, l)
		c := l.dial()
		rd := bufio.NewReader(c)
		var line strings.Builder
		line.WriteString("put wide 1709290000 1")
		for i := range 5000 {
			fmt.Fprintf(&line, " t%d=v", i)
		}
		go func() {
			fmt.Fprintf(c, "%s\nput ok 1709290000 2 h=a\nversion\n", line.String())
		}()
		maxTags := labels.DefaultLimits.MaxLabels - 1
		for _, w := range []string{fmt.Sprintf("put: illegal argument: line 1: 5000 tags, at most %d tags", maxTags), "tributary:"} {
			if got, err := rd.ReadString('\n'); err != nil || !strings.HasPrefix(got, w) {
				t.Fatalf("reply %q (%v), want prefix %q", got, err, w)
			}
		}
		c.Close()
		synctest.Wait()
		if _, p := fb.points(); p != 1 {
			t.Fatalf("%d points written, want the one valid line", p)
		}
		stop()
	})
}

// TestTelnet_LabelBytesOfNewSeriesBoundWhatAConnectionHolds: a connection
// writes its batch once the new series in it hold 1 MiB of label strings,
// long before FlushPoints or FlushInterval, so a stream of lines of long
// new tag values is not held until then.
func TestTelnet_LabelBytesOfNewSeriesBoundWhatAConnectionHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fb := &fakeBackend{}
		srv, err := NewTelnetServer(fb, &httpapi.Config{}, TelnetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l := newPipeListener()
		stop := startTelnet(t, srv, l)
		c := l.dial()
		const lines, valueBytes = 1500, 900
		go func() {
			w := bufio.NewWriter(c)
			for i := range lines {
				fmt.Fprintf(w, "put m 1709290000 1 h=%0*d\n", valueBytes, i)
			}
			w.Flush()
		}()
		synctest.Wait() // every line read; no time has passed
		writes, points := fb.points()
		// A series holds its value and "__name__", "m" and "h".
		if writes != 1 || points >= lines || points*(valueBytes+len("__name__mh")) < telnetFlushLabelBytes {
			t.Fatalf("%d writes of %d points before any timer, want one of about %d", writes, points, telnetFlushLabelBytes/valueBytes)
		}
		c.Close()
		synctest.Wait()
		if _, p := fb.points(); p != lines {
			t.Fatalf("%d points written in all, want %d", p, lines)
		}
		stop()
	})
}
