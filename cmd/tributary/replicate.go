package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tributarydb/tributary/internal/auth"
	"github.com/tributarydb/tributary/node"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

// replicateFlags are the edge's replication flags (tributary node).
type replicateFlags struct {
	targets          string
	cert, key, ca    string
	insecure         bool
	insecureAnywhere bool
	queryAddr        string
	budgetBytes      int64
	overflow         string
	maxBytesPerSec   int64
	backlogBytesPerS int64
	ackTimeout       time.Duration
	backoffMax       time.Duration
	announceInterval time.Duration
	labels           map[string]string
	compact          bool
}

// labelFlag is a repeatable key=value flag.
type labelFlag struct{ m *map[string]string }

func (f labelFlag) String() string {
	if f.m == nil {
		return ""
	}
	var parts []string
	for k, v := range *f.m {
		parts = append(parts, k+"="+v)
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

func (f labelFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return fmt.Errorf("%q: want name=value", s)
	}
	if *f.m == nil {
		*f.m = map[string]string{}
	}
	if _, dup := (*f.m)[k]; dup {
		return fmt.Errorf("label %q given twice", k)
	}
	(*f.m)[k] = v
	return nil
}

func (f *replicateFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.targets, "replicate-to", "", "comma-separated intake addresses of the cloud coordinators (host:port); empty: no replication")
	fs.StringVar(&f.cert, "replicate-cert", "", "PEM client certificate of this node for the coordinators (mTLS); it must name the node id as its first DNS SAN")
	fs.StringVar(&f.key, "replicate-key", "", "PEM private key for --replicate-cert")
	fs.StringVar(&f.ca, "replicate-ca", "", "PEM CA bundle that signs the coordinators' certificates")
	fs.BoolVar(&f.insecure, "replicate-insecure", false, "ship in plaintext (loopback coordinators only; no identity check)")
	fs.BoolVar(&f.insecureAnywhere, "replicate-insecure-anywhere", false, "with --replicate-insecure: also ship in plaintext to coordinators off loopback (a private test network only: data crosses it in clear text)")
	fs.StringVar(&f.queryAddr, "advertise-query-addr", "", "gRPC address where coordinators can query this node for data newer than the cloud holds (default: none)")
	fs.Int64Var(&f.budgetBytes, "replication-budget-bytes", 1<<30, "disk budget for sealed WAL segments kept until the cloud holds them")
	fs.StringVar(&f.overflow, "replication-overflow", "keep-in-store", "past the budget: keep-in-store (release segments, keep points locally, record a gap), block-writers (refuse writes, retryable) or drop-oldest (counted)")
	fs.Int64Var(&f.maxBytesPerSec, "replication-max-bytes-per-sec", 0, "limit on compressed bytes shipped per second (0: none)")
	fs.Int64Var(&f.backlogBytesPerS, "replication-backlog-bytes-per-sec", 0, "further limit for draining a backlog after an outage (0: none)")
	fs.DurationVar(&f.ackTimeout, "replication-ack-timeout", 30*time.Second, "a stream with something outstanding and no progress for this long is dead (half-open link) and is replaced")
	fs.DurationVar(&f.backoffMax, "replication-backoff-max", time.Minute, "longest wait between reconnection attempts (jittered exponential backoff from 500ms)")
	fs.Var(labelFlag{&f.labels}, "edge-label", "with --replicate-to: a label of this edge, name=value (repeatable, at most 32), sent to the coordinators; the fleet's rule groups select edges by them (tributary cluster rules)")
	fs.DurationVar(&f.announceInterval, "replication-announce-interval", time.Second, "how often new series are announced to the coordinators' catalog ahead of their segments (negative: never; queries then keep asking this node)")
}

