package lpbench

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/workload"
)

// testNow places test data; any minute works.
var testNow = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

func testWorkload(t testing.TB, hosts int, span time.Duration) *workload.TSBSCPU {
	t.Helper()
	o := DefaultOptions()
	o.Hosts, o.Span = hosts, span
	g, err := newWorkload(o, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestNewWorkload_EndsAtTheMinuteBeforeNow(t *testing.T) {
	g := testWorkload(t, 3, 2*time.Hour)
	end := testNow.Truncate(time.Minute)
	if got := time.Unix(0, g.StartNs()); !got.Equal(end.Add(-2 * time.Hour)) {
		t.Errorf("starts at %v, want %v", got, end.Add(-2*time.Hour))
	}
	if last := time.Unix(0, g.TimestampNs(g.Rows()-1)); !last.Equal(end.Add(-10*time.Second)) || last.After(testNow) {
		t.Errorf("last line at %v, want %v (never after now %v)", last, end.Add(-10*time.Second), testNow)
	}
	if g.Rows() != 720 {
		t.Errorf("%d rows in 2h at 10s", g.Rows())
	}
}

func TestBuildBatches_SplitsHostsIntoGroupsAndLinesIntoBatches(t *testing.T) {
	g := testWorkload(t, 5, 2*time.Hour) // 3,600 lines
	batches := buildBatches(g, 2, 1000)
	if len(batches) != 2 {
		t.Fatalf("%d clients", len(batches))
	}
	var total int
	for c, bs := range batches {
		hosts := map[string]bool{}
		for i, b := range bs {
			if b.lines != 1000 && i != len(bs)-1 || b.lines <= 0 || b.lines > 1000 {
				t.Errorf("client %d batch %d has %d lines", c, i, b.lines)
			}
			if n := bytes.Count(b.body, []byte("\n")); n != b.lines {
				t.Errorf("client %d batch %d: %d newlines for %d lines", c, i, n, b.lines)
			}
			if cap(b.body) > len(b.body)*11/10 {
				t.Errorf("client %d batch %d: %d bytes in a %d-byte buffer", c, i, len(b.body), cap(b.body))
			}
			for line := range strings.SplitSeq(strings.TrimSuffix(string(b.body), "\n"), "\n") {
				tags, _, _, err := parseFakeLine(line)
				if err != nil {
					t.Fatal(err)
				}
				hosts[tags["hostname"]] = true
			}
			total += b.lines
		}
		// Hosts 0-1 go to client 0, hosts 2-4 to client 1.
		want := map[int][]string{0: {"host_0", "host_1"}, 1: {"host_2", "host_3", "host_4"}}[c]
		if len(hosts) != len(want) {
			t.Errorf("client %d writes hosts %v, want %v", c, hosts, want)
		}
		for _, h := range want {
			if !hosts[h] {
				t.Errorf("client %d does not write %s", c, h)
			}
		}
	}
	if int64(total) != g.Lines() {
		t.Errorf("%d lines in batches, want %d", total, g.Lines())
	}
}

func TestRunWrites_EveryLineArrivesInTimeOrderOnePersistentConnectionPerClient(t *testing.T) {
	g := testWorkload(t, 6, 2*time.Hour)
	store := newFakeStore()
	srv := httptest.NewServer(store.handler())
	defer srv.Close()
	st, err := runWrites(context.Background(), writeConfig{
		URL:         srv.URL + "/write?db=benchmark&precision=ns",
		Batches:     buildBatches(g, 3, 700),
		CallTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	points, hosts, disorder := store.stats()
	if st.Lines != g.Lines() || points != g.Points() || hosts != 6 {
		t.Errorf("wrote %d lines, server counted %d points of %d hosts; want %d lines", st.Lines, points, hosts, g.Lines())
	}
	if len(disorder) > 0 {
		t.Errorf("lines out of time order: %v", disorder)
	}
	if want := int64(3 * ((4320/3 + 699) / 700)); st.Requests != want || int64(len(st.Latencies)) != want {
		t.Errorf("%d requests, %d latencies, want %d", st.Requests, len(st.Latencies), want)
	}
	if len(store.Conns) != 3 {
		t.Errorf("%d connections for 3 clients: keep-alive is not working", len(store.Conns))
	}
	if len(store.Params) != 1 || !store.Params["db=benchmark&precision=ns"] {
		t.Errorf("query strings %v", store.Params)
	}
}

func TestRunWrites_FailsOnAStatusOtherThan204QuotingTheBody(t *testing.T) {
	g := testWorkload(t, 2, 2*time.Hour)
	store := newFakeStore()
	store.FailWrite = 2
	srv := httptest.NewServer(store.handler())
	defer srv.Close()
	_, err := runWrites(context.Background(), writeConfig{
		URL:         srv.URL + "/write?db=benchmark&precision=ns",
		Batches:     buildBatches(g, 1, 100),
		CallTimeout: 10 * time.Second,
	})
	if err == nil || !strings.Contains(err.Error(), "400 Bad Request") || !strings.Contains(err.Error(), "line 3: field usage_user") ||
		!strings.Contains(err.Error(), "request 2 of") {
		t.Fatalf("got %v, want a 400 error naming the request and quoting the body", err)
	}
	if store.writes != 2 {
		t.Errorf("%d requests sent; the client should stop at the first failure", store.writes)
	}
}

func TestRunWrites_200IsNotEnough(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	_, err := runWrites(context.Background(), writeConfig{
		URL:         srv.URL + "/write",
		Batches:     [][]batch{{{body: []byte("cpu,a=b x=1i 1\n"), lines: 1}}},
		CallTimeout: 10 * time.Second,
	})
	if err == nil || !strings.Contains(err.Error(), "want 204") {
		t.Fatalf("got %v", err)
	}
}

func TestRunWrites_NodeExitEndsThePhaseAtOnce(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	exited := make(chan struct{})
	time.AfterFunc(50*time.Millisecond, func() { close(exited) })
	t0 := time.Now()
	_, err := runWrites(context.Background(), writeConfig{
		URL:         srv.URL + "/write",
		Batches:     [][]batch{{{body: []byte("x\n"), lines: 1}}, {{body: []byte("y\n"), lines: 1}}},
		CallTimeout: time.Minute,
		NodeExited:  exited,
	})
	if !errors.Is(err, errNodeExited) {
		t.Fatalf("got %v, want errNodeExited", err)
	}
	if d := time.Since(t0); d > 30*time.Second {
		t.Errorf("took %v", d)
	}
}
