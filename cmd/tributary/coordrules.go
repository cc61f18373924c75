package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	promrules "github.com/prometheus/prometheus/rules"

	"github.com/tributarydb/tributary/coordinator"
	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/prom"
	"github.com/tributarydb/tributary/internal/auth"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/replicator"
	"github.com/tributarydb/tributary/rules"
)

// rulesEdgeDir is the directory, in a coordinator's data directory, of
// the edge node its rules write into.
const rulesEdgeDir = "rules-edge"

// rulesEdgeID is the edge id of the rules edge of the coordinator
// coordID: stable across restarts, and distinct per coordinator.
func rulesEdgeID(coordID string) string { return query.CoordinatorRulesEdge(coordID) }

// leaderPollInterval is how often a coordinator with --rules checks
// whether it is the raft leader.
const leaderPollInterval = 250 * time.Millisecond

// coordinatorRules evaluates a coordinator's --rules over the fleet's
// data (the coordinator's query front end), on the raft leader only, and
// writes the results into an edge node of its own (rulesEdgeDir) that
// replicates to the cluster like any edge (docs/rules.md, "Coordinators").
//
// A rules.Manager cannot start again once stopped, so each leadership
// term gets a new one: while a follower, the coordinator holds a loaded
// manager that is not started (its groups are listed with health
// "unknown"); on becoming the leader it starts it; on losing leadership it
// stops it and loads a new one. The managers restore the `for` state of
// alerts exactly (rules.Options.ExactForRestore) from the ALERTS_FOR_STATE
// series the previous leader wrote, read through the front end.
type coordinatorRules struct {
	o        rules.Options
	front    *coordinator.Coordinator
	api      *prom.API // the engine and queryable over the front end
	edge     *node.Node
	ship     *shipping
	isLeader func() bool
	log      *slog.Logger

	mu      sync.Mutex
	cur     *rules.Manager // nil: the rule files did not load
	running bool
	bg      *background
	hup     *background
	// terms counts the leadership terms in which the rules ran (tests).
	terms atomic.Int64
}

// coordinatorRulesOptions are the seams of openCoordinatorRules.
type coordinatorRulesOptions struct {
	// dataDir is the coordinator's data directory.
	dataDir string
	// tls ships the rules edge's segments over mutual TLS; nil: plaintext.
	tls *tls.Config
	// local is where the coordinator's front end finds the rules edge in
	// this process (set as coordinator.Options.LocalEdge before Open).
	local *edgeSource
	// sealAge is the rules edge's WAL segment age (0: the node's default
	// until the fleet configuration's lag budget applies).
	sealAge time.Duration
	mp      metric.MeterProvider
	log     *slog.Logger
}

// openCoordinatorRules opens the rules edge of coordinator c, starts its
// replication to c's intake listener and loads the rule files of f. It
// sets sf.rules. Call start once the listeners serve, and stop before c
// stops.
func openCoordinatorRules(c *coordinator.Coordinator, f *rulesFlags, sf *serveFlags, co coordinatorRulesOptions) (*coordinatorRules, error) {
	log := co.log.With("component", "rules")
	api, err := prom.New(c.Backend(), &httpapi.Config{Limits: sf.limits}, withLogger(sf.prom, log))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	edgeDir := filepath.Join(co.dataDir, rulesEdgeDir)
	no := node.Options{DataDir: edgeDir, NodeID: rulesEdgeID(c.NodeID()), Logger: co.log.With("component", "rules-edge"),
		WALSegmentAge: co.sealAge, NoIdleCompact: true} // a coordinator's, not an SD card's: as before
	ro := replicator.Options{Targets: []string{c.IntakeAddr()}, TLS: co.tls, Insecure: co.tls == nil, SoftwareVersion: version,
		CursorPath: filepath.Join(edgeDir, "replication.cursor"), Logger: no.Logger}
	var target atomic.Pointer[node.Node]
	ro.OnConfig = fleetConfigHook(&target, co.sealAge > 0, no.Logger)
	if err := ro.Validate(); err != nil {
		return nil, fmt.Errorf("%w: rules edge replication: %v", errUsage, err)
	}
	ship, err := newShipping(&ro, &no)
	if err != nil {
		return nil, err
	}
	n, err := node.Open(no)
	if err != nil {
		return nil, fmt.Errorf("open the rules edge: %w", err)
	}
	target.Store(n)
	if co.local != nil {
		co.local.n.Store(n)
	}
	o := f.o
	o.Logger, o.MeterProvider = log, co.mp
	o.ExactForRestore = true
	r := &coordinatorRules{o: o, front: c, api: api, edge: n, ship: ship, isLeader: c.IsLeader, log: log}
	if r.cur, err = r.newManager(); err != nil {
		n.Close()
		return nil, err
	}
	ship.start(n, no.Logger)
	sf.rules = r
	sf.rulesWithSeriesAlerts = true
	return r, nil
}

// withLogger returns po with its logger set.
func withLogger(po prom.Options, log *slog.Logger) prom.Options {
	po.Logger = log
	return po
}

func (r *coordinatorRules) newManager() (*rules.Manager, error) {
	return rules.New(r.edge, r.api.Engine(), r.api.Queryable(), r.o)
}

// RuleGroups returns the groups of the rule files: on the leader as
// being evaluated, on a follower as loaded (never evaluated here).
func (r *coordinatorRules) RuleGroups() []*promrules.Group {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		return nil
	}
	return r.cur.RuleGroups()
}

