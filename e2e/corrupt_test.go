package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// flipBytes inverts n bytes of path from its middle and returns the
// offset.
func flipBytes(t *testing.T, path string, n int) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2*n || n < 1 {
		t.Fatalf("%s has %d bytes, too few to flip %d in its middle", path, len(b), n)
	}
	off := len(b)/2 - n/2
	for i := range n {
		b[off+i] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return int64(off)
}

// TestCorrupt_EdgeCursorBitFlip flips bytes in the edge's replication
// cursor file while the edge is down. The edge must either refuse to start
// with an error that names the damaged cursor, or start and ship without
// losing, duplicating or inventing a point; never resume from a wrong
// position in silence.
func TestCorrupt_EdgeCursorBitFlip(t *testing.T) {
	requireDiskScenarios(t)
	f := startDiskFleet(t, 1, nil)
	f.startLoad()
	time.Sleep(3 * time.Second)
	f.c.Edge.Kill()
	cursorPath := filepath.Join(f.c.Opts.Dir, f.c.Edge.ID, "replication.cursor")
	off := flipBytes(t, cursorPath, 4)
	f.faults = append(f.faults, fmt.Sprintf("4 bytes flipped at offset %d of replication.cursor", off))
	began := time.Now()
	err := f.c.Edge.Start(f.c.Opts.ReadyTimeout)
	if err != nil {
		// Detected: the error must say what is wrong and where.
		if !strings.Contains(err.Error(), "corrupt cursor file") || !strings.Contains(err.Error(), "replication.cursor") {
			f.fatal("%s did not start after the cursor was damaged, without naming it: %v", f.c.Edge.ID, err)
		}
		st := f.stopLoad()
		t.Logf("%s refused to start: %s", f.c.Edge.ID, lastLine(err.Error()))
		t.Logf("summary: load %.0f points/s written of %.0f targeted; faults: %s; %d points acknowledged; detected at start, the edge refuses to run (clear error naming the file); recovery: by an operator",
			float64(st.Acked+st.InDoubt)/st.Elapsed.Seconds(), replTarget, strings.Join(f.faults, ", "), st.Acked)
		return
	}
	logged := f.c.Edge.CountInLog("corrupt cursor")
	t.Logf("%s started %v after the cursor was damaged; lines of its log naming a corrupt cursor: %d", f.c.Edge.ID, time.Since(began).Round(time.Millisecond), logged)
	if logged == 0 {
		t.Errorf("%s started on a damaged cursor file without saying so", f.c.Edge.ID)
	}
	f.faults = append(f.faults, fmt.Sprintf("detected and logged (%d lines)", logged))
	f.recoveries = append(f.recoveries, time.Since(began))
	time.Sleep(2 * time.Second)
	st := f.stopLoad()
	nd := f.waitDrained(int64(st.Acked), 60*time.Second)
	f.requireHeldWithinWritten(nd, st)
	cc := f.checkCloud(nil)
	f.summary(st, cc)
}

// TestCorrupt_CoordinatorRaftLogBitFlip flips bytes in the middle of a
// follower's raft log segment while it is down. The follower must either
// refuse to start with an error that names the damage, or recover (from
// its peers) and agree with them; the cluster keeps every acknowledged
// segment either way.
func TestCorrupt_CoordinatorRaftLogBitFlip(t *testing.T) {
	requireDiskScenarios(t)
	f := startDiskFleet(t, 3, nil)
	f.startLoad()
	time.Sleep(3 * time.Second)
	ctx := context.Background()
	leader, err := f.c.Leader(ctx, 30*time.Second)
	if err != nil {
		f.fatal("%v", err)
	}
	victim := f.c.Coordinators[0]
	if victim == leader {
		victim = f.c.Coordinators[1]
	}
	victim.Kill()
	raftDir := filepath.Join(f.c.Opts.Dir, victim.ID, "raft")
	names, err := os.ReadDir(raftDir)
	if err != nil {
		f.fatal("%v", err)
	}
	var segs []string
	for _, n := range names {
		if strings.HasSuffix(n.Name(), ".rlog") {
			segs = append(segs, n.Name())
		}
	}
	slices.Sort(segs)
	if len(segs) == 0 {
		f.fatal("no raft log segment in %s: %v", raftDir, names)
	}
	// The largest segment holds the entries (the newest may be a boot
	// record only).
	seg := segs[0]
	for _, s := range segs {
		a, _ := os.Stat(filepath.Join(raftDir, s))
		b, _ := os.Stat(filepath.Join(raftDir, seg))
		if a.Size() > b.Size() {
			seg = s
		}
	}
	off := flipBytes(t, filepath.Join(raftDir, seg), 1)
	f.faults = append(f.faults, fmt.Sprintf("1 byte flipped at offset %d of %s's raft/%s (of %d segments)", off, victim.ID, seg, len(segs)))
	began := time.Now()
	err = victim.Start(f.c.Opts.ReadyTimeout)
	outcome := ""
	if err == nil {
		// Started: give it the time to fail or to catch up.
		time.Sleep(3 * time.Second)
	}
	switch {
	case err != nil || !victim.Running():
		msg := fmt.Sprint(err)
		if err == nil {
			msg = victim.LogTail(3)
		}
		if !strings.Contains(strings.ToLower(msg), "corrupt") {
			f.fatal("%s stopped after its raft log was damaged, without saying it is corrupt: %s", victim.ID, msg)
		}
		outcome = "detected at start: the member refuses to run with a clear error; its disk restored by hand, it rejoined"
		t.Logf("%s refused to run: %s", victim.ID, lastLine(msg))
		// The edge's replica set may include the member: its segments
		// wait for it (nothing is lost, the edge keeps them). An
		// operator restores the member's disk; here, flip the bytes back.
		time.Sleep(2 * time.Second)
		victim.Kill()
		if fi, err := os.Stat(filepath.Join(raftDir, seg)); err != nil || fi.Size() < off+1 {
			// The damage was taken for a torn tail and everything from
			// it on was cut: entries this member had made durable (and
			// acknowledged) are gone from its disk.
			st := f.stopLoad()
			f.fatal("%s cut its raft log at the damage (raft/%s: %v bytes now, damage at %d) as if it were a torn tail, destroying entries it had acknowledged; it cannot rejoin without an operator (load %d points acknowledged; %s)",
				victim.ID, seg, sizeOf(fi), off, st.Acked, strings.Join(f.faults, ", "))
		}
		flipBack(t, filepath.Join(raftDir, seg), off, 1)
		if err := victim.Start(f.c.Opts.ReadyTimeout); err != nil {
			f.fatal("%s with its raft log restored: %v", victim.ID, err)
		}
		f.recoveries = append(f.recoveries, time.Since(began))
	default:
		outcome = "the member started and caught up with its peers"
		f.recoveries = append(f.recoveries, time.Since(began))
	}
	time.Sleep(2 * time.Second)
	st := f.stopLoad()
	nd := f.waitDrained(int64(st.Acked), 60*time.Second)
	f.requireHeldWithinWritten(nd, st)
	if victim.Running() {
		requireFleetsAgree(t, f.c)
	}
	cc := f.checkCloud(nil)
	f.faults = append(f.faults, outcome)
	f.summary(st, cc)
}

// flipBack inverts n bytes of path at off again.
func flipBack(t *testing.T, path string, off int64, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		b[off+int64(i)] ^= 0xff
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func sizeOf(fi os.FileInfo) any {
	if fi == nil {
		return "missing"
	}
	return fi.Size()
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
