package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tributarydb/tributary/node"
)

const repairUsage = `Usage: tributary node repair --data-dir DIR [flags]

Checks and repairs the store of a STOPPED node (docs/operations.md,
"Recovering from a damaged store"):

  1. verifies the checksum of every block of every table file of the store;
  2. moves each damaged file to DIR/quarantine/store-<time>/ (never deleted)
     and rebuilds the store's manifest without it;
  3. prints exactly what was lost: per file, its column family, entries and
     key range (time partitions and series for raw data and rollups), and
     records it in the node's loss ledger;
  4. rebuilds the label postings if they were lost, keeps new series ids
     clear of the lost ones, writes back the node's own records, and makes
     the next start replay every WAL segment on disk.

Then start the node: the WAL replay brings back what the WAL holds, and
the node audits the lost ranges, counting the raw points neither the store
nor the WAL holds any more (log line "store repair audit", metric
tributary_node_store_lost_points_total, tributary status). The node is ready
again. --dry-run only checks (exit status 1 when something is damaged).

Flags:`

// runNodeRepair is tributary node repair.
func runNodeRepair(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("node repair", stderr, repairUsage)
	var o node.RepairOptions
	fs.StringVar(&o.DataDir, "data-dir", "./data", "data directory of the stopped node")
	fs.StringVar(&o.NodeID, "node-id", "", "the node's id, recorded if the damage took the store's record of it and no WAL segment names it")
	fs.BoolVar(&o.DryRun, "dry-run", false, "only check: verify every table file and print the result; change nothing")
	format := fs.String("format", "text", "output: text or json")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if err := checkTextOrJSON(*format); err != nil {
		return err
	}
	log, err := newLogger(stderr, *logLevel, "text")
	if err != nil {
		return err
	}
	o.Logger = log
	rep, err := node.Repair(o)
	if perr := printRepair(stdout, *format, rep); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	if o.DryRun && rep.Damaged() {
		return errors.New("the store is damaged: run tributary node repair without --dry-run, with the node stopped")
	}
	return nil
}

// printRepair prints what Repair found and did.
func printRepair(w io.Writer, format string, rep node.RepairReport) error {
	if format == "json" {
		return writeJSON(w, rep)
	}
	damaged := 0
	for _, f := range rep.Files {
		if f.Damage != "" {
			damaged++
		}
	}
	fmt.Fprintf(w, "store of %s: %d table files verified, %d damaged\n", rep.DataDir, len(rep.Files), damaged)
	if rep.OpenError != "" {
		fmt.Fprintf(w, "the store did not open before the repair: %s\n", rep.OpenError)
	}
	if rep.DamageRecord != "" {
		fmt.Fprintf(w, "damage the node recorded: %s\n", rep.DamageRecord)
	}
	for _, f := range rep.Files {
		if f.Damage != "" {
			fmt.Fprintf(w, "  DAMAGED %s (%s, %s, %s entries): %s\n", f.Name, cfOr(f.ColumnFamily), fmtBytes(f.Bytes), commas(f.Entries), f.Damage)
		}
	}
	switch {
	case rep.DryRun:
		fmt.Fprintln(w, "dry run: nothing changed")
		return nil
	case rep.Quarantine == "":
		fmt.Fprintln(w, "nothing to repair")
		if rep.DamageRecord != "" {
			fmt.Fprintln(w, "the damage record was removed: no table file is damaged (the damage was not in one, or was transient); the node is ready at its next start")
		}
		return nil
	}
	fmt.Fprintf(w, "moved to %s (with REPORT.json) and the store rebuilt without them\n", rep.Quarantine)
	if len(rep.Lost) > 0 {
		fmt.Fprintln(w, "lost, recorded in the node's loss ledger:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  RANGE\tFILE\tDATA\tENTRIES\tKEYS")
		for _, r := range rep.Lost {
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", r.ID, r.File, cfOr(r.ColumnFamily), commas(r.Entries), describeRange(r))
		}
		tw.Flush()
	}
	cfs := slices.Sorted(maps.Keys(rep.LostEntries))
	var parts []string
	for _, cf := range cfs {
		parts = append(parts, fmt.Sprintf("%s %s", commas(rep.LostEntries[cf]), cf))
	}
	fmt.Fprintf(w, "entries lost: %s\n", strings.Join(parts, ", "))
	if rep.PostingsRebuilt > 0 {
		fmt.Fprintf(w, "label postings rebuilt from the series dictionary (%d series)\n", rep.PostingsRebuilt)
	}
	if len(rep.CarriedOver) > 0 {
		fmt.Fprintf(w, "written back: %s\n", strings.Join(rep.CarriedOver, ", "))
	}
	if rep.NodeIDLost {
		fmt.Fprintln(w, "WARNING: the store lost its record of the node id and nothing names it: start the node with --node-id")
	}
	fmt.Fprintf(w, "new series take ids from %d on\n", rep.SeriesIDFloor)
	wal := fmt.Sprintf("%d WAL segments", rep.WALSegments)
	if rep.WALPoints > 0 {
		wal += fmt.Sprintf(" with %s points from %s to %s", commas(rep.WALPoints),
			time.UnixMilli(rep.WALMinT).UTC().Format(time.RFC3339), time.UnixMilli(rep.WALMaxT).UTC().Format(time.RFC3339))
	}
	if rep.WALUnreadable > 0 {
		wal += fmt.Sprintf(" (%d not sealed or damaged: sealed or quarantined at the start)", rep.WALUnreadable)
	}
	fmt.Fprintf(w, "next start: replays %s, then audits the lost ranges and counts the points lost (log \"store repair audit\")\n", wal)
	return nil
}

// describeRange says which keys a lost range held.
func describeRange(r node.LostRange) string {
	if !r.KeysKnown {
		return "unknown (the file could not be read): the audit checks every series"
	}
	day := func(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339) }
	switch r.ColumnFamily {
	case "chunks", "rollup_1h", "rollup_1d":
		return fmt.Sprintf("partitions %s to %s, from series id %d in the first to series id %d in the last", day(r.FromMs), day(r.ToMs), r.FirstSeries, r.LastSeries)
	case "series":
		return fmt.Sprintf("series ids %d to %d", r.FirstSeries, r.LastSeries)
	}
	return fmt.Sprintf("%s to %s", r.FirstKey, r.LastKey)
}

func cfOr(cf string) string {
	switch cf {
	case "":
		return "unknown"
	case "chunks":
		return "raw samples"
	case "rollup_1h":
		return "hourly rollups"
	case "rollup_1d":
		return "daily rollups"
	case "series":
		return "series dictionary"
	case "postings":
		return "label postings"
	}
	return cf
}
