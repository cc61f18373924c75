package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/replicator"
)

// Bad invocations of `node restore` say what is wrong, and a node does not
// start on a directory whose restore did not finish.
func TestNodeRestore_BadInvocationsSayWhatIsWrong(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	marked := t.TempDir()
	if err := os.WriteFile(filepath.Join(marked, replicator.RestoreMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	target := []string{"--replicate-to", "127.0.0.1:1", "--replicate-insecure"}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no node id", append([]string{"node", "restore", "--data-dir", t.TempDir()}, target...), 2, "--node-id is required"},
		{"no coordinators", []string{"node", "restore", "--node-id", "pi", "--data-dir", t.TempDir()}, 2, "--replicate-to is required"},
		{"negative since", append([]string{"node", "restore", "--node-id", "pi", "--since", "-1h"}, target...), 2, "must not be negative"},
		{"not empty", append([]string{"node", "restore", "--node-id", "pi", "--data-dir", full}, target...), 1, "not empty"},
		{"nobody answers", append([]string{"node", "restore", "--node-id", "pi", "--data-dir", filepath.Join(t.TempDir(), "d")}, target...), 1, "no coordinator answered"},
		{"node on an unfinished restore", []string{"node", "--data-dir", marked, "--listen", "127.0.0.1:0", "--http-listen", ""}, 1, "run tributary node restore again"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(c.args, &out, &errOut)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, c.code, errOut.String())
			}
			if !strings.Contains(out.String()+errOut.String(), c.want) {
				t.Fatalf("output does not mention %q:\n%s%s", c.want, out.String(), errOut.String())
			}
		})
	}
}

// `node restore` with the node's own flags brings its points back from a
// coordinator and prints its summary; the node then opens with them.
func TestNodeRestore_BringsTheHistoryBack(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cluster := l.Addr().String()
	l.Close()
	c, err := coordinator.Open(coordinator.Options{NodeID: "c1", RaftID: 1, DataDir: t.TempDir(),
		ClusterListen: cluster, IntakeListen: "127.0.0.1:0", Insecure: true, TickInterval: 20 * time.Millisecond,
		Peers: []coordinator.Peer{{RaftID: 1, NodeID: "c1", Addr: cluster}}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Stop(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "pi")
	no := node.Options{DataDir: dir, NodeID: "pi", WALSegmentAge: 20 * time.Millisecond, FlushInterval: 10 * time.Millisecond, Logger: log}
	ro := replicator.Options{Targets: []string{c.IntakeAddr()}, Insecure: true, CursorPath: filepath.Join(dir, "replication.cursor"),
		Logger: log, BackoffInitial: 10 * time.Millisecond, PollInterval: 10 * time.Millisecond}
	ship, err := newShipping(&ro, &no)
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(no)
	if err != nil {
		t.Fatal(err)
	}
	ship.start(n, log)
	b := model.Batch{Labels: []labels.Label{{Name: "__name__", Value: "temp"}}}
	now := time.Now().UnixMilli()
	for i := range 1000 {
		b.Ts, b.Vs = append(b.Ts, now-int64(999-i)*60_000), append(b.Vs, float64(i))
	}
	if res, err := n.Write(context.Background(), []model.Batch{b}); err != nil || res.Accepted != 1000 {
		t.Fatalf("write: %+v, %v", res, err)
	}
	last := n.WALSegments()[len(n.WALSegments())-1].Seq
	for ship.s.Stats().AckedThrough < last {
		if ctx.Err() != nil {
			t.Fatal("the coordinator never acknowledged the points")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ship.stop()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	code := run([]string{"node", "restore", "--node-id", "pi", "--data-dir", dir, "--replicate-to", c.IntakeAddr(), "--replicate-insecure",
		"--listen", "127.0.0.1:7070", "--head-max-bytes", "8388608", "--log-level", "warn"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut.String())
	}
	var sum restoreSummary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("summary %q: %v", out.String(), err)
	}
	if sum.NodeID != "pi" || sum.Coordinator != "c1" || sum.RawPoints != 1000 || sum.HeldPoints != 1000 || sum.NextSeq != last+1 {
		t.Fatalf("summary %+v, want 1000 points and next sequence %d", sum, last+1)
	}
	n, err = node.Open(node.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.NodeID() != "pi" {
		t.Fatalf("restored node id %q", n.NodeID())
	}
	if err := n.Flush(); err != nil {
		t.Fatal(err)
	}
	if pts, err := n.StoredPoints(); err != nil || pts != 1000 {
		t.Fatalf("restored node holds %d points (%v), want 1000", pts, err)
	}
}
