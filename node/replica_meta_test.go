package node_test

import (
	"bytes"
	"errors"
	"testing"

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
	if err := n.PutReplicaMeta("seg.b", []byte{1}); !errors.Is(err, node.ErrClosed) {
		t.Fatalf("put after Close: %v, want ErrClosed", err)
	}
	n = mustOpen(t, testOptions(t, dir))
	defer n.Close()
	got, ok, err := n.GetReplicaMeta("seg.a")
	if err != nil || !ok || !bytes.Equal(got, []byte{4}) {
		t.Fatalf("after restart: %v, %v, %v; want [4]", got, ok, err)
	}
}
