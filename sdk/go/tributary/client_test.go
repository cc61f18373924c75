package tributary_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/sdk/go/tributary"
)

func TestClient_WriteReportsAcceptedAndRejectedPoints(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	ctx := context.Background()
	now := time.Now().UnixMilli()
	old := time.Now().Add(-30 * 24 * time.Hour).UnixMilli()
	res, err := c.Write(ctx,
		tributary.Batch{Labels: tributary.Metric("temp", "room", "a"), TimestampsMs: []int64{now - 1000, old, now}, Values: []float64{20.5, 1, 21}},
		tributary.Batch{Labels: tributary.NewLabels("room", "b"), TimestampsMs: []int64{now}, Values: []float64{3}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if res.Accepted != 2 || res.Rejected != 2 || len(res.Rejections) != 2 {
		t.Fatalf("result %+v", res)
	}
	tooOld := res.Rejections[0]
	if tooOld.Reason != tributary.RejectTooOld || tooOld.BatchIndex != 0 || tooOld.PointIndex != 1 ||
		tooOld.TimestampMs != old || tooOld.Value != 1 || tooOld.Labels.Get("room") != "a" {
		t.Errorf("too-old rejection %+v", tooOld)
	}
	noName := res.Rejections[1]
	if noName.Reason != tributary.RejectInvalidSeries || noName.PointIndex != -1 || noName.Points != 1 || noName.Labels.Get("room") != "b" {
		t.Errorf("invalid-series rejection %+v", noName)
	}
	if !strings.Contains(noName.String(), "INVALID_SERIES") {
		t.Errorf("rejection string %q", noName.String())
	}
}

// writeFixture stores two series of 'temp' and one of 'hum' in the current
// minute and the one before, and returns the start of that earlier minute.
func writeFixture(t *testing.T, c *tributary.Client) time.Time {
	t.Helper()
	base := time.Now().Truncate(time.Minute).Add(-time.Minute)
	at := func(sec int) int64 { return base.Add(time.Duration(sec) * time.Second).UnixMilli() }
	res, err := c.Write(context.Background(),
		tributary.Batch{Labels: tributary.Metric("temp", "room", "a", "floor", "1"), TimestampsMs: []int64{at(0), at(30), at(60)}, Values: []float64{10, 20, 30}},
		tributary.Batch{Labels: tributary.Metric("temp", "room", "b", "floor", "1"), TimestampsMs: []int64{at(0), at(30), at(60)}, Values: []float64{1, 2, 3}},
		tributary.Batch{Labels: tributary.Metric("hum", "room", "a", "floor", "2"), TimestampsMs: []int64{at(10)}, Values: []float64{55}},
	)
	if err != nil || res.Accepted != 7 {
		t.Fatalf("fixture write: %+v %v", res, err)
	}
	return base
}

type pts = []tributary.Point

func TestClient_QueryShapes(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	base := writeFixture(t, c)
	ms := func(sec int) int64 { return base.Add(time.Duration(sec) * time.Second).UnixMilli() }
	end := base.Add(2 * time.Minute)
	cases := []struct {
		name   string
		q      tributary.Query
		labels []string
		points []pts
		source string
	}{
		{"raw", tributary.Raw(`temp{room="a"}`, base, end),
			[]string{`temp{floor="1",room="a"}`}, []pts{{{ms(0), 10}, {ms(30), 20}, {ms(60), 30}}}, "raw"},
		{"raw range is inclusive", tributary.Raw(`temp{room="a"}`, base.Add(30*time.Second), base.Add(60*time.Second)),
			[]string{`temp{floor="1",room="a"}`}, []pts{{{ms(30), 20}, {ms(60), 30}}}, "raw"},
		{"downsample max per minute", tributary.Downsample(`temp`, base, end, time.Minute, tributary.FuncMax),
			[]string{`temp{floor="1",room="a"}`, `temp{floor="1",room="b"}`}, []pts{{{ms(0), 20}, {ms(60), 30}}, {{ms(0), 2}, {ms(60), 3}}}, "raw"},
		{"downsample defaults to avg", tributary.Query{Selector: `temp{room="b"}`, Start: base, End: end, Step: time.Minute},
			[]string{`temp{floor="1",room="b"}`}, []pts{{{ms(0), 1.5}, {ms(60), 3}}}, "raw"},
		{"last point", tributary.Last(`{floor=~"1|2"}`),
			[]string{`hum{floor="2",room="a"}`, `temp{floor="1",room="a"}`, `temp{floor="1",room="b"}`}, []pts{{{ms(10), 55}}, {{ms(60), 30}}, {{ms(60), 3}}}, "last"},
		{"sum across all series", tributary.Downsample(`temp`, base, end, time.Minute, tributary.FuncMax).Grouped(tributary.FuncSum),
			[]string{`{}`}, []pts{{{ms(0), 22}, {ms(60), 33}}}, "raw"},
		{"grouped by floor", tributary.Raw(`{room="a"}`, base, end).Grouped(tributary.FuncMax, "floor"),
			[]string{`{floor="1"}`, `{floor="2"}`}, []pts{{{ms(0), 10}, {ms(30), 20}, {ms(60), 30}}, {{ms(10), 55}}}, "raw"},
		{"no match", tributary.Raw(`nothing`, base, end), nil, nil, "raw"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it := c.Query(context.Background(), tc.q)
			var labels []string
			var points []pts
			for s, err := range it.All() {
				if err != nil {
					t.Fatal(err)
				}
				labels = append(labels, s.Labels.String())
				points = append(points, s.Points)
			}
			if !slices.Equal(labels, tc.labels) {
				t.Errorf("series %q, want %q", labels, tc.labels)
			}
			if !slices.EqualFunc(points, tc.points, slices.Equal) {
				t.Errorf("points %v, want %v", points, tc.points)
			}
			if it.Source() != tc.source {
				t.Errorf("source %q, want %q", it.Source(), tc.source)
			}
		})
	}
}

func TestClient_QueryAssemblesSeriesSpanningMessages(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	// The server sends at most 8192 points a message.
	const n = 20_000
	start := time.Now().Add(-time.Hour).UnixMilli()
	ts, vs := make([]int64, n), make([]float64, n)
	for i := range n {
		ts[i], vs[i] = start+int64(i), float64(i)
	}
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		if res, err := c.Write(ctx, tributary.Batch{Labels: tributary.Metric(name), TimestampsMs: ts, Values: vs}); err != nil || res.Accepted != n {
			t.Fatalf("write: %+v %v", res, err)
		}
	}
	got, err := c.Query(ctx, tributary.Raw(`{__name__=~"a|b"}`, time.UnixMilli(start), time.Now())).Collect()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Labels.Metric() != "a" || got[1].Labels.Metric() != "b" {
		t.Fatalf("got %d series", len(got))
	}
	for _, s := range got {
		if len(s.Points) != n || s.Points[n-1] != (tributary.Point{TimestampMs: start + n - 1, Value: n - 1}) {
			t.Fatalf("%s: %d points, last %v", s.Labels, len(s.Points), s.Points[len(s.Points)-1])
		}
	}
}

