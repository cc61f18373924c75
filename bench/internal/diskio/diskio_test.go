package diskio

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestParseWriteBytes(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want int64
		err  bool
	}{
		{"linux", "rchar: 6976\nwchar: 10\nsyscr: 10\nsyscw: 0\nread_bytes: 4096\nwrite_bytes: 123456\ncancelled_write_bytes: 0\n", 123456, false},
		{"missing", "rchar: 1\n", 0, true},
		{"garbage", "write_bytes: x\n", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseWriteBytes([]byte(tc.in))
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("parseWriteBytes = %d, %v; want %d, error %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func TestDirBytes_CountsAllocatedBlocksNotLength(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "full"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // a hole: no blocks
		t.Fatal(err)
	}
	f.Close()
	n, err := DirBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n < 64<<10 || n > 1<<20 {
		t.Fatalf("DirBytes = %d, want about 64 KiB (the sparse file's length must not count)", n)
	}
}

func TestProbe_CountsThisProcessWrites(t *testing.T) {
	dir := t.TempDir()
	p, err := Begin(os.Getpid(), dir)
	if err != nil {
		t.Skipf("no /proc io accounting: %v", err)
	}
	f, err := os.Create(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := p.Settle(context.Background(), time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.AfterStop(); err != nil {
		t.Fatal(err)
	}
	fig := p.Figures()
	if fig.AtRest < 1<<20 || fig.AfterStop < 1<<20 {
		t.Fatalf("data directory %d / %d bytes, want at least the 1 MiB written", fig.AtRest, fig.AfterStop)
	}
	// tmpfs does not count block-layer writes; a disk does.
	if fig.StorageWrite != 0 && fig.StorageWrite < 1<<20 {
		t.Fatalf("write_bytes grew by %d, want at least the 1 MiB synced", fig.StorageWrite)
	}
	t.Logf("write_bytes +%d, at rest %d", fig.StorageWrite, fig.AtRest)
}

func TestFigures_PerPointRoundsAndIsNaNWithoutPoints(t *testing.T) {
	f := Figures{StorageWrite: 1000, AtRest: 2000, AfterStop: 1, Settle: 1250 * time.Millisecond}
	got := f.PerPoint(3)
	if got.StorageWriteBytesPerPoint != 333.3333 || got.DiskAtRestBytesPerPoint != 666.6667 || got.DiskAfterStopBytesPerPoint != 0.3333 || got.SettleS != 1.3 {
		t.Errorf("per point of 3: %+v", got)
	}
	none := f.PerPoint(0)
	if !math.IsNaN(float64(none.StorageWriteBytesPerPoint)) || !math.IsNaN(float64(none.DiskAtRestBytesPerPoint)) || !math.IsNaN(float64(none.DiskAfterStopBytesPerPoint)) {
		t.Errorf("per point of none: %+v, want NaN figures", none)
	}
}
