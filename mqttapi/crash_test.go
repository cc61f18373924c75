package mqttapi

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// The kill -9 test re-runs this test binary as a node process with an
// MQTT adapter (selected by these environment variables) so that it can
// be killed with SIGKILL.
const (
	childEnv       = "TRIBUTARY_MQTT_CHILD_DIR"
	childBrokerEnv = "TRIBUTARY_MQTT_CHILD_BROKER"
	crashClientID  = "crash-node"
)

var crashSub = Subscription{Topic: "crash/+writer", Format: FormatLineProtocol, Precision: "ms"}

func runChild(dir, brokerURL string) {
	n, err := node.Open(node.Options{
		DataDir:          dir,
		HeadChunkSamples: 32,
		FlushInterval:    20 * time.Millisecond,
		WALSegmentBytes:  64 << 10,
		WALSegmentAge:    50 * time.Millisecond,
	})
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(1)
	}
	var once sync.Once
	o := Options{Broker: brokerURL, ClientID: crashClientID, Subscriptions: []Subscription{crashSub},
		RetryInitial: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		onSubscribed: func() { once.Do(func() { fmt.Println("READY") }) }}
	a, err := New(n, o)
	if err != nil {
		fmt.Println("adapter:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	a.Run(ctx) // until killed
}

func startCrashChild(t *testing.T, dir, brokerURL string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, childBrokerEnv+"="+brokerURL)
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
		if sc.Text() == "READY" {
			go func() {
				for sc.Scan() {
				}
			}()
			return cmd
		}
		t.Logf("child: %s", sc.Text())
	}
	cmd.Process.Kill()
	cmd.Wait()
	t.Fatal("child node did not start")
	return nil
}

// TestAdapter_KillNineLosesAndDuplicatesNothing publishes a stream of
// messages while the node process ingesting them is killed with SIGKILL
// at random moments and restarted; a ledger holds every message the
// broker acknowledged to the publisher. At the end every point of the
// ledger is in the node with its value, and nothing else is: the raw
// points and the hourly rollups' counts equal the ledger's.
func TestAdapter_KillNineLosesAndDuplicatesNothing(t *testing.T) {
	cycles := 4
	if testing.Short() {
		cycles = 2
	}
	br := startBroker(t)
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d, %d kill cycles", seed, cycles)
	rng := rand.New(rand.NewPCG(seed, 2))

	// The first child makes the session (and its subscription) before
	// anything is published.
	child := startCrashChild(t, dir, br.url())
	pub := newPublisher(t, br.url(), "crash-pub")
	const writers, linesPerMessage = 2, 10
	start := time.Now().Add(-30 * time.Minute).Truncate(time.Hour).UnixMilli()
	if time.Now().UnixMilli()-start > 55*60*1000 {
		start += 5 * 60 * 1000
	}
	ledger := map[string]float64{}
	var mu sync.Mutex
	stopPub := make(chan struct{})
	var wg sync.WaitGroup
	messages := 0
	for w := range writers {
		wg.Go(func() {
			ts := start
			for {
				select {
				case <-stopPub:
					return
				default:
				}
				var b strings.Builder
				sent := map[string]float64{}
				for range linesPerMessage {
					v := float64(ts%100000) / 4
					fmt.Fprintf(&b, "load v=%g %d\n", v, ts)
					sent[fmt.Sprintf(`load_v{writer="w%d"}@%d`, w, ts)] = v
					ts++
				}
				if err := pub.tryPublish(fmt.Sprintf("crash/w%d", w), []byte(b.String())); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				maps.Copy(ledger, sent)
				messages++
				mu.Unlock()
			}
		})
	}
	for c := range cycles {
		time.Sleep(time.Duration(150+rng.IntN(500)) * time.Millisecond)
		child.Process.Kill()
		child.Wait()
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond) // published meanwhile: queued
		if c < cycles-1 {
			child = startCrashChild(t, dir, br.url())
		}
	}
	close(stopPub)
	wg.Wait()

	// The node comes back one last time, in this process, and drains the
	// session.
	n := openNode(t, dir)
	defer n.Close()
	r := startAdapter(t, n, Options{Broker: br.url(), ClientID: crashClientID, Subscriptions: []Subscription{crashSub}})
	got := waitPoints(t, n, `{__name__="load_v"}`, len(ledger))
	r.stop(t)
	lost := 0
	for k, v := range ledger {
		if gv, ok := got[k]; !ok || gv != v {
			lost++
			if lost <= 5 {
				t.Errorf("published point %s=%v missing or wrong (got %v, present %v)", k, v, gv, ok)
			}
		}
	}
	if lost > 0 || len(got) != len(ledger) {
		t.Fatalf("%d of %d published points lost; node holds %d points", lost, len(ledger), len(got))
	}
	// Stored once: after a flush, the hourly rollups (computed from the
	// stored samples) count exactly the ledger's points.
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	ms, _ := labels.ParseSelector(`{__name__="load_v"}`)
	var counted float64
	_, err := n.Query(context.Background(), model.Query{Matchers: ms, Start: start - start%3_600_000, End: time.Now().Add(2 * time.Hour).UnixMilli(),
		Mode: model.ModeDownsample, Step: 3_600_000, Downsample: rollup.FuncCount}, func(s model.Series) error {
		for _, v := range s.Vs {
			counted += v
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if int(counted) != len(ledger) {
		t.Fatalf("rollups count %v points, the ledger %d", counted, len(ledger))
	}
	t.Logf("%d messages (%d points) published across %d kills: all stored, once", messages, len(ledger), cycles)
}
