package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// loopMount makes a size-byte ext4 image under dir, mounts it (loop) on
// mountpoint and unmounts it when t ends. It skips the test, saying why,
// when this process cannot (not root, no mkfs.ext4 or loop devices).
func loopMount(t *testing.T, dir, mountpoint string, size int64) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED, NOT PASSED: the disk-full scenario mounts a loop file system and needs root")
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPED, NOT PASSED: the disk-full scenario needs %s: %v", tool, err)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skipf("SKIPPED, NOT PASSED: the disk-full scenario needs loop devices: %v", err)
	}
	img := filepath.Join(dir, filepath.Base(mountpoint)+".img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 %s: %v\n%s", img, err, out)
	}
	if err := os.MkdirAll(mountpoint, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mountpoint).CombinedOutput(); err != nil {
		t.Skipf("SKIPPED, NOT PASSED: mount -o loop %s: %v\n%s", img, err, out)
	}
	t.Cleanup(func() {
		var out []byte
		var err error
		for range 20 {
			if out, err = exec.Command("umount", mountpoint).CombinedOutput(); err == nil {
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		t.Errorf("umount %s: %v\n%s", mountpoint, err, out)
	})
}

// fill writes a file at path until the file system is full, and returns
// its size.
func fill(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	for _, chunk := range []int{1 << 20, 64 << 10, 4 << 10, 512} {
		buf := make([]byte, chunk)
		for {
			m, err := f.Write(buf)
			n += int64(m)
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				return n, err
			}
		}
	}
	f.Sync() // may fail with ENOSPC too: the space is taken either way
	return n, nil
}

// fullWrite is one write request of the disk-full scenario.
type fullWrite struct {
	at      time.Time
	latency time.Duration
	code    codes.Code
	msg     string
}

