package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/replicator"
)

const restoreUsage = `Usage: tributary node restore --node-id ID --data-dir DIR --replicate-to ADDRS [TLS flags] [flags]

Brings the history of node ID back from the coordinators into the empty directory DIR (a replaced disk), then exits.
Start the node afterwards with ` + "`tributary node`" + ` and the same flags. Prints a JSON summary.

Flags:`

// runNodeRestore is `tributary node restore`: a node whose disk was
// replaced takes its history back from the coordinators into an empty
// data directory, then exits; `tributary node` with the same flags starts
// it. It is a command of its own rather than a flag of `tributary node`
// so that it runs once, when an operator asks for it, and reports what it
// did before the node serves: a flag left in a service definition would
// otherwise make every restart try again (and be refused, the directory
// no longer being empty), and a node that started serving before its
// history was back would answer queries short.
//
// It accepts every flag of `tributary node` (the node's sizing,
// retention, replication and TLS flags are used; listening and
// monitoring flags are ignored), so the node's own command line works
// with `restore` inserted after `node`, plus the restore flags below.
func runNodeRestore(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("node restore", stderr, restoreUsage)
	var o node.Options
	nf := nodeFlags(fs, &o)
	var rf replicateFlags
	rf.register(fs)
	// Accepted so that the node's command line can be reused; not used.
	var sf serveFlags
	sf.register(fs)
	var smf selfMonitorFlags
	smf.register(fs)
	fs.Bool("ignore-fleet-config", false, "accepted and ignored (a flag of tributary node)")
	fs.Bool("query-tunnel", true, "accepted and ignored (a flag of tributary node)")
	since := fs.Duration("since", 0, "restore only data newer than this, e.g. 720h (0: everything the cloud holds); rollups are restored in whole UTC days")
	rawSince := fs.Duration("raw-since", 0, "raw points only this far back, from the start of that UTC day (older periods come back as hourly and daily rollups); 0: raw points as far back as the cloud keeps them")
	fileBytes := fs.Int64("restore-file-bytes", replicator.DefaultRestoreFileBytes, "largest file of raw points received at a time, uncompressed (64 KiB to 64 MiB; a restore needs about three times this in memory)")
	log, err := nf.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	switch {
	case o.NodeID == "":
		return fmt.Errorf("%w: --node-id is required: the id the coordinators know this node by", errUsage)
	case rf.targets == "":
		return fmt.Errorf("%w: --replicate-to is required: the coordinators to restore from", errUsage)
	case *since < 0 || *rawSince < 0:
		return fmt.Errorf("%w: --since and --raw-since must not be negative", errUsage)
	}
	ro, err := rf.options(o.DataDir, log)
	if err != nil {
		return err
	}
	o.Logger = log
	now := time.Now()
	ago := func(d time.Duration) int64 {
		if d == 0 {
			return 0
		}
		return now.Add(-d).UnixMilli()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := replicator.Restore(ctx, replicator.RestoreOptions{
		Targets: ro.Targets, TLS: ro.TLS, Insecure: ro.Insecure, Node: o, CursorPath: ro.CursorPath,
		StartMs: ago(*since), RawStartMs: ago(*rawSince), MaxFileBytes: *fileBytes, Logger: log,
	})
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(restoreSummary{
		NodeID: o.NodeID, Coordinator: res.Coordinator, StartedOver: res.StartedOver,
		NextSeq: res.NextSeq, AckedThrough: res.AckedThrough, MissingSegments: res.MissingSegments,
		HeldPoints: res.HeldPoints, GapSegments: res.GapSegments, GapPoints: res.GapPoints,
		From: msTime(res.MinTimeMs), RawFrom: msTime(res.RawStartMs), To: msTime(res.MaxTimeMs),
		Files: res.Files, RawPoints: res.RawPoints, RollupSeries: res.RollupSeries, RollupPacks: res.RollupPacks,
		Bytes: res.Bytes, Seconds: res.Took.Seconds(),
	})
}

// restoreSummary is the JSON line `tributary node restore` prints.
type restoreSummary struct {
	NodeID          string  `json:"node_id"`
	Coordinator     string  `json:"coordinator"`
	StartedOver     bool    `json:"started_over"`
	NextSeq         uint64  `json:"next_seq"`
	AckedThrough    uint64  `json:"acked_through"`
	MissingSegments uint64  `json:"missing_segments"`
	HeldPoints      uint64  `json:"held_points"`
	GapSegments     uint64  `json:"gap_segments"`
	GapPoints       int64   `json:"gap_points"`
	From            string  `json:"from,omitempty"`
	RawFrom         string  `json:"raw_from,omitempty"`
	To              string  `json:"to,omitempty"`
	Files           int64   `json:"files"`
	RawPoints       int64   `json:"raw_points"`
	RollupSeries    int64   `json:"rollup_series"`
	RollupPacks     int64   `json:"rollup_packs"`
	Bytes           int64   `json:"bytes"`
	Seconds         float64 `json:"seconds"`
}

func msTime(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}
