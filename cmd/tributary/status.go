package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/tributarydb/tributary/sdk/go/tributary"
)

const statusUsage = `Usage: tributary status [flags]

Prints a server's state; it doubles as a connection and token check.

When the server is a coordinator (or tributary local), or with --fleet, it
prints the fleet table instead: one row per node of the catalog (node, role,
state, last heartbeat, ingest rate, replication lag, backlog, gaps,
under-replicated segments), the worst first, after a one-line summary. The
table is read from the coordinator's GET /api/v1/fleet (--http-addr) and
completed by asking each edge with an address for its own status
(--probe-edges).

--watch [INTERVAL] refreshes the output every INTERVAL (default 2s) until
interrupted: in place on a terminal, one document after another otherwise.

Flags:`

// statusFlags are the flags of tributary status beyond the connection.
type statusFlags struct {
	format       string
	json         bool
	fleet        bool
	node         bool
	httpAddr     string
	watch        watchFlag
	iterations   int
	probe        bool
	probeTimeout time.Duration
	offlineAfter time.Duration
	behindAfter  time.Duration
}

func (f *statusFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.format, "format", "text", "output: text or json")
	fs.BoolVar(&f.json, "json", false, "output JSON (as --format json)")
	fs.BoolVar(&f.fleet, "fleet", false, "print the fleet table even if the server does not say it is a coordinator")
	fs.BoolVar(&f.node, "node", false, "print the answering server's own state, not the fleet table, even for a coordinator")
	fs.StringVar(&f.httpAddr, "http-addr", "", "the coordinator's HTTP address for the fleet table (default: the host of --addr, its port plus one)")
	f.watch.every = 2 * time.Second
	fs.Var(&f.watch, "watch", "refresh every interval until interrupted (--watch, --watch 5s or --watch=5s; default interval 2s)")
	fs.IntVar(&f.iterations, "iterations", 0, "with --watch: stop after this many refreshes (0: until interrupted)")
	fs.BoolVar(&f.probe, "probe-edges", true, "fleet table: ask each edge with a registered address for its status (backlog, exact lag, ingest rate), with the same token and TLS flags")
	fs.DurationVar(&f.probeTimeout, "probe-timeout", 2*time.Second, "fleet table: time given to each edge's status call")
	fs.DurationVar(&f.offlineAfter, "offline-after", 30*time.Second, "fleet table: a node whose last heartbeat is older than this is offline (heartbeats come every 10s)")
	fs.DurationVar(&f.behindAfter, "behind-after", time.Minute, "fleet table: an edge whose replication lag exceeds this is behind (a healthy edge lags a WAL segment's age, 5s by default, plus an acknowledgement)")
}

func (f *statusFlags) validate() error {
	if f.json {
		f.format = "json"
	}
	if err := checkTextOrJSON(f.format); err != nil {
		return err
	}
	if f.fleet && f.node {
		return fmt.Errorf("%w: --fleet and --node exclude each other", errUsage)
	}
	if f.iterations < 0 {
		return fmt.Errorf("%w: --iterations %d is negative", errUsage, f.iterations)
	}
	if f.probeTimeout <= 0 || f.offlineAfter <= 0 || f.behindAfter <= 0 {
		return fmt.Errorf("%w: --probe-timeout, --offline-after and --behind-after must be positive", errUsage)
	}
	return nil
}

// watchFlag is --watch [INTERVAL]: a boolean flag that also accepts an
// interval (--watch=5s, or --watch 5s as the next argument).
type watchFlag struct {
	on    bool
	every time.Duration
}

func (w *watchFlag) IsBoolFlag() bool { return true }

func (w *watchFlag) String() string {
	if w == nil || !w.on {
		return ""
	}
	return w.every.String()
}

func (w *watchFlag) Set(s string) error {
	switch s {
	case "true":
		w.on = true
		return nil
	case "false":
		w.on = false
		return nil
	}
	d, err := parseDuration(s)
	if err != nil || d <= 0 {
		return fmt.Errorf("want a positive interval such as 2s, got %q", s)
	}
	w.on, w.every = true, d
	return nil
}

