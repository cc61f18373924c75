package node_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/wal"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// The crash test re-runs this test binary as a node process (selected by
// this environment variable) so that it can be killed with SIGKILL.
const childEnv = "TRIBUTARY_CRASH_CHILD_DIR"

// childFormatEnv is the child's WAL format version ("1" or "2"; default 2).
const childFormatEnv = "TRIBUTARY_CRASH_CHILD_WAL_FORMAT"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		runChild(dir)
		return
	}
	os.Exit(m.Run())
}

func runChild(dir string) {
	o := node.Options{
		DataDir:          dir,
		HeadChunkSamples: 32,
		FlushInterval:    20 * time.Millisecond,
		WALSegmentBytes:  64 << 10,
		WALSegmentAge:    50 * time.Millisecond,
		// Flush the store and release segments often, so that kills land
		// between unlogged store writes and the store flushes that make
		// them durable.
		StoreFlushWALBytes: 256 << 10,
	}
	if os.Getenv(childFormatEnv) == "1" {
		o.WALFormat = wal.FormatV1
	}
	n, err := node.Open(o)
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(1)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("listen failed:", err)
		os.Exit(1)
	}
	g := grpc.NewServer()
	grpcapi.New(n, grpcapi.Options{}).Register(g)
	fmt.Println("ADDR", lis.Addr().String())
	g.Serve(lis) // until killed
}

type ledger struct {
	mu    sync.Mutex
	acked map[string]map[int64]float64
}

func (l *ledger) add(series string, ts []int64, vs []float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.acked[series] == nil {
		l.acked[series] = map[int64]float64{}
	}
	for i, t := range ts {
		l.acked[series][t] = vs[i]
	}
}

// TestNode_KillNineLosesNoAcknowledgedPoint kills a node process with
// SIGKILL at random moments while several clients write, restarts it, and
// finally checks that every acknowledged point is there with its value.
func TestNode_KillNineLosesNoAcknowledgedPoint(t *testing.T) {
	cycles := 6
	if !testing.Short() && os.Getenv("TRIBUTARY_CRASH_CYCLES") != "" {
		fmt.Sscan(os.Getenv("TRIBUTARY_CRASH_CYCLES"), &cycles)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d kill cycles", seed, cycles)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	led := &ledger{acked: map[string]map[int64]float64{}}
	const writers = 4
	next := make([]int64, writers)                       // next timestamp per writer, continues across cycles
	start := time.Now().Add(-24 * time.Hour).UnixMilli() // room for ~86 M points a writer
	for w := range next {
		next[w] = start
	}
	for cycle := 0; cycle < cycles; cycle++ {
		// Cycles alternate the WAL format: each start replays the torn
		// tail of the other format's segments as well as its own.
		cmd, addr := startChild(t, dir, childFormatEnv+"="+fmt.Sprint(1+cycle%2))
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		client := pb.NewWriteServiceClient(conn)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for ctx.Err() == nil {
					series := fmt.Sprintf("w%d", w)
					var ts []int64
					var vs []float64
					for k := 0; k < 50; k++ {
						ts = append(ts, next[w])
						vs = append(vs, float64(next[w]%100000)/10)
						next[w]++
					}
					req := &pb.WriteRequest{Batches: []*pb.SeriesBatch{{
						Series:       &pb.Series{Labels: []*pb.Label{{Name: "__name__", Value: "crash"}, {Name: "writer", Value: series}}},
						TimestampsMs: ts, Values: vs,
					}}}
					resp, err := client.Write(ctx, req)
					if err != nil {
						continue // not acknowledged; timestamps are not reused
					}
					if resp.Accepted != int64(len(ts)) {
						t.Errorf("accepted %d of %d; first rejection: %v", resp.Accepted, len(ts), resp.Rejections[0])
						return
					}
					led.add(series, ts, vs)
				}
			}(w)
		}
		time.Sleep(time.Duration(50+rng.IntN(400)) * time.Millisecond)
		cmd.Process.Kill()
		cmd.Wait()
		cancel()
		wg.Wait()
		conn.Close()
	}
	n := mustOpen(t, node.Options{DataDir: dir})
	defer n.Close()
	led.check(t, n, `crash`, start)
}

// check reads every series of metric back from n and requires each
// acknowledged point with its value.
func (l *ledger) check(t *testing.T, n *node.Node, metric string, start int64) {
	t.Helper()
	got := map[string]map[int64]float64{}
	_, err := n.Query(context.Background(), model.Query{
		Matchers: sel(t, metric), Start: start, End: time.Now().Add(24 * time.Hour).UnixMilli(), Mode: model.ModeRaw,
	}, func(s model.Series) error {
		m := map[int64]float64{}
		for i, ts := range s.Ts {
			m[ts] = s.Vs[i]
		}
		got[s.Labels.Get("writer")] = m
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	total, lost := 0, 0
	for series, pts := range l.acked {
		for ts, v := range pts {
			total++
			if gv, ok := got[series][ts]; !ok || gv != v {
				lost++
				if lost <= 5 {
					t.Errorf("acknowledged point %s@%d=%v missing or wrong (got %v, present %v)", series, ts, v, gv, ok)
				}
			}
		}
	}
	if total == 0 {
		t.Fatal("no write was acknowledged; the test proved nothing")
	}
	t.Logf("%d acknowledged points checked, %d lost", total, lost)
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged points lost", lost, total)
	}
}

func startChild(t *testing.T, dir string, env ...string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"="+dir), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "ADDR "); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return cmd, addr
		}
		t.Logf("child: %s", sc.Text())
	}
	cmd.Process.Kill()
	cmd.Wait()
	t.Fatalf("child node did not start")
	return nil, ""
}
