package load

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/bench/internal/fakenode"
	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/workload"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// The test binary doubles as a fake tributary binary: with fakenode.Env set,
// it serves as `tributary node` a WriteService that answers every request
// without decoding it, for BenchmarkLoad_OneClientSeparateProcess.
func TestMain(m *testing.M) { fakenode.Main(m, fakeTributary) }

func fakeTributary(_ string, args []string) int {
	a, err := fakenode.ParseArgs(args)
	if err != nil || a.Command != "node" {
		return 2
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(fakenode.DiscardCodec{}))
	tributaryv1.RegisterWriteServiceServer(srv, fakenode.NoopWriter{PerRequest: benchPointsPerRequest})
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := fakenode.ServeProcess(srv, a.Listen, log); err != nil {
		log.Error("fake node", "err", err)
		return 1
	}
	return 0
}

func dial(t testing.TB, addr string, n int) []tributaryv1.WriteServiceClient {
	t.Helper()
	conns, err := Dial(addr, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conns.Close)
	return conns.WriteClients()
}

func testConfig(t *testing.T, addr string, series, clients int) Config {
	t.Helper()
	gen, err := workload.NewSensor(workload.SensorOptions{Series: series, StartMs: 1_600_000_000_000, IntervalMs: 1000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		Clients:         dial(t, addr, clients),
		Requests:        Split(gen.Requests(50, 20), clients),
		PointsPerSeries: 20,
		Duration:        300 * time.Millisecond,
		CallTimeout:     10 * time.Second,
	}
}

func TestRun_CountsEveryAcknowledgedPointInSeriesOrder(t *testing.T) {
	fw := fakenode.NewWriter()
	cfg := testConfig(t, fakenode.Serve(t, fw), 500, 3)
	st, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	points, series, disorder := fw.Stats()
	if st.Points == 0 || st.Points != points {
		t.Fatalf("load counted %d points, server accepted %d", st.Points, points)
	}
	if st.Points != st.Requests*50*20 || int64(len(st.Latencies)) != st.Requests {
		t.Errorf("%d points in %d requests with %d latencies", st.Points, st.Requests, len(st.Latencies))
	}
	if series != 500 && st.Requests >= 10 {
		t.Errorf("server saw %d series, want all 500", series)
	}
	if len(disorder) > 0 {
		t.Errorf("series written out of time order: %v", disorder)
	}
	if st.Elapsed < cfg.Duration || st.FillTime <= 0 || st.WaitTime <= 0 {
		t.Errorf("elapsed %v fill %v wait %v", st.Elapsed, st.FillTime, st.WaitTime)
	}
}

func TestRun_RejectedPointFailsLoudly(t *testing.T) {
	fw := fakenode.NewWriter()
	fw.RejectLast = true
	_, err := Run(context.Background(), testConfig(t, fakenode.Serve(t, fw), 100, 2))
	if err == nil {
		t.Fatal("no error although the node rejected points")
	}
	for _, want := range []string{"accepted 999 and rejected 1 of 1000", "REJECT_REASON_TOO_FAR_IN_FUTURE", "2h in the future"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestRun_WriteErrorFails(t *testing.T) {
	fw := fakenode.NewWriter()
	fw.FailAfter = 3
	_, err := Run(context.Background(), testConfig(t, fakenode.Serve(t, fw), 100, 2))
	if err == nil || !strings.Contains(err.Error(), "shutting down") {
		t.Fatalf("got %v, want the write error", err)
	}
}

func TestRun_StopsBeforeWritingFutureSamples(t *testing.T) {
	fw := fakenode.NewWriter()
	cfg := testConfig(t, fakenode.Serve(t, fw), 100, 2)
	cfg.Duration = time.Minute
	// Two rounds of 20 one-second samples are in the past; the third is not.
	cfg.Now = func() time.Time { return time.UnixMilli(1_600_000_000_000 + 45_000) }
	st, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !st.CaughtUp || st.Points != 2*100*20 {
		t.Errorf("caught up %v after %d points, want true after %d", st.CaughtUp, st.Points, 2*100*20)
	}
}

func TestRun_StopEndsTheLoadWithoutError(t *testing.T) {
	fw := fakenode.NewWriter()
	cfg := testConfig(t, fakenode.Serve(t, fw), 100, 2)
	cfg.Duration = time.Minute
	stop := make(chan struct{})
	cfg.Stop = stop
	time.AfterFunc(200*time.Millisecond, func() { close(stop) })
	t0 := time.Now()
	st, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("load ran %v after Stop was closed", d)
	}
	points, _, _ := fw.Stats()
	if st.Points == 0 || st.Points != points || st.CaughtUp {
		t.Errorf("load counted %d points (caught up %v), server accepted %d", st.Points, st.CaughtUp, points)
	}
}

func TestRun_CancelledContextIsAnError(t *testing.T) {
	fw := fakenode.NewWriter()
	cfg := testConfig(t, fakenode.Serve(t, fw), 100, 2)
	cfg.Duration = time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := Run(ctx, cfg); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("got %v, want an interrupted error", err)
	}
}

func TestRun_NodeExitCutsHangingWritesShort(t *testing.T) {
	exited, release := make(chan struct{}), make(chan struct{})
	fw := fakenode.NewWriter()
	// The node dies while it answers the first write, which then hangs,
	// as a write to a dead node can until its call timeout.
	fw.OnAccept = func(*tributaryv1.SeriesBatch) error {
		select {
		case <-exited:
		default:
			close(exited)
		}
		<-release
		return nil
	}
	cfg := testConfig(t, fakenode.Serve(t, fw), 100, 2)
	t.Cleanup(func() { close(release) }) // before the server stops
	cfg.NodeExited = exited
	t0 := time.Now()
	_, err := Run(context.Background(), cfg)
	if !errors.Is(err, ErrNodeExited) {
		t.Fatalf("got %v, want ErrNodeExited", err)
	}
	if d := time.Since(t0); d >= cfg.CallTimeout {
		t.Errorf("load took %v, the call timeout, to stop after the node exited", d)
	}
}

func TestSplit_DealsEveryRequestToOneClientInOrder(t *testing.T) {
	gen, err := workload.NewSensor(workload.SensorOptions{Series: 10, StartMs: 1_600_000_000_000, IntervalMs: 1000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	reqs := gen.Requests(2, 1) // five requests
	tests := []struct {
		name    string
		clients int
		want    []int // requests per client
	}{
		{"fewer clients than requests", 2, []int{3, 2}},
		{"as many as requests", 5, []int{1, 1, 1, 1, 1}},
		{"more clients than requests", 8, []int{1, 1, 1, 1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Split(reqs, tc.clients)
			var sizes []int
			var dealt []*workload.Request
			for _, rs := range got {
				sizes = append(sizes, len(rs))
				dealt = append(dealt, rs...)
			}
			if !slices.Equal(sizes, tc.want) || !slices.Equal(dealt, reqs) {
				t.Errorf("requests per client %v, want %v, every request once in order", sizes, tc.want)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	tests := []struct {
		name string
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of unsorted", ms(5, 1, 3, 2, 4), 0.5, 3 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(100, 99, 98, 97, 96, 95, 94, 93, 92, 91, 90, 89, 88, 87, 86, 85, 84, 83, 82, 81, 80, 79, 78, 77, 76, 75, 74, 73, 72, 71, 70, 69, 68, 67, 66, 65, 64, 63, 62, 61, 60, 59, 58, 57, 56, 55, 54, 53, 52, 51, 50, 49, 48, 47, 46, 45, 44, 43, 42, 41, 40, 39, 38, 37, 36, 35, 34, 33, 32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 0.99, 99 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Percentile(tc.in, tc.q); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// benchPointsPerRequest is the size of the one-client benchmarks'
// requests: 100 series × 100 points.
const benchPointsPerRequest = 10_000

// BenchmarkLoad_OneClient measures the load generator alone: one client
// refilling and sending 10,000-point requests (100 series × 100 points) to a
// server that does no work. server=decode decodes each request as a node
// must; server=discard skips even that, leaving the client's own cost.
// The cpu-s/Mpoint metric is this process's CPU (client and server) per
// million points.
func BenchmarkLoad_OneClient(b *testing.B) {
	cases := []struct {
		name string
		addr func(b *testing.B) string
	}{
		{"server=decode", func(b *testing.B) string {
			return fakenode.Serve(b, fakenode.NoopWriter{PerRequest: benchPointsPerRequest})
		}},
		{"server=discard", func(b *testing.B) string {
			return fakenode.Serve(b, fakenode.NoopWriter{PerRequest: benchPointsPerRequest}, grpc.ForceServerCodecV2(fakenode.DiscardCodec{}))
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			client := dial(b, c.addr(b), 1)[0]
			b.ReportAllocs()
			cpu, points := benchWrites(b, client)
			b.ReportMetric(points/b.Elapsed().Seconds(), "points/s")
			b.ReportMetric(cpu.Seconds()/(points/1e6), "cpu-s/Mpoint")
		})
	}
}

// BenchmarkLoad_OneClientSeparateProcess measures one load-generator client
// alone: the server is another process that accepts each request without
// decoding it, so this process's CPU time is the client's (refilling
// requests, protobuf encoding, gRPC). Run with -benchtime=10s or more.
func BenchmarkLoad_OneClientSeparateProcess(b *testing.B) {
	dir := b.TempDir()
	addr, err := nodeproc.FreeLoopbackAddr()
	if err != nil {
		b.Fatal(err)
	}
	node, err := nodeproc.Start(context.Background(), nodeproc.Options{
		Binary: os.Args[0], DataDir: dir, ListenAddr: addr, LogPath: filepath.Join(dir, "node.log"),
		Env: []string{fakenode.Env + "=noop"},
	})
	if err != nil {
		b.Fatal(err)
	}
	defer node.Stop(10 * time.Second)
	cpu, points := benchWrites(b, dial(b, addr, 1)[0])
	b.ReportMetric(points/b.Elapsed().Seconds(), "points/s")
	b.ReportMetric(cpu.Seconds()/(points/1e6), "client-cpu-s/Mpoint")
	b.ReportMetric(cpu.Seconds()/b.Elapsed().Seconds(), "client-cores")
}

// benchWrites is the timed loop of the one-client benchmarks: it refills and
// writes 10,000-point sensor requests through client, checking each
// response, and returns this process's CPU time meanwhile and the points
// written.
func benchWrites(b *testing.B, client tributaryv1.WriteServiceClient) (cpu time.Duration, points float64) {
	gen, err := workload.NewSensor(workload.SensorOptions{Series: 10_000, StartMs: 1_600_000_000_000, IntervalMs: 1000, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	reqs := gen.Requests(100, 100)
	ctx := context.Background()
	cpu0, _ := nodeproc.SelfCPU()
	i := 0
	for b.Loop() {
		r := reqs[i%len(reqs)]
		i++
		r.Next(100)
		resp, err := client.Write(ctx, r.Msg)
		if err != nil {
			b.Fatal(err)
		}
		if err := nodeclient.CheckWrite(resp, r.Points()); err != nil {
			b.Fatal(err)
		}
	}
	cpu1, _ := nodeproc.SelfCPU()
	return cpu1 - cpu0, float64(b.N) * benchPointsPerRequest
}

func TestShapeProblems(t *testing.T) {
	for name, c := range map[string]struct {
		series, batch, perSeries, clients int
		want                              int
	}{
		"good":               {100, 1000, 10, 4, 0},
		"no series":          {0, 1000, 10, 4, 1},
		"batch below series": {100, 5, 10, 4, 1},
		"everything wrong":   {0, -1, 0, 0, 4},
	} {
		if got := ShapeProblems(c.series, c.batch, c.perSeries, c.clients); len(got) != c.want {
			t.Errorf("%s: %v, want %d problems", name, got, c.want)
		}
	}
}
