package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tributarydb/tributary/internal/vfs"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
)

func TestReplicaMeta_SurvivesRestartAndIsSeparateFromNodeMeta(t *testing.T) {
	dir := t.TempDir()
	n := mustOpen(t, testOptions(t, dir))
	if _, ok, err := n.GetReplicaMeta("seg.a"); ok || err != nil {
		t.Fatalf("fresh node: GetReplicaMeta = %v, %v; want nothing", ok, err)
	}
	if err := n.PutReplicaMeta("seg.a", []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := n.PutReplicaMeta("seg.a", []byte{4}); err != nil { // overwrite
		t.Fatal(err)
	}
	// The node's own meta keys are not reachable through the replica prefix.
	if _, ok, _ := n.GetReplicaMeta("wal.flushed_through"); ok {
		t.Fatal("a node meta key is visible as a replica record")
	}
	if err := n.PutReplicaMeta("", []byte{1}); err == nil {
		t.Fatal("empty key accepted")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.PutReplicaMeta("seg.b", []byte{1}); !errors.Is(err, model.ErrClosed) {
		t.Fatalf("put after Close: %v, want ErrClosed", err)
	}
	n = mustOpen(t, testOptions(t, dir))
	defer n.Close()
	got, ok, err := n.GetReplicaMeta("seg.a")
	if err != nil || !ok || !bytes.Equal(got, []byte{4}) {
		t.Fatalf("after restart: %v, %v, %v; want [4]", got, ok, err)
	}
}

// TestReplicaMeta_ScanAndDeleteByPrefix: a scan sees exactly the records
// under its prefix, in key order, keys as they were put (node meta never
// shows); deleting a prefix removes those and only those, durably.
func TestReplicaMeta_ScanAndDeleteByPrefix(t *testing.T) {
	dir := t.TempDir()
	n := mustOpen(t, testOptions(t, dir))
	keys := []string{"seg.a\x00\x01", "seg.a\x00\x02", "seg.ab\x00\x01", "rng.a\x00\x01", "seg.b\x00\xff", "seg.a\xff"}
	for i, k := range keys {
		if err := n.PutReplicaMeta(k, []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	scan := func(prefix string) []string {
		t.Helper()
		var got []string
		err := n.ScanReplicaMeta(prefix, func(k string, v []byte) error {
			got = append(got, k+"="+string('0'+rune(v[0])))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got, want := scan("seg.a\x00"), []string{"seg.a\x00\x01=0", "seg.a\x00\x02=1"}; !slices.Equal(got, want) {
		t.Fatalf("scan seg.a\\0 = %q, want %q", got, want)
	}
	if got := scan(""); len(got) != len(keys) || !slices.IsSorted(got) {
		t.Fatalf("scan of everything = %q, want the %d records in order and no node meta", got, len(keys))
	}
	stop := errors.New("stop")
	calls := 0
	if err := n.ScanReplicaMeta("seg.", func(string, []byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("scan with fn failing = %v after %d calls; want the error as is after 1", err, calls)
	}
	if err := n.DeleteReplicaMetaPrefix("seg.a\x00", "nothing."); err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteReplicaMeta("rng.a\x00\x01"); err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteReplicaMetaPrefix(""); err == nil {
		t.Fatal("deleting the empty prefix (everything) was accepted")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.DeleteReplicaMeta("seg.ab\x00\x01"); !errors.Is(err, model.ErrClosed) {
		t.Fatalf("delete after Close: %v, want ErrClosed", err)
	}
	n = mustOpen(t, testOptions(t, dir))
	defer n.Close()
	if got, want := scan(""), []string{"seg.ab\x00\x01=2", "seg.a\xff=5", "seg.b\x00\xff=4"}; !slices.Equal(got, want) {
		t.Fatalf("after deletes and a restart: %q, want %q", got, want)
	}
	if _, ok, _ := n.GetReplicaMeta("wal.flushed_through"); ok {
		t.Fatal("a node meta key is visible as a replica record")
	}
}

// TestReplicaMeta_PutManyInOneBatch: PutReplicaMetas stores all its
// records or none (an empty key refuses the whole batch), the later of
// two with one key wins, and they survive a restart.
func TestReplicaMeta_PutManyInOneBatch(t *testing.T) {
	dir := t.TempDir()
	n := mustOpen(t, testOptions(t, dir))
	if err := n.PutReplicaMetas([]node.ReplicaMetaRecord{{"x.1", []byte{1}}, {"", []byte{2}}}); err == nil {
		t.Fatal("a batch with an empty key was accepted")
	}
	if _, ok, _ := n.GetReplicaMeta("x.1"); ok {
		t.Fatal("a refused batch stored a record")
	}
	if err := n.PutReplicaMetas(nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	recs := []node.ReplicaMetaRecord{{"x.1", []byte{1}}, {"x.2", []byte{2}}, {"x.1", []byte{3}}}
	if err := n.PutReplicaMetas(recs); err != nil {
		t.Fatal(err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := n.PutReplicaMetas(recs); !errors.Is(err, model.ErrClosed) {
		t.Fatalf("put after Close: %v, want ErrClosed", err)
	}
	n = mustOpen(t, testOptions(t, dir))
	defer n.Close()
	var got []string
	if err := n.ScanReplicaMeta("x.", func(k string, v []byte) error {
		got = append(got, fmt.Sprintf("%s=%d", k, v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"x.1=[3]", "x.2=[2]"}; !slices.Equal(got, want) {
		t.Fatalf("after a restart: %q, want %q", got, want)
	}
}

// TestReplicaMeta_AcknowledgedRecordsSurviveACrash: writers put replica
// records (alone and in batches) while others write points, and the node
// crashes (its WAL's file system loses what was not synced, RocksDB is
// abandoned without flushing its memtables); after each restart every
// record whose put returned is there. (RocksDB's files are on the real
// file system: this catches records not logged in RocksDB's WAL, not a
// missing sync.)
func TestReplicaMeta_AcknowledgedRecordsSurviveACrash(t *testing.T) {
	dir := t.TempDir()
	fs := vfs.NewCrashFS()
	opts := func() node.Options {
		o := testOptions(t, dir)
		o.WALFS = fs
		return o
	}
	var (
		mu    sync.Mutex
		acked []string
	)
	for cycle := range 4 {
		n := mustOpen(t, opts())
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					key := fmt.Sprintf("c%d.w%d.%d", cycle, w, i)
					var err error
					switch w {
					case 0:
						_, err = n.Write(context.Background(), []model.Batch{{Labels: lbl("__name__", "m"), Ts: []int64{base.UnixMilli() + int64(cycle*1e6+i)}, Vs: []float64{1}}})
						key = ""
					case 1:
						err = n.PutReplicaMeta(key, []byte{1})
					default:
						err = n.PutReplicaMetas([]node.ReplicaMetaRecord{{Key: key, Val: []byte{2}}, {Key: key + ".b", Val: []byte{3}}})
					}
					if err != nil || key == "" {
						continue
					}
					mu.Lock()
					acked = append(acked, key)
					mu.Unlock()
				}
			})
		}
		// Crash once this cycle's writers have records acknowledged, in
		// the midst of their puts.
		mu.Lock()
		from := len(acked)
		mu.Unlock()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			mu.Lock()
			k := len(acked) - from
			mu.Unlock()
			if k >= 20 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: %d records acknowledged in 10 s", cycle, k)
			}
		}
		fs = fs.Crash()
		n.CrashForTest()
		close(stop)
		wg.Wait()
	}
	n := mustOpen(t, opts())
	defer n.Close()
	if len(acked) == 0 {
		t.Fatal("no record was acknowledged")
	}
	for _, k := range acked {
		if _, ok, err := n.GetReplicaMeta(k); !ok || err != nil {
			t.Fatalf("acknowledged record %q lost in a crash (%v)", k, err)
		}
	}
	t.Logf("%d acknowledged records kept", len(acked))
}