func TestClient_QueryErrorsAreClear(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	ctx := context.Background()
	cases := map[string]struct {
		q    tributary.Query
		want string
	}{
		"bad selector":      {tributary.Raw(`cpu{host=}`, time.Time{}, time.Time{}), "offset"},
		"empty selector":    {tributary.Query{}, "no selector"},
		"reversed range":    {tributary.Raw(`cpu`, time.Now(), time.Now().Add(-time.Hour)), "before start"},
		"sub-ms step":       {tributary.Downsample(`cpu`, time.Time{}, time.Time{}, time.Microsecond, tributary.FuncAvg), "milliseconds"},
		"fn without step":   {tributary.Query{Selector: "cpu", Fn: tributary.FuncMax}, "needs a step"},
		"matches all empty": {tributary.Raw(`{host!="x"}`, time.Time{}, time.Time{}), "InvalidArgument"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			it := c.Query(ctx, tc.q)
			if it.Next() {
				t.Fatal("Next succeeded")
			}
			if err := it.Err(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
	if n := s.callCount("Query"); n != 1 {
		t.Errorf("%d Query calls reached the server, want 1 (the others fail in the client, InvalidArgument is not retried)", n)
	}
}

func TestClient_SeriesLabelsAndStatus(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	writeFixture(t, c)
	ctx := context.Background()

	series, err := c.Series(ctx, `temp`, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ls := range series {
		got = append(got, ls.String())
	}
	if want := []string{`temp{floor="1",room="a"}`, `temp{floor="1",room="b"}`}; !slices.Equal(got, want) {
		t.Errorf("series %q, want %q", got, want)
	}
	if all, err := c.Series(ctx, "", 0); err != nil || len(all) != 3 {
		t.Errorf("all series: %d %v", len(all), err)
	}
	if one, err := c.Series(ctx, "", 1); err != nil || len(one) != 1 {
		t.Errorf("limited series: %d %v", len(one), err)
	}

	names, err := c.LabelNames(ctx, "")
	if want := []string{"__name__", "floor", "room"}; err != nil || !slices.Equal(names, want) {
		t.Errorf("label names %q %v, want %q", names, err, want)
	}
	values, err := c.LabelValues(ctx, "room", `hum`)
	if err != nil || !slices.Equal(values, []string{"a"}) {
		t.Errorf("room values of hum: %q %v", values, err)
	}
	metrics, err := c.LabelValues(ctx, tributary.MetricName, "")
	if err != nil || !slices.Equal(metrics, []string{"hum", "temp"}) {
		t.Errorf("metric names %q %v", metrics, err)
	}
	if _, err := c.LabelValues(ctx, "", ""); err == nil {
		t.Error("empty label name accepted")
	}

	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Series != 3 || st.PointsAccepted != 7 || st.Role != "edge" || st.Version != "test" || st.NodeID == "" {
		t.Errorf("status %+v", st)
	}
}

func TestRetry_UnavailableAndResourceExhaustedAreRetried(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	s.fail("Write", codes.Unavailable, codes.ResourceExhausted, codes.Unavailable)
	now := time.Now().UnixMilli()
	res, err := c.Write(context.Background(), tributary.Batch{Labels: tributary.Metric("x"), TimestampsMs: []int64{now}, Values: []float64{1}})
	if err != nil || res.Accepted != 1 {
		t.Fatalf("write after 3 failures: %+v %v", res, err)
	}
	if n := s.callCount("Write"); n != 4 {
		t.Errorf("%d attempts, want 4", n)
	}
}

func TestRetry_GivesUpAfterMaxAttempts(t *testing.T) {
	s := startServer(t)
	c := dial(t, s) // 4 attempts
	s.fail("Status", codes.Unavailable, codes.Unavailable, codes.Unavailable, codes.Unavailable, codes.Unavailable)
	_, err := c.Status(context.Background())
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "gave up after 4 attempts") {
		t.Fatalf("error %v", err)
	}
	if !tributary.IsRetryable(err) {
		t.Error("IsRetryable(Unavailable) is false")
	}
	if n := s.callCount("Status"); n != 4 {
		t.Errorf("%d attempts, want 4", n)
	}
}

func TestRetry_OtherCodesAreNotRetried(t *testing.T) {
	for _, code := range []codes.Code{codes.InvalidArgument, codes.Internal, codes.Unauthenticated, codes.PermissionDenied} {
		t.Run(code.String(), func(t *testing.T) {
			s := startServer(t)
			c := dial(t, s)
			s.fail("Write", code)
			_, err := c.Write(context.Background(), tributary.Batch{Labels: tributary.Metric("x"), TimestampsMs: []int64{time.Now().UnixMilli()}, Values: []float64{1}})
			if status.Code(err) != code {
				t.Fatalf("error %v, want %s", err, code)
			}
			if tributary.IsRetryable(err) {
				t.Error("IsRetryable is true")
			}
			if n := s.callCount("Write"); n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
		})
	}
}

func TestRetry_DeadlineExceededOnlyForReads(t *testing.T) {
	s := startServer(t)
	c := dial(t, s, tributary.WithTimeout(100*time.Millisecond))
	ctx := context.Background()

	s.hangNext("Status", 1)
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("status after one timed-out attempt: %v", err)
	}
	if n := s.callCount("Status"); n != 2 {
		t.Errorf("status: %d attempts, want 2", n)
	}

	s.hangNext("Write", 1)
	_, err := c.Write(ctx, tributary.Batch{Labels: tributary.Metric("x"), TimestampsMs: []int64{time.Now().UnixMilli()}, Values: []float64{1}})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("write error %v, want DeadlineExceeded", err)
	}
	if n := s.callCount("Write"); n != 1 {
		t.Errorf("write: %d attempts, want 1", n)
	}

	// A query attempt that gets no first answer in time is retried too.
	writeFixture(t, c)
	s.hangNext("Query", 1)
	got, err := c.Query(ctx, tributary.Last(`temp`)).Collect()
	if err != nil || len(got) != 2 {
		t.Fatalf("query after one timed-out attempt: %d series, %v", len(got), err)
	}
	if n := s.callCount("Query"); n != 2 {
		t.Errorf("query: %d attempts, want 2", n)
	}
}

func TestRetry_QueryBeforeFirstAnswer(t *testing.T) {
	s := startServer(t)
	c := dial(t, s)
	writeFixture(t, c)
	s.fail("Query", codes.Unavailable, codes.ResourceExhausted)
	got, err := c.Query(context.Background(), tributary.Last(`temp`)).Collect()
	if err != nil || len(got) != 2 {
		t.Fatalf("query: %d series, %v", len(got), err)
	}
	if n := s.callCount("Query"); n != 3 {
		t.Errorf("%d attempts, want 3", n)
	}
}

func TestRetry_StopsWhenTheCallerGivesUp(t *testing.T) {
	s := startServer(t)
	c, err := tributary.Dial(context.Background(), s.addr, tributary.WithRetry(tributary.RetryPolicy{MaxAttempts: -1, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	codesList := make([]codes.Code, 1000)
	for i := range codesList {
		codesList[i] = codes.Unavailable
	}
	s.fail("Status", codesList...)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for s.callCount("Status") < 5 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	_, err = c.Status(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

func TestRetryPolicy_BackoffGrowsWithJitterAndCap(t *testing.T) {
	p := tributary.RetryPolicy{MaxAttempts: 10, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second}
	for attempt, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 9: time.Second} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := p.Backoff(attempt)
			if d < want/2 || d > want {
				t.Fatalf("attempt %d: backoff %s outside [%s, %s]", attempt, d, want/2, want)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("attempt %d: only %d distinct waits in 200: no jitter", attempt, len(seen))
		}
	}
	if _, err := tributary.Dial(context.Background(), "127.0.0.1:1", tributary.WithRetry(tributary.RetryPolicy{InitialBackoff: time.Second, MaxBackoff: time.Millisecond})); err == nil {
		t.Error("max backoff below initial accepted")
	}
}

func TestDial_TokenIsSentAndRequired(t *testing.T) {
	const token = "s3cret-token-of-the-test"
	s := startServer(t, withServerToken(token))
	ctx := context.Background()

	anon := dial(t, s)
	_, err := anon.Status(ctx)
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without token: %v", err)
	}
	if n := s.callCount("Status"); n != 1 {
		t.Errorf("Unauthenticated retried: %d attempts", n)
	}

	c := dial(t, s, tributary.WithToken(token))
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("with token: %v", err)
	}
	if got := s.auth(); got != "Bearer "+token {
		t.Errorf("authorization %q", got)
	}
	if _, err := c.Query(ctx, tributary.Last("x")).Collect(); err != nil {
		t.Fatalf("query with token: %v", err)
	}
}

func TestDial_RefusesTokenInClearTextToRemoteHosts(t *testing.T) {
	ctx := context.Background()
	for _, addr := range []string{"10.1.2.3:7070", "db.example.com:7070", "dns:///db.example.com:7070", "[2001:db8::1]:7070"} {
		if _, err := tributary.Dial(ctx, addr, tributary.WithToken("t0ken")); !errors.Is(err, tributary.ErrTokenOverPlaintext) {
			t.Errorf("%s: %v, want ErrTokenOverPlaintext", addr, err)
		}
		c, err := tributary.Dial(ctx, addr, tributary.WithToken("t0ken"), tributary.WithTokenOverPlaintext())
		if err != nil {
			t.Errorf("%s with WithTokenOverPlaintext: %v", addr, err)
		} else {
			c.Close()
		}
		c, err = tributary.Dial(ctx, addr, tributary.WithToken("t0ken"), tributary.WithInsecureSkipVerify())
		if err != nil {
			t.Errorf("%s over TLS: %v", addr, err)
		} else {
			c.Close()
		}
	}
	for _, addr := range []string{"127.0.0.1:7070", "localhost:7070", "[::1]:7070", "unix:///run/tributary.sock", "127.0.0.2:1"} {
		if !tributary.IsLoopback(addr) {
			t.Errorf("%s is not seen as loopback", addr)
		}
	}
	if _, err := tributary.Dial(ctx, "127.0.0.1:1", tributary.WithToken("bad token\n")); err == nil {
		t.Error("token with a newline accepted")
	}
}

func TestDial_TLS(t *testing.T) {
	cfg, caFile := selfSignedCert(t)
	const token = "tls-token-of-the-test"
	s := startServer(t, withServerTLS(cfg), withServerToken(token))
	ctx := context.Background()

	c := dial(t, s, tributary.WithCAFile(caFile), tributary.WithToken(token))
	if _, err := c.Status(ctx); err != nil {
		t.Fatalf("TLS with the CA: %v", err)
	}
	byName, err := tributary.Dial(ctx, strings.Replace(s.addr, "127.0.0.1", "localhost", 1), tributary.WithCAFile(caFile), tributary.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	defer byName.Close()
	if _, err := byName.Status(ctx); err != nil {
		t.Fatalf("TLS by host name: %v", err)
	}

	untrusted := dial(t, s, tributary.WithTLSConfig(nil), tributary.WithRetry(tributary.RetryPolicy{MaxAttempts: 1}))
	if _, err := untrusted.Status(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("TLS without trusting the CA: %v", err)
	}
	skip := dial(t, s, tributary.WithInsecureSkipVerify(), tributary.WithToken(token))
	if _, err := skip.Status(ctx); err != nil {
		t.Errorf("TLS without verification: %v", err)
	}
	plain := dial(t, s, tributary.WithRetry(tributary.RetryPolicy{MaxAttempts: 1}))
	if _, err := plain.Status(ctx); err == nil {
		t.Error("plaintext call to a TLS server succeeded")
	}
	if _, err := tributary.Dial(ctx, s.addr, tributary.WithCAFile(caFile+".missing")); err == nil {
		t.Error("missing CA file accepted")
	}
}

func TestDial_BlockWaitsForTheServer(t *testing.T) {
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tributary.Dial(ctx, s.addr, tributary.WithBlock())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()

	// Nothing listens on port 1 of loopback.
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if _, err := tributary.Dial(short, "127.0.0.1:1", tributary.WithBlock()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial to a closed port: %v", err)
	}
}

func TestLabels_Helpers(t *testing.T) {
	ls := tributary.Metric("cpu", "host", "pi-7", "core", "0")
	if ls.String() != `cpu{core="0",host="pi-7"}` || ls.Metric() != "cpu" || ls.Get("host") != "pi-7" || ls.Get("nope") != "" {
		t.Errorf("labels %v", ls)
	}
	if m := ls.Map(); len(m) != 3 || m["core"] != "0" {
		t.Errorf("map %v", m)
	}
	if got := tributary.LabelsFromMap(map[string]string{"b": "2", "a": "1"}); got.String() != `{a="1",b="2"}` {
		t.Errorf("from map %v", got)
	}
	ms, err := tributary.ParseSelector(`cpu{host="a",region=~"eu.*"}`)
	if err != nil {
		t.Fatal(err)
	}
	want := []tributary.Matcher{{tributary.MatchEqual, "__name__", "cpu"}, {tributary.MatchEqual, "host", "a"}, {tributary.MatchRegexp, "region", "eu.*"}}
	if !slices.Equal(ms, want) {
		t.Errorf("matchers %v", ms)
	}
	if _, err := tributary.ParseSelector(`cpu{host=~"("}`); err == nil {
		t.Error("bad regexp accepted")
	}
	for _, name := range []string{"avg", "SUM", "min", "max", "count", "first", "last"} {
		if f, err := tributary.ParseFunc(name); err != nil || !strings.EqualFold(f.String(), name) {
			t.Errorf("ParseFunc(%q) = %v, %v", name, f, err)
		}
	}
	if _, err := tributary.ParseFunc("median"); err == nil {
		t.Error("median accepted")
	}
}

func TestProtoMatchers(t *testing.T) {
	ms, err := tributary.ProtoMatchers(`cpu{host!="a"}`, tributary.Matcher{Type: tributary.MatchNotRegexp, Name: "core", Value: "1|2"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, m.Type.String()+" "+m.Name+" "+m.Value)
	}
	if want := []string{"EQUAL __name__ cpu", "NOT_EQUAL host a", "NOT_REGEX core 1|2"}; !slices.Equal(got, want) {
		t.Errorf("matchers %q, want %q", got, want)
	}
	if _, err := tributary.ProtoMatchers("", tributary.Matcher{Type: 9, Name: "x"}); err == nil {
		t.Error("unknown matcher type accepted")
	}
	if _, err := tributary.ProtoMatchers("", tributary.Matcher{Value: "x"}); err == nil {
		t.Error("empty label name accepted")
	}
}
