package healbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// edgeRestore is what the SD-card replacement of one edge measured.
type edgeRestore struct {
	edge      string
	bytes     int64 // received by the restore, compressed
	rawPoints int64
	took      time.Duration // the restore command's own wall time
	checked   bool          // the restarted edge answered its whole ledger
}

// restoreSummary is the part of `tributary node restore`'s JSON line the
// benchmark reads.
type restoreSummary struct {
	Bytes     int64   `json:"bytes"`
	RawPoints int64   `json:"raw_points"`
	GapPoints int64   `json:"gap_points"`
	Seconds   float64 `json:"seconds"`
}

// restoreEdge replaces the first edge's SD card once the cloud has healed:
// the edge is killed, its data directory emptied, `tributary node restore`
// (the edge's own command line with `restore` inserted) brings its history
// back from the coordinators, and the edge, started again, must answer
// every point of its ledger itself, asked alone.
func (r *runner) restoreEdge(ctx context.Context) error {
	e := r.f.edges[0]
	_ = e.Kill() // a killed process's exit status is not a failure
	if err := os.RemoveAll(e.Opts.DataDir); err != nil {
		return fmt.Errorf("empty the data directory of %s: %w", e.Name, err)
	}
	if err := os.MkdirAll(e.Opts.DataDir, 0o755); err != nil {
		return fmt.Errorf("make the data directory of %s: %w", e.Name, err)
	}
	args := e.Opts.Args()
	args = append([]string{args[0], "restore"}, args[1:]...)
	cctx, cancel := context.WithTimeout(ctx, r.o.LoadTimeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, r.o.Binary, args...)
	cmd.Env = append(os.Environ(), e.Opts.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("restore %s: %w: %s", e.Name, err, lastLines(stderr.String(), 5))
	}
	took := time.Since(start)
	var sum restoreSummary
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		return fmt.Errorf("restore %s: read its summary %q: %w", e.Name, lines[len(lines)-1], err)
	}
	if sum.GapPoints != 0 {
		return fmt.Errorf("restore %s: the cloud declared %d points it does not hold", e.Name, sum.GapPoints)
	}
	r.m.restore = &edgeRestore{edge: e.Name, bytes: sum.Bytes, rawPoints: sum.RawPoints, took: took}
	if err := e.Start(ctx); err != nil {
		return err
	}
	conn, err := dial(e.grpc)
	if err != nil {
		return err
	}
	defer conn.Close()
	l := r.ledgers[e.Name]
	first, last := l.span()
	qctx, qcancel := context.WithTimeout(ctx, 5*time.Minute)
	defer qcancel()
	ans, _, err := queryFront(qctx, pb.NewQueryServiceClient(conn), e.Name, first, last)
	if err != nil {
		return fmt.Errorf("%s after its restore: %w", e.Name, err)
	}
	vd := l.check(ans, first, last)
	r.m.lost += vd.lost
	r.m.duplicated += vd.duplicated
	if !vd.ok() {
		r.m.wrongFinal++
		return fmt.Errorf("%s after its restore, asked alone: %v", e.Name, vd)
	}
	r.m.restore.checked = true
	return nil
}

// lastLines is the last n lines of s, for an error.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