// TestDiskFull_EdgeRefusesThenResumes gives the edge a 64 MiB ext4 data
// directory and fills it while the edge ingests and ships. While it is
// full, writes must fail within 1 s with a retryable code (UNAVAILABLE or
// RESOURCE_EXHAUSTED), and no write may succeed that is not stored. After
// the filler is removed the edge must take writes again by itself (no
// restart), and every acknowledged point must be on the edge and in the
// cloud exactly once.
func TestDiskFull_EdgeRefusesThenResumes(t *testing.T) {
	requireDiskScenarios(t)
	full := envDuration(t, "TRIBUTARY_E2E_DISK_FULL", 10*time.Second)
	dir := t.TempDir()
	loopMount(t, dir, filepath.Join(dir, "edge-1"), 64<<20)
	c, err := cluster.New(cluster.Options{Bin: bin, Dir: dir, Coordinators: 1,
		EdgeArgs: []string{"--replication-backoff-max", "1s"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.KillAll) // before the unmount (cleanups run last first)
	cluster.ReportOnFailure(t, 40, c.Processes()...)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	f := &replFleet{t: t, c: c, startMs: time.Now().UnixMilli() - 1000}
	ledger := cluster.NewLedger()
	conn, err := grpc.NewClient(c.Edge.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// The load: replSeries × replPoints every replInterval, each request
	// recorded with its outcome.
	var (
		mu     sync.Mutex
		writes []fullWrite
	)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	began := time.Now()
	go func() {
		defer close(done)
		next := time.Now().UnixMilli()
		tick := time.NewTicker(replInterval)
		defer tick.Stop()
		for ctx.Err() == nil {
			req := &pb.WriteRequest{}
			for i := range replSeries {
				b := &pb.SeriesBatch{Series: &pb.Series{Labels: []*pb.Label{
					{Name: "__name__", Value: metric}, {Name: cluster.SeriesLabel, Value: cluster.SeriesName(i)}}}}
				for k := range replPoints {
					ts := next + int64(k)
					b.TimestampsMs = append(b.TimestampsMs, ts)
					b.Values = append(b.Values, cluster.Value(cluster.SeriesName(i), ts))
				}
				req.Batches = append(req.Batches, b)
			}
			next += replPoints
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			at := time.Now()
			resp, err := pb.NewWriteServiceClient(conn).Write(rctx, req)
			lat := time.Since(at)
			cancel()
			if err == nil && resp.Accepted != replSeries*replPoints {
				err = fmt.Errorf("%d accepted, %d rejected (%v)", resp.Accepted, resp.Rejected, resp.Rejections)
			}
			for i, b := range req.Batches {
				if err == nil {
					ledger.Ack(cluster.SeriesName(i), b.TimestampsMs, b.Values)
				} else {
					ledger.Doubt(cluster.SeriesName(i), b.TimestampsMs, b.Values)
				}
			}
			if ctx.Err() != nil && status.Code(err) == codes.Canceled {
				// Cut short by the load's own stop, not refused by the
				// edge: in doubt above, and not a write the edge answered.
				break
			}
			mu.Lock()
			writes = append(writes, fullWrite{at: at, latency: lat, code: status.Code(err), msg: fmt.Sprint(err)})
			mu.Unlock()
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}()
	stopLoad := func() time.Duration {
		stop()
		<-done
		return time.Since(began)
	}
	defer stopLoad()

	time.Sleep(3 * time.Second)
	filler := filepath.Join(dir, "edge-1", "filler")
	size, err := fill(filler)
	if err != nil {
		t.Fatalf("fill %s: %v", filler, err)
	}
	fullAt := time.Now()
	t.Logf("the disk is full: %s holds %d MiB", filler, size>>20)
	// Keep it full for a while: the node's own writes (WAL, store) may free
	// and retake space, so top it up.
	for time.Since(fullAt) < full {
		time.Sleep(500 * time.Millisecond)
		top := filler + ".top"
		if _, err := fill(top); err != nil {
			t.Fatalf("fill %s: %v", top, err)
		}
	}
	os.Remove(filler + ".top")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freedAt := time.Now()
	t.Logf("space freed after %v full", freedAt.Sub(fullAt).Round(time.Millisecond))
	// The edge must take writes again by itself.
	firstOKAfter := func(since time.Time, within time.Duration) time.Duration {
		for deadline := time.Now().Add(within); time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			mu.Lock()
			for _, w := range writes {
				if w.at.After(since) && w.code == codes.OK {
					mu.Unlock()
					return w.at.Add(w.latency).Sub(since)
				}
			}
			mu.Unlock()
		}
		return 0
	}
	resumed := firstOKAfter(freedAt, 30*time.Second)
	restarted := ""
	if resumed == 0 {
		// The invariant does not hold; restart the edge so that the
		// rest of the scenario still checks what was acknowledged.
		t.Errorf("the edge took no write within 30 s after the space was freed (it must resume without a restart); its log ends:\n%s", c.Edge.LogTail(8))
		c.Edge.Kill()
		restartAt := time.Now()
		if err := c.Edge.Start(c.Opts.ReadyTimeout); err != nil {
			t.Fatalf("restart %s: %v", c.Edge.ID, err)
		}
		if resumed = firstOKAfter(restartAt, 30*time.Second); resumed == 0 {
			t.Fatalf("the edge took no write within 30 s after a restart either")
		}
		restarted = fmt.Sprintf(" (NOT by itself: only after a restart, which took writes again %v after it)", resumed.Round(time.Millisecond))
		resumed = time.Since(freedAt)
	}
	time.Sleep(3 * time.Second) // load after the recovery
	elapsed := stopLoad()

	// What the writers saw.
	mu.Lock()
	defer mu.Unlock()
	var failedFull, okFull int
	var firstFail, slowest time.Duration
	byCode := map[string]int{}
	var examples []string
	for _, w := range writes {
		if w.code != codes.OK {
			byCode[w.code.String()]++
			if w.code != codes.Unavailable && w.code != codes.ResourceExhausted {
				t.Errorf("write at %v after the fill: %s, want a retryable UNAVAILABLE or RESOURCE_EXHAUSTED: %s", w.at.Sub(fullAt).Round(time.Millisecond), w.code, w.msg)
			}
			if w.latency > time.Second {
				t.Errorf("write at %v after the fill failed only after %v (want within 1 s): %s", w.at.Sub(fullAt).Round(time.Millisecond), w.latency.Round(time.Millisecond), w.msg)
			}
			if len(examples) < 3 {
				examples = append(examples, w.msg)
			}
		}
		if w.at.After(fullAt) && w.at.Before(freedAt) {
			slowest = max(slowest, w.latency)
			if w.code == codes.OK {
				okFull++
			} else {
				if failedFull == 0 {
					firstFail = w.at.Add(w.latency).Sub(fullAt)
				}
				failedFull++
			}
		}
	}
	codesSeen := make([]string, 0, len(byCode))
	for k, v := range byCode {
		codesSeen = append(codesSeen, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(codesSeen)
	written := float64(len(writes)*replSeries*replPoints) / elapsed.Seconds()
	t.Logf("load: %d requests in %v, %.0f points/s written (target %.0f); while full: %d failed, %d succeeded, the first failure %v after the fill, slowest request %v; codes %v; e.g. %q",
		len(writes), elapsed.Round(time.Millisecond), written, replTarget, failedFull, okFull, firstFail.Round(time.Millisecond), slowest.Round(time.Millisecond), codesSeen, examples)
	if written < 0.9*replTarget {
		t.Errorf("INVALID run: the writer held %.0f points/s, below 90%% of its target %.0f", written, replTarget)
	}
	if failedFull == 0 {
		t.Errorf("no write failed while the disk was full for %v: the scenario did not reach a full disk", full)
	}
	t.Logf("resumed %v after the space was freed%s", resumed.Round(time.Millisecond), restarted)

	// Every acknowledged point, on the edge and then in the cloud.
	qctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	er, err := cluster.Check(qctx, c.Edge.GRPC, metric, ledger, f.startMs, time.Now().Add(time.Hour).UnixMilli())
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %v", c.Edge.ID, er)
	if !er.OK() {
		t.Errorf("%s after the disk was full: %v", c.Edge.ID, er)
	}
	// The cloud holds at least every acknowledged point once the edge
	// has shipped its backlog.
	f.w = &cluster.Writer{Ledger: ledger}
	f.waitDrained(int64(ledger.Acked()), 120*time.Second)
	cc := f.checkCloud(nil)
	t.Logf("summary: load %.0f points/s written of %.0f targeted; faults: disk full for %v (%d MiB filler on a 64 MiB ext4), %d writes refused (%s), %d succeeded while full, first refusal %v after the fill, slowest %v; %d points acknowledged; edge: lost %d, duplicated %d, phantom %d; summed over %d coordinator(s): lost %d, duplicated %d, phantom %d; recovery %v after the space was freed%s",
		written, replTarget, full, size>>20, failedFull, strings.Join(codesSeen, " "), okFull, firstFail.Round(time.Millisecond), slowest.Round(time.Millisecond),
		ledger.Acked(), er.Lost, er.Duplicated, er.Phantom+er.WrongValue, len(c.Coordinators), cc.lost, cc.dup, cc.phantom, resumed.Round(time.Millisecond), restarted)
}