// Reload reads the rule files again (SIGHUP, POST /-/reload).
func (r *coordinatorRules) Reload() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		m, err := r.newManager()
		if err != nil {
			return err
		}
		r.cur = m
		if r.running {
			m.Start()
		}
		return nil
	}
	return r.cur.Reload()
}

// start starts following the raft leadership and the reload on SIGHUP.
func (r *coordinatorRules) start() {
	r.bg = goBackground("rules leadership", func(ctx context.Context) error {
		t := time.NewTicker(leaderPollInterval)
		defer t.Stop()
		for {
			r.follow()
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}, r.log)
	r.hup = goOnSIGHUP("rules SIGHUP handler", func() {
		if err := r.Reload(); err != nil {
			r.log.Error("SIGHUP: rule files not reloaded; the rules in force stay", "err", err)
		} else {
			r.log.Info("SIGHUP: rule files reloaded")
		}
	}, r.log)
}

// follow starts the rules when this coordinator is the leader and they
// do not run, and stops them when it is not and they run.
func (r *coordinatorRules) follow() {
	leader := r.isLeader()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case leader && !r.running:
		if r.cur == nil {
			m, err := r.newManager()
			if err != nil {
				r.log.Error("leader, but the rule files do not load: no rules evaluated", "err", err)
				return
			}
			r.cur = m
		}
		r.running = true
		r.terms.Add(1)
		r.cur.Start()
		r.log.Info("raft leader: evaluating the rules over the fleet")
	case !leader && r.running:
		r.running = false
		r.cur.Stop()
		r.log.Info("no longer the raft leader: rules stopped")
		m, err := r.newManager()
		if err != nil {
			r.log.Error("rule files not loaded again", "err", err)
		}
		r.cur = m
	}
}

// stop stops the evaluations, the replication of the rules edge and the
// edge itself (what it acknowledged is in its WAL, shipped at the next
// start).
func (r *coordinatorRules) stop() error {
	if r == nil {
		return nil
	}
	if r.bg != nil {
		r.bg.stop()
	}
	r.hup.stop()
	r.mu.Lock()
	if r.cur != nil {
		r.cur.Stop()
	}
	r.running = false
	r.mu.Unlock()
	r.ship.stop()
	if err := r.edge.Close(); err != nil {
		return fmt.Errorf("close the rules edge: %w", err)
	}
	return nil
}

// coordRulesFlags are the flags of a coordinator's rules edge.
type coordRulesFlags struct {
	cert, key  string
	sealAge    time.Duration
	sealAgeSet bool // --rules-edge-wal-segment-age was given
}

// defaultRulesEdgeSealAge is the rules edge's WAL segment age: rule
// results reach the other coordinators within about a second, so that a
// new leader restores alert state that is at most that old. The rules
// edge ships inside the cloud, where bytes are not metered, so it does
// not follow the fleet's lag budget unless told to (0).
const defaultRulesEdgeSealAge = time.Second

func (f *coordRulesFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.cert, "rules-edge-cert", "", "with --rules and TLS: PEM client certificate of this coordinator's rules edge, signed by the --edge-ca CA and naming the edge <--id>-rules; its segments are shipped to this coordinator's intake listener")
	fs.StringVar(&f.key, "rules-edge-key", "", "PEM private key of --rules-edge-cert")
	f.sealAge = defaultRulesEdgeSealAge
	fs.Func("rules-edge-wal-segment-age", "with --rules: WAL segment age of the rules edge, i.e. how soon rule results reach the other coordinators' replicas, and how old the alert state a new leader restores may be (default 1s; 0: the fleet configuration's lag budget, else the node default)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		f.sealAge, f.sealAgeSet = d, true
		return nil
	})
}

// validate checks the flags of a coordinator's rules: insecure says the
// cluster runs without TLS.
func (f *coordRulesFlags) validate(rf *rulesFlags, insecure bool) error {
	if len(rf.o.Alertmanagers) > 0 && len(rf.o.Files) == 0 {
		return fmt.Errorf("%w: --alertmanager-url needs --rules (alerts come from alerting rules)", errUsage)
	}
	if err := rf.validate(false); err != nil {
		return err
	}
	with := len(rf.o.Files) > 0
	switch {
	case !with && (f.cert != "" || f.key != "" || f.sealAgeSet):
		return fmt.Errorf("%w: --rules-edge-cert, --rules-edge-key and --rules-edge-wal-segment-age need --rules", errUsage)
	case f.sealAge < 0:
		return fmt.Errorf("%w: --rules-edge-wal-segment-age must not be negative", errUsage)
	case with && insecure && (f.cert != "" || f.key != ""):
		return fmt.Errorf("%w: --rules-edge-cert/--rules-edge-key and --insecure-cluster exclude each other", errUsage)
	case with && !insecure && (f.cert == "" || f.key == ""):
		return fmt.Errorf("%w: --rules with TLS needs --rules-edge-cert and --rules-edge-key: a client certificate signed by the --edge-ca CA naming the edge <--id>-rules, with which the rules edge ships to this coordinator", errUsage)
	}
	return nil
}

// clientTLS is the rules edge's TLS to the intake listener of coordinator
// o (verified against peerCA, under o's node id); nil without TLS.
func (f *coordRulesFlags) clientTLS(o coordinator.Options, peerCA string) (*tls.Config, error) {
	if o.Insecure {
		return nil, nil
	}
	_, cli, err := auth.MutualTLS(f.cert, f.key, peerCA)
	if err != nil {
		return nil, fmt.Errorf("%w: --rules-edge-cert/--rules-edge-key: %v", errUsage, err)
	}
	cli = cli.Clone()
	cli.ServerName = o.NodeID
	return cli, nil
}
