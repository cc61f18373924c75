// Package diskio measures what a node process costs its storage device, for
// the system benchmarks: the bytes it sent to storage (write_bytes of
// /proc/PID/io, which counts the process's threads, RocksDB's background
// flushes and compactions included, at the block layer and after the page
// cache) and the space its data directory occupies (like du: allocated
// blocks, not file lengths).
//
// A Probe follows one load: Begin before the first write, Settle after the
// last one (it waits, with the node still running, and then reads both
// figures), AfterStop once the node has exited cleanly.
//
// Concurrency: a Probe is not safe for concurrent use.
package diskio

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/tributarydb/tributary/bench/internal/report"
)

// DefaultSettle is how long after the load the benchmarks wait, node
// running, before reading the write counter and the data directory size.
const DefaultSettle = 60 * time.Second

// WriteBytes reads write_bytes of /proc/PID/io: the bytes the process has
// caused to be sent to the storage layer so far.
func WriteBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, fmt.Errorf("read io counters of process %d: %w", pid, err)
	}
	return parseWriteBytes(b)
}

func parseWriteBytes(io []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(io))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok || string(bytes.TrimSpace(k)) != "write_bytes" {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse write_bytes %q: %w", v, err)
		}
		return n, nil
	}
	return 0, errors.New("no write_bytes line in /proc/PID/io (kernel without task I/O accounting?)")
}

// DirBytes is the space the files under dir occupy, as du counts it: the
// allocated 512-byte blocks of every regular file and directory.
func DirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while we walked (an obsolete SST, a released segment)
			}
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += int64(st.Blocks) * 512
		} else if info.Mode().IsRegular() {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", dir, err)
	}
	return n, nil
}

// Figures are the storage costs of one load, in bytes.
type Figures struct {
	// StorageWrite is write_bytes from Begin to the end of the settle wait.
	StorageWrite int64
	// AtRest is the data directory at the end of the settle wait, node
	// running.
	AtRest int64
	// AfterStop is the data directory after a clean stop.
	AfterStop int64
	// Settle is how long the node was left running after the load.
	Settle time.Duration
}

// PerPointResult is Figures per point as the benchmarks that load a node
// report them in their JSON lines; a figure over no points is NaN (null).
type PerPointResult struct {
	StorageWriteBytesPerPoint  report.Number `json:"storage_write_bytes_per_point"`   // node write_bytes (/proc/PID/io), load start through SettleS after it
	DiskAtRestBytesPerPoint    report.Number `json:"disk_at_rest_bytes_per_point"`    // du of the data directory SettleS after the load, node running
	DiskAfterStopBytesPerPoint report.Number `json:"disk_after_stop_bytes_per_point"` // du of the data directory after SIGTERM, before compaction
	SettleS                    report.Number `json:"settle_s"`
}

// PerPoint divides each figure by points, to 4 decimals, and gives the
// settle wait in seconds, to 1.
func (f Figures) PerPoint(points int64) PerPointResult {
	div := func(bytes int64) report.Number {
		if points == 0 {
			return report.Number(math.NaN())
		}
		return report.Number(report.Round(float64(bytes)/float64(points), 4))
	}
	return PerPointResult{
		StorageWriteBytesPerPoint:  div(f.StorageWrite),
		DiskAtRestBytesPerPoint:    div(f.AtRest),
		DiskAfterStopBytesPerPoint: div(f.AfterStop),
		SettleS:                    report.Number(report.Round(f.Settle.Seconds(), 1)),
	}
}

// Probe follows one load on one node process and its data directory.
type Probe struct {
	pid     int
	dataDir string
	begin   int64
	figures Figures
}

// Begin reads the node's write counter; call it just before the load.
func Begin(pid int, dataDir string) (*Probe, error) {
	b, err := WriteBytes(pid)
	if err != nil {
		return nil, err
	}
	return &Probe{pid: pid, dataDir: dataDir, begin: b}, nil
}

// Settle waits d with the node running (the load has ended), then reads its
// write counter and the data directory's size. It returns early with
// ctx's error, or with an error if the node exits (exited closes) during
// the wait.
func (p *Probe) Settle(ctx context.Context, d time.Duration, exited <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("settle after the load: %w", ctx.Err())
	case <-exited:
		return errors.New("settle after the load: the node exited")
	}
	w, err := WriteBytes(p.pid)
	if err != nil {
		return err
	}
	size, err := DirBytes(p.dataDir)
	if err != nil {
		return err
	}
	p.figures.StorageWrite, p.figures.AtRest, p.figures.Settle = w-p.begin, size, d
	return nil
}

// AfterStop reads the data directory's size; call it once the node has
// stopped cleanly, before anything else touches the directory.
func (p *Probe) AfterStop() error {
	size, err := DirBytes(p.dataDir)
	if err != nil {
		return err
	}
	p.figures.AfterStop = size
	return nil
}

// Figures returns what the probe measured so far.
func (p *Probe) Figures() Figures { return p.figures }
