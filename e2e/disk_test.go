package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tributarydb/tributary/e2e/internal/cluster"
	"github.com/tributarydb/tributary/e2e/internal/powerfs"
)

// The disk fault scenarios (power cuts on a FUSE file system, a full
// loop-mounted file system, damaged files) need privileges and minutes:
// they run in make e2e, which sets TRIBUTARY_E2E_DISK=1.
const diskEnv = "TRIBUTARY_E2E_DISK"

// requireDiskScenarios skips the test unless the disk scenarios were asked
// for, with the reason.
func requireDiskScenarios(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: starts processes; skipped under -short")
	}
	if os.Getenv(diskEnv) != "1" {
		t.Skipf("disk fault scenario: run by make e2e (set %s=1 to run it here)", diskEnv)
	}
}

// requireFUSE skips the test, saying why, when FUSE cannot be mounted.
func requireFUSE(t *testing.T) {
	t.Helper()
	if err := powerfs.Available(); err != nil {
		t.Skipf("SKIPPED, NOT PASSED: power-cut scenario needs FUSE: %v", err)
	}
}

// diskFleet is a replication fleet whose chosen processes keep their data
// directory on a power-cut file system.
type diskFleet struct {
	*replFleet
	fs map[string]*powerfs.FS // by process name
}

// startDiskFleet starts coordinators coordinators and one edge (with
// edgeArgs); the data directories of the processes named in onPowerFS are
// powerfs mounts (with torn tails). Everything is killed and unmounted
// when t ends.
func startDiskFleet(t *testing.T, coordinators int, onPowerFS []string, edgeArgs ...string) *diskFleet {
	t.Helper()
	dir := t.TempDir()
	o := cluster.Options{Bin: bin, Dir: dir, Coordinators: coordinators,
		EdgeArgs: append([]string{"--replication-backoff-max", "1s"}, edgeArgs...)}
	c, err := cluster.New(o)
	if err != nil {
		t.Fatal(err)
	}
	f := &diskFleet{replFleet: &replFleet{t: t, c: c}, fs: map[string]*powerfs.FS{}}
	for i, name := range onPowerFS {
		backing := filepath.Join(dir, name+".backing")
		if err := os.MkdirAll(backing, 0o755); err != nil {
			t.Fatal(err)
		}
		pfs, err := powerfs.Mount(backing, filepath.Join(dir, name), powerfs.Options{TornTail: true, Seed: uint64(time.Now().UnixNano()) + uint64(i)})
		if err != nil {
			t.Fatal(err)
		}
		f.fs[name] = pfs
		t.Cleanup(func() {
			c.KillAll()
			if err := pfs.Unmount(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(c.KillAll)
	cluster.ReportOnFailure(t, 30, c.Processes()...)
	start := time.Now()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d coordinator(s) and %s ready in %v (edge flags %q, on powerfs: %q)", len(c.Coordinators), c.Edge.ID,
		time.Since(start).Round(time.Millisecond), o.EdgeArgs, onPowerFS)
	f.w, err = cluster.NewWriter(cluster.WriterOptions{Addr: c.Edge.GRPC, Metric: metric,
		Series: replSeries, PointsPerSeries: replPoints, Interval: replInterval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.w.Close() })
	f.startMs = time.Now().UnixMilli() - 1000
	return f
}

// powerCut kills p with SIGKILL, cuts the power of its file system (what
// it did not sync is forgotten), remounts it and starts p again. It
// returns what the cut forgot and how long p was down.
func (f *diskFleet) powerCut(p *cluster.Process) (powerfs.CutStats, time.Duration) {
	f.t.Helper()
	pfs := f.fs[p.Name]
	if pfs == nil {
		f.fatal("%s is not on a powerfs mount", p.Name)
	}
	began := time.Now()
	p.Kill()
	cs, err := pfs.Cut()
	if err != nil {
		f.fatal("power cut of %s: %v", p.Name, err)
	}
	if err := pfs.Remount(); err != nil {
		f.fatal("power cut of %s: remount: %v", p.Name, err)
	}
	if err := p.Start(f.c.Opts.ReadyTimeout); err != nil {
		f.fatal("power cut of %s: restart: %v", p.Name, err)
	}
	return cs, time.Since(began)
}
