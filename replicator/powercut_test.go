package replicator_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/replicator/internal/segsum"
)

// TestShipper_PowerCutNeverTakesBackARelease runs a Shipper whose cursor
// and segment summaries live on a CrashFS (Options.FS) and cuts the power
// at a random operation of those files while segments are shipped and
// acknowledged, tearing what was not fsynced. The node may have deleted
// every segment below the last RetainFrom it was told, so after the
// reboot a new Shipper's RetainFrom must be no lower; and the summaries
// file must open whole.
func TestShipper_PowerCutNeverTakesBackARelease(t *testing.T) {
	c := newCloud(t)
	in := startIntake(t, "coord-a", c)
	for seed := range uint64(8) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			node := fmt.Sprint("pi-", seed)
			const path = "/edge/replication.cursor"
			rng := rand.New(rand.NewPCG(seed, 0x5C))
			fsys := vfs.NewCrashFS()
			if err := fsys.MkdirAll("/edge", 0o755); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var after *vfs.CrashFS
			ops, cutAt := 0, 1+rng.IntN(80)
			cut := func() {
				if after == nil {
					after = fsys.CrashTorn(rng)
				}
			}
			cutDone := func() bool {
				mu.Lock()
				defer mu.Unlock()
				return after != nil
			}

			w := openWAL(t, node)
			o := options(t, path, in.addr)
			o.FS = fsys
			s := newShipper(t, o)
			// Count from here: the cut falls while the Shipper runs.
			fsys.SetFault(func(vfs.Op, string) error {
				mu.Lock()
				defer mu.Unlock()
				if ops++; ops == cutAt {
					cut()
				}
				return nil
			})
			stop := start(t, s, w)
			for i := 0; i < 30 && !cutDone(); i++ {
				w.sealSegment(t, 2, t0+int64(i)*1_000_000)
				seq := sealed(w.l.Segments())[i].Seq
				eventually(t, "the segment released or the power cut", func() bool { return s.RetainFrom() > seq || cutDone() })
			}
			mu.Lock()
			cut() // if the run ended first
			mu.Unlock()
			if err := stop(); err != nil {
				t.Fatalf("Run = %v", err)
			}
			told := s.RetainFrom()

			o.FS = after
			s2 := newShipper(t, o)
			if got := s2.RetainFrom(); got < told {
				t.Fatalf("after the power cut (operation %d) RetainFrom = %d; the node was told %d", cutAt, got, told)
			}
			f, note, err := segsum.Open(after, path+".segments", node)
			if err != nil || note != "" {
				t.Fatalf("summaries after the power cut: note %q, %v", note, err)
			}
			f.Close()
			t.Logf("power cut at operation %d: RetainFrom %d before, %d after", cutAt, told, s2.RetainFrom())
		})
	}
}