// options builds the Shipper options; nil when replication is off.
func (f *replicateFlags) options(dataDir string, log *slog.Logger) (*replicator.Options, error) {
	if f.targets == "" {
		if f.cert != "" || f.key != "" || f.ca != "" || f.insecure || f.insecureAnywhere || len(f.labels) > 0 {
			return nil, fmt.Errorf("%w: replication flags given without --replicate-to", errUsage)
		}
		return nil, nil
	}
	o := &replicator.Options{CursorPath: filepath.Join(dataDir, "replication.cursor"), SoftwareVersion: version,
		QueryAddr: f.queryAddr, BudgetBytes: f.budgetBytes, MaxBytesPerSec: f.maxBytesPerSec,
		BacklogBytesPerSec: f.backlogBytesPerS, AckTimeout: f.ackTimeout, BackoffMax: f.backoffMax,
		AnnounceInterval: f.announceInterval, Labels: f.labels, ShipAsWritten: !f.compact, Logger: log}
	for _, t := range strings.Split(f.targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			o.Targets = append(o.Targets, t)
		}
	}
	var err error
	if o.Overflow, err = replicator.ParseOverflowPolicy(f.overflow); err != nil {
		return nil, fmt.Errorf("%w: --replication-overflow: %v", errUsage, err)
	}
	switch {
	case f.insecureAnywhere && !f.insecure:
		return nil, fmt.Errorf("%w: --replicate-insecure-anywhere needs --replicate-insecure", errUsage)
	case f.insecure && (f.cert != "" || f.key != "" || f.ca != ""):
		return nil, fmt.Errorf("%w: --replicate-insecure and --replicate-cert/key/ca exclude each other", errUsage)
	case f.insecure:
		for _, t := range o.Targets {
			if err := auth.CheckListen("--replicate-to", t, false, f.insecureAnywhere); err != nil {
				return nil, fmt.Errorf("%w: --replicate-insecure ships in plaintext, so only to loopback coordinators (unless --replicate-insecure-anywhere): %v", errUsage, err)
			}
		}
		o.Insecure = true
	default:
		_, client, err := auth.MutualTLS(f.cert, f.key, f.ca)
		if err != nil {
			return nil, fmt.Errorf("%w: replication TLS (--replicate-cert, --replicate-key, --replicate-ca, or --replicate-insecure on loopback): %v", errUsage, err)
		}
		o.TLS = client
	}
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("%w: replication: %v", errUsage, err)
	}
	return o, nil
}

// background runs one long-lived loop (the Shipper, the query tunnels)
// until stopped. A nil *background does nothing.
type background struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// goBackground runs run until stop; an error other than the stop is
// logged as what stopped.
func goBackground(what string, run func(context.Context) error, log *slog.Logger) *background {
	ctx, cancel := context.WithCancel(context.Background())
	b := &background{cancel: cancel}
	b.wg.Go(func() {
		if err := run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error(what+" stopped", "err", err)
		}
	})
	return b
}

// stop ends the loop and waits for it; call it before closing the node.
func (b *background) stop() {
	if b == nil {
		return
	}
	b.cancel()
	b.wg.Wait()
}

// shipping is a Shipper bound to a node.
type shipping struct {
	s   *replicator.Shipper
	run *background
}

// newShipping creates the Shipper before the node opens (its cursor decides
// which WAL segments the node keeps) and wires its retention and write gate
// into o.
func newShipping(ro *replicator.Options, o *node.Options) (*shipping, error) {
	s, err := replicator.New(*ro)
	if err != nil {
		return nil, fmt.Errorf("replication: %w", err)
	}
	o.WALRetention, o.WriteGate = s.RetainFrom, s.WriteGate
	return &shipping{s: s}, nil
}

func (sh *shipping) start(n *node.Node, log *slog.Logger) {
	sh.run = goBackground("replication", func(ctx context.Context) error { return sh.s.Run(ctx, n) }, log)
}

// stop ends shipping; call it before closing the node. A nil receiver
// does nothing.
func (sh *shipping) stop() {
	if sh != nil {
		sh.run.stop()
	}
}

// status is the Shipper's state as the Status RPC reports it.
func (sh *shipping) status() *pb.ReplicationStatus {
	st := sh.s.Stats()
	return &pb.ReplicationStatus{Connected: st.Connected, Coordinator: st.Coordinator, AckedThrough: st.AckedThrough,
		NewestSealedSeq: st.NewestSealed, LagSeconds: st.LagSeconds, LagBytes: st.LagBytes,
		BacklogSegments: int64(st.BacklogSegments), BacklogBytes: st.BacklogBytes, GapSegments: st.GapSegments,
		GapPoints: st.GapPoints, DroppedPoints: st.DroppedPoints, BackfilledPoints: st.BackfilledPoints,
		BytesPerPoint: st.BytesPerPoint, LastError: st.LastError}
}