// runStatus prints a server's state, or for a coordinator the fleet table;
// it doubles as a connection check.
func runStatus(args []string, stdout, stderr io.Writer) error {
	fs, cf := newClientFlagSet("status", stderr, "give up after this long (per refresh with --watch)", statusUsage)
	var sf statusFlags
	sf.register(fs)
	args, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return err
	} else if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if sf.watch.on && len(args) == 1 {
		// --watch 5s: the flag is boolean, so the interval arrives as an
		// argument.
		if err := sf.watch.Set(args[0]); err != nil {
			return fmt.Errorf("%w: --watch: %v", errUsage, err)
		}
		args = nil
	}
	if len(args) > 0 {
		return fmt.Errorf("%w: status takes no arguments", errUsage)
	}
	if err := sf.validate(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dctx, cancel := context.WithTimeout(ctx, cf.timeout)
	c, err := cf.dial(dctx)
	cancel()
	if err != nil {
		return err
	}
	defer c.Close()
	sv := &statusView{cf: cf, sf: &sf, c: c, out: stdout, tty: isTerminal(stdout)}
	defer sv.close()
	if !sf.watch.on {
		return sv.refresh(ctx, false)
	}
	t := time.NewTicker(sf.watch.every)
	defer t.Stop()
	for i := 1; ; i++ {
		err := sv.refresh(ctx, true)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			// A watched fleet outlives a coordinator's restart: say what
			// failed and try again at the next tick.
			fmt.Fprintf(stderr, "%s: %v\n", time.Now().Format(time.TimeOnly), err)
		}
		if sf.iterations > 0 && i >= sf.iterations {
			return err // the last refresh decides the exit status
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// statusView prints one refresh of tributary status.
type statusView struct {
	cf  *clientFlags
	sf  *statusFlags
	c   *tributary.Client
	out io.Writer
	tty bool
	// fleet is set once the target is known to be a coordinator.
	fleet *fleetWatcher
}

// refresh fetches and prints one view; watching, a terminal is cleared
// first.
func (v *statusView) refresh(ctx context.Context, watching bool) error {
	ctx, cancel := context.WithTimeout(ctx, v.cf.timeout)
	defer cancel()
	st, err := v.c.Status(ctx)
	if err != nil {
		return err
	}
	wantFleet := v.sf.fleet || (!v.sf.node && (st.Role == "coordinator" || st.Role == "local"))
	var print func(io.Writer) error
	if wantFleet {
		if v.fleet == nil {
			if v.fleet, err = newFleetWatcher(v.cf, v.sf); err != nil {
				return err
			}
		}
		fv, err := v.fleet.read(ctx, st)
		if err != nil {
			return err
		}
		print = func(w io.Writer) error { return printFleet(w, v.sf.format, fv) }
	} else {
		print = func(w io.Writer) error { return printNodeStatus(w, v.sf.format, v.c.Addr(), st, v.tty) }
	}
	if watching && v.tty {
		// Home the cursor and clear the screen, then draw: the table
		// refreshes in place.
		fmt.Fprint(v.out, "\x1b[H\x1b[2J")
	}
	return print(v.out)
}

func (v *statusView) close() {
	if v.fleet != nil {
		v.fleet.close()
	}
}

// printNodeStatus prints one server's own state; color: a terminal, where
// an unhealthy store is printed in red.
func printNodeStatus(w io.Writer, format, addr string, st tributary.Status, color bool) error {
	r := st.Replication
	if format == "json" {
		out := map[string]any{
			"node_id": st.NodeID, "role": st.Role, "version": st.Version,
			"series": st.Series, "head_samples": st.HeadSamples,
			"wal_segment_seq": st.WALSegmentSeq, "wal_bytes": st.WALBytes,
			"points_accepted": st.PointsAccepted, "points_rejected": st.PointsRejected,
			"uptime_ms": st.Uptime.Milliseconds(), "corrupt_segments_quarantined": st.CorruptSegmentsQuarantined,
		}
		if r != nil {
			out["replication"] = map[string]any{
				"connected": r.Connected, "coordinator": r.Coordinator, "acked_through": r.AckedThrough,
				"newest_sealed_seq": r.NewestSealedSeq, "lag_seconds": r.Lag.Seconds(), "lag_bytes": r.LagBytes,
				"backlog_segments": r.BacklogSegments, "backlog_bytes": r.BacklogBytes, "gap_segments": r.GapSegments,
				"gap_points": r.GapPoints, "dropped_points": r.DroppedPoints, "backfilled_points": r.BackfilledPoints,
				"bytes_per_point": r.BytesPerPoint, "last_error": r.LastError,
			}
		}
		if h := st.Store; h != nil {
			store := map[string]any{"healthy": h.Healthy, "reason": h.Reason, "writes_refused": h.WritesRefused,
				"damaged": h.Damaged, "quarantined_files": h.QuarantinedFiles, "lost_points": h.LostPoints,
				"unrestored_ranges": h.UnrestoredRanges}
			if !h.Healthy {
				store["error"], store["failing_since"] = h.Error, h.FailingSince.UTC().Format(time.RFC3339)
			}
			out["store"] = store
		}
		return writeJSON(w, out)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, row := range [][2]any{
		{"address", addr}, {"node", st.NodeID}, {"role", st.Role}, {"version", st.Version},
		{"uptime", st.Uptime.Round(time.Second)}, {"series", commas(st.Series)},
		{"unflushed samples", commas(st.HeadSamples)}, {"wal", fmt.Sprintf("segment %d, %s", st.WALSegmentSeq, fmtBytes(st.WALBytes))},
		{"points accepted", commas(st.PointsAccepted)}, {"points rejected", commas(st.PointsRejected)},
		{"corrupt segments quarantined", st.CorruptSegmentsQuarantined},
	} {
		fmt.Fprintf(tw, "%s:\t%v\n", row[0], row[1])
	}
	if h := st.Store; h != nil {
		fmt.Fprintf(tw, "store:\t%s\n", storeLine(h, color))
		if h.QuarantinedFiles > 0 || h.LostPoints > 0 {
			fmt.Fprintf(tw, "store repairs:\t%d files quarantined, %s points lost, %d lost ranges not restored\n",
				h.QuarantinedFiles, commas(h.LostPoints), h.UnrestoredRanges)
		}
	}
	if r != nil {
		link := "disconnected"
		if r.Connected {
			link = "connected to " + r.Coordinator
		}
		for _, row := range [][2]any{
			{"replication", link},
			{"cloud holds through", fmt.Sprintf("segment %d (newest sealed %d)", r.AckedThrough, r.NewestSealedSeq)},
			{"replication lag", fmt.Sprintf("%s, %s", r.Lag.Round(time.Millisecond), fmtBytes(r.LagBytes))},
			{"backlog", fmt.Sprintf("%d segments, %s", r.BacklogSegments, fmtBytes(r.BacklogBytes))},
			{"gaps", fmt.Sprintf("%d segments, %s points (%s dropped, %s backfilled)", r.GapSegments, commas(int64(r.GapPoints)),
				commas(int64(r.DroppedPoints)), commas(int64(r.BackfilledPoints)))},
			{"shipped bytes per point", fmt.Sprintf("%.2f", r.BytesPerPoint)},
		} {
			fmt.Fprintf(tw, "%s:\t%v\n", row[0], row[1])
		}
		if r.LastError != "" {
			fmt.Fprintf(tw, "last replication error:\t%s\n", r.LastError)
		}
	}
	return tw.Flush()
}

// storeLine says how a node's store is: "healthy", or in red on a
// terminal, NOT READY with the reason, since when, and the error.
func storeLine(h *tributary.StoreHealth, color bool) string {
	if h.Healthy {
		return "healthy"
	}
	line := fmt.Sprintf("NOT READY: %s since %s", h.Reason, h.FailingSince.UTC().Format(time.RFC3339))
	switch {
	case h.WritesRefused:
		line += ", writes refused"
	case h.Damaged:
		line += ", repair needed (tributary node repair)"
	}
	line += ": " + h.Error
	if color {
		return "\x1b[1;31m" + line + "\x1b[0m"
	}
	return line
}
