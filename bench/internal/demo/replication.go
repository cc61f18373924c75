package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	"github.com/tributarydb/tributary/bench/internal/report"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// ReplicationOptions configure WaitReplicated.
type ReplicationOptions struct {
	// FleetURL is a coordinator's GET /api/v1/fleet.
	FleetURL string
	// Points is how many points the edges acknowledged: the wait ends when
	// the cloud holds exactly that many.
	Points int64
	// Timeout bounds the wait (segments are sealed every few seconds).
	Timeout  time.Duration
	Location *time.Location
	Out      io.Writer
}

// fleet is the part of the coordinator's fleet answer the demo reads.
type fleet struct {
	Coordinator string `json:"coordinator"`
	Raft        struct {
		Leader uint64 `json:"leader"`
		Term   uint64 `json:"term"`
	} `json:"raft"`
	Series int `json:"series"`
	Nodes  []struct {
		ID              string   `json:"id"`
		Role            string   `json:"role"`
		Replicas        []string `json:"replicas"`
		Series          int      `json:"series"`
		AckedThrough    uint64   `json:"acked_through"`
		WatermarkTimeMs int64    `json:"watermark_time_ms"`
		HeldPoints      int64    `json:"held_points"`
		Gaps            []struct {
			Points int64 `json:"points"`
		} `json:"gaps"`
	} `json:"nodes"`
}

// WaitReplicated polls the coordinator until the cloud holds every point
// the edges acknowledged, then prints what it holds per edge. It fails if
// that does not happen within the timeout, or if the cloud holds more.
func WaitReplicated(ctx context.Context, o ReplicationOptions) error {
	w := o.Out
	fmt.Fprintf(w, "\nWaiting until the coordinator holds all %s acknowledged points (GET %s) ... ", report.Int(o.Points), o.FleetURL)
	hc := &http.Client{Timeout: 5 * time.Second}
	t0 := time.Now()
	deadline := t0.Add(o.Timeout)
	var f fleet
	var held int64
	for {
		if err := getJSON(ctx, hc, o.FleetURL, &f); err != nil {
			fmt.Fprintln(w, "failed")
			return err
		}
		held = 0
		for _, n := range f.Nodes {
			held += n.HeldPoints
		}
		if held >= o.Points {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(w, "timed out")
			return fmt.Errorf("after %s the cloud holds %d of %d acknowledged points", o.Timeout, held, o.Points)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Fprintf(w, "done in %.1f s\n\n", time.Since(t0).Seconds())
	tb := report.Table{Header: []string{"edge", "replicas", "series", "segments held", "points held", "gap points", "watermark"},
		RightAlign: []bool{false, false, true, true, true, true, false}}
	for _, n := range f.Nodes {
		if n.Role != "edge" {
			continue
		}
		var gap int64
		for _, g := range n.Gaps {
			gap += max(g.Points, 0)
		}
		reps := ""
		for i, r := range n.Replicas {
			if i > 0 {
				reps += ","
			}
			reps += r
		}
		tb.Rows = append(tb.Rows, []string{n.ID, reps, strconv.Itoa(n.Series), "1.." + strconv.FormatUint(n.AckedThrough, 10),
			report.Int(n.HeldPoints), report.Int(gap), fmtTime(n.WatermarkTimeMs, o.Location, "15:04:05.000")})
	}
	writeIndented(w, tb)
	fmt.Fprintf(w, "   raft leader %d (term %d), %s fleet-wide series in the catalog\n", f.Raft.Leader, f.Raft.Term, report.Int(int64(f.Series)))
	if held != o.Points {
		return fmt.Errorf("the cloud holds %d points but the edges acknowledged %d", held, o.Points)
	}
	fmt.Fprintf(w, "   ✓ every acknowledged point is held by the cloud, none twice\n")
	return nil
}

// AcceptedPoints asks a server (Status) how many points it acknowledged.
func AcceptedPoints(ctx context.Context, addr string, timeout time.Duration) (int64, error) {
	conn, err := nodeclient.Dial(addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	st, err := tributaryv1.NewQueryServiceClient(conn).Status(ctx, &tributaryv1.StatusRequest{})
	if err != nil {
		return 0, fmt.Errorf("status of %s: %w", addr, err)
	}
	return st.GetPointsAcceptedTotal(), nil
}

// WaitFleet waits until a coordinator answers its fleet view, which needs
// a raft leader (a coordinator that just started elects one first).
func WaitFleet(ctx context.Context, url string, timeout time.Duration) error {
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(timeout)
	var f fleet
	for {
		err := getJSON(ctx, hc, url, &f)
		if err == nil && f.Raft.Leader != 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no raft leader behind %s after %s (last error: %v)", url, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
