package raftnode_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/internal/raftnode"
	"github.com/tributarydb/tributary/internal/vfs"
)

// BenchmarkCluster_RegisterSeries measures series registrations per
// second through a 3-member cluster: proposals on the leader, replication,
// the raft log (fsynced on disk, or on the in-memory file system), and
// the catalog on every member. Rounds of 64 concurrent proposals are
// queued before the members run, as concurrent intake requests would be,
// so they coalesce into few raft entries. One op is one series.
func BenchmarkCluster_RegisterSeries(b *testing.B) {
	for _, disk := range []bool{false, true} {
		for _, perCmd := range []int{1, 100} {
			fsName := "memfs"
			if disk {
				fsName = "disk"
			}
			b.Run(fmt.Sprintf("fs=%s/series-per-command=%d", fsName, perCmd), func(b *testing.B) {
				benchRegister(b, disk, perCmd, nil)
			})
		}
	}
}

// BenchmarkCluster_ProposalMetrics is the proposal-heaviest case of
// BenchmarkCluster_RegisterSeries (one series per command, in memory)
// with the members' metrics off (no-op provider) and on (the SDK, as
// tributary coordinator runs it).
func BenchmarkCluster_ProposalMetrics(b *testing.B) {
	b.Run("metrics=off", func(b *testing.B) { benchRegister(b, false, 1, nil) })
	b.Run("metrics=on", func(b *testing.B) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		defer mp.Shutdown(context.Background())
		benchRegister(b, false, 1, mp)
	})
}

func benchRegister(b *testing.B, disk bool, perCmd int, mp metric.MeterProvider) {
	const inflight = 64
	fsFor := func(uint64) vfs.FS { return vfs.NewCrashFS() }
	var dir func(uint64) string
	if disk {
		root := b.TempDir()
		fsFor = func(uint64) vfs.FS { return vfs.OS{} }
		dir = func(id uint64) string { return filepath.Join(root, fmt.Sprint(id)) }
	}
	c := newMemClusterIn(b, 3, fsFor, dir, func(o *raftnode.Options) { o.MeterProvider = mp })
	defer c.closeAll()
	registerEdge(b, c, "pi-1")
	// Commands are built before the timer, from a fixed pattern.
	var cmds [][]byte
	for i := 0; i < b.N; i += perCmd {
		cmds = append(cmds, seriesCmd("pi-1", i, min(perCmd, b.N-i)))
	}
	leader := c.nodes[1]
	b.ReportAllocs()
	b.ResetTimer()
	futures := make([]*raftnode.Future, 0, inflight)
	for i := 0; i < len(cmds); i += inflight {
		futures = futures[:0]
		for _, cmd := range cmds[i:min(i+inflight, len(cmds))] {
			futures = append(futures, leader.ProposeAsync(cmd))
		}
		c.pump()
		for _, f := range futures {
			if _, err := f.Result(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	if got := c.fsms[3].SeriesCount(); got != b.N {
		b.Fatalf("follower holds %d series, want %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "series/s")
	_ = catalog.KindRegisterSeries
}
