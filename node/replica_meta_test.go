package node_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/tributarydb/tributary/model"
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
