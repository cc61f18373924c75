package rules

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/notifier"
	"github.com/prometheus/prometheus/promql"
	promrules "github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"

	"github.com/tributarydb/tributary/backend"
)

// Manager loads rule files and evaluates them; see the package doc.
type Manager struct {
	opts     Options
	rules    *promrules.Manager
	notifier *notifier.Manager // nil without Alertmanagers
	reg      *prometheus.Registry
	metrics  *metrics
	cancel   context.CancelFunc
	b        backend.Backend
	q        storage.Queryable
	// exactDone holds the keys of the groups whose `for` state was
	// restored exactly (Options.ExactForRestore).
	exactDone sync.Map

	mu    sync.Mutex // serialises Reload and Stop
	files []string   // the files of the rules in force
	// fleetVersion is the version of the fleet's rule groups in
	// FleetRulesFile (0: none); fleetGauge mirrors it for the metric.
	fleetVersion uint64
	fleetGauge   atomic.Uint64
	// fleetBody is the fleet rules file past its header line.
	fleetBody []byte
	started   bool
	stopped   bool
	wg        sync.WaitGroup
}

// New builds a Manager whose rules are evaluated by engine over q and
// write their results into b, and loads the rule files: a file that does
// not load is an error. Start starts the evaluations.
func New(b backend.Backend, engine promql.QueryEngine, q storage.Queryable, opts Options) (*Manager, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	m := &Manager{opts: opts, reg: prometheus.NewRegistry(), b: b, q: q}
	notify := func(context.Context, string, ...*promrules.Alert) {} // no Alertmanager
	if len(opts.Alertmanagers) > 0 {
		n, err := newNotifier(opts, m.reg)
		if err != nil {
			return nil, err
		}
		m.notifier = n
		notify = promrules.SendAlerts(n, opts.ExternalURL)
	}
	var extURL *url.URL
	if opts.ExternalURL != "" {
		extURL, _ = url.Parse(opts.ExternalURL) // checked by Validate
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	m.rules = promrules.NewManager(&promrules.ManagerOptions{
		ExternalURL:     extURL,
		QueryFunc:       promrules.EngineQueryFunc(engine, q),
		NotifyFunc:      notify,
		Context:         ctx,
		Appendable:      &appendable{b: b, max: opts.MaxSamplesPerWrite},
		Queryable:       q,
		Logger:          opts.Logger,
		Registerer:      m.reg,
		OutageTolerance: opts.OutageTolerance,
		ForGracePeriod:  opts.ForGracePeriod,
		ResendDelay:     opts.ResendDelay,
		// Concurrent rules share the WAL fsyncs of their writes.
		ConcurrentEvalsEnabled: opts.MaxConcurrentEvals > 1,
		MaxConcurrentEvals:     int64(opts.MaxConcurrentEvals),
	})
	var err error
	if opts.FleetRulesFile != "" {
		// A damaged fleet file does not stop the node: its groups are
		// not evaluated until the coordinators send the fleet's again.
		if m.fleetVersion, m.fleetBody, _, err = readFleetFile(opts.FleetRulesFile); err != nil {
			opts.Logger.Error("fleet rule groups not loaded; waiting for the coordinators to send them", "err", err)
			m.fleetVersion, m.fleetBody = 0, nil
		}
	}
	m.fleetGauge.Store(m.fleetVersion)
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tributary_rules_fleet_version",
		Help: "Version of the fleet's rule groups in force."}, func() float64 { return float64(m.fleetGauge.Load()) }))
	if m.metrics, err = newMetrics(opts.MeterProvider, m.reg); err != nil {
		cancel()
		return nil, err
	}
	if err := m.load(); err != nil {
		cancel()
		m.metrics.close()
		return nil, err
	}
	return m, nil
}

// expand expands the glob patterns of the rule files, sorted and without
// duplicates. A malformed pattern is an error; a pattern matching nothing
// is logged.
func (m *Manager) expand() ([]string, error) {
	var files []string
	for _, p := range m.opts.Files {
		matches, err := filepath.Glob(p)
		if err != nil {
			return nil, fmt.Errorf("rule file pattern %q: %w", p, err)
		}
		if len(matches) == 0 {
			m.opts.Logger.Warn("rule file pattern matches no file", "pattern", p)
		}
		files = append(files, matches...)
	}
	slices.Sort(files)
	files = slices.Compact(files)
	if m.fleetVersion > 0 && !slices.Contains(files, m.opts.FleetRulesFile) {
		// The fleet's groups come last, from their own file: a group of
		// the same name as one of a local file is another group.
		files = append(files, m.opts.FleetRulesFile)
	}
	return files, nil
}

// load reads the rule files and applies them. REQUIRES: m.mu held or m not
// yet shared.
func (m *Manager) load() error {
	files, err := m.expand()
	if err != nil {
		return err
	}
	// Check first: the upstream Update only logs the errors.
	if err := CheckFiles(files...); err != nil {
		return err
	}
	if err := m.rules.Update(m.opts.EvaluationInterval, files, labels.EmptyLabels(), m.opts.ExternalURL, m.evalIteration); err != nil {
		return fmt.Errorf("load rule files: %w", err)
	}
	m.files = files
	m.opts.Logger.Info("rules loaded", "files", len(files), "groups", len(m.rules.RuleGroups()))
	return nil
}

// evalIteration is the groups' evaluation function: the upstream one,
// with the samples of a group whose rules read none of each other's
// results written together (groupWrites), timed into the evaluation
// duration histogram.
func (m *Manager) evalIteration(ctx context.Context, g *promrules.Group, ts time.Time) {
	start := time.Now()
	gw := newGroupWrites(g, m.b, m.opts.MaxSamplesPerWrite)
	if gw != nil {
		ctx = context.WithValue(ctx, groupWritesKey{}, gw)
	}
	if m.opts.ExactForRestore {
		m.restoreExact(ctx, g)
	}
	promrules.DefaultEvalIterationFunc(ctx, g, ts)
	if gw != nil {
		if err := gw.flush(ctx); err != nil {
			m.opts.Logger.Warn("rule samples not written", "group", g.Name(), "err", err)
		}
	}
	m.metrics.recordEval(ctx, g, time.Since(start))
}

// restoreExact sets the active time of g's active alerts back to the one
// their ALERTS_FOR_STATE series last stored (Options.ExactForRestore). It
// runs once per group, at the first evaluation after the upstream
// restoration (which comes after the group's second evaluation and writes
// no alert series before it): until then it does nothing. The upstream
// restoration moved the active time forward by the time nothing evaluated
// the alert, or left it out for a `for` under the grace period; here the
// stored time is taken as it is.
func (m *Manager) restoreExact(ctx context.Context, g *promrules.Group) {
	key := promrules.GroupKey(g.File(), g.Name())
	if _, done := m.exactDone.Load(key); done {
		return
	}
	ars := g.AlertingRules()
	for _, r := range ars {
		if !r.Restored() {
			return
		}
	}
	m.exactDone.Store(key, true)
	active := 0
	for _, r := range ars {
		active += r.ActiveAlertsCount()
	}
	if active == 0 {
		return
	}
	now := time.Now()
	q, err := m.q.Querier(now.Add(-m.opts.OutageTolerance).UnixMilli(), now.UnixMilli())
	if err != nil {
		m.opts.Logger.Error("`for` state not restored", "group", g.Name(), "err", err)
		return
	}
	defer q.Close()
	for _, r := range ars {
		if r.ActiveAlertsCount() == 0 {
			continue
		}
		ss, err := r.QueryForStateSeries(ctx, q)
		if err != nil {
			m.opts.Logger.Error("`for` state not restored", "group", g.Name(), "alertname", r.Name(), "err", err)
			continue
		}
		since := map[string]time.Time{}
		for ss.Next() {
			s := ss.At()
			it := s.Iterator(nil)
			v, found := 0.0, false
			for it.Next() == chunkenc.ValFloat {
				_, v = it.At()
				found = true
			}
			if it.Err() == nil && found && !value.IsStaleNaN(v) && !math.IsNaN(v) {
				since[s.Labels().DropReserved(func(n string) bool { return n == model.MetricNameLabel }).String()] = time.Unix(int64(v), 0).UTC()
			}
		}
		if err := ss.Err(); err != nil {
			m.opts.Logger.Error("`for` state not restored", "group", g.Name(), "alertname", r.Name(), "err", err)
			continue
		}
		r.ForEachActiveAlert(func(a *promrules.Alert) {
			if at, ok := since[a.Labels.String()]; ok && at.Before(a.ActiveAt) {
				a.ActiveAt = at
			}
		})
	}
}

// Start starts evaluating the rules (and sending the alerts).
func (m *Manager) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.stopped {
		return
	}
	m.started = true
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		m.rules.Run()
	}()
	if m.notifier != nil {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.notifier.Run(staticTargets(m.opts.Alertmanagers))
		}()
	}
}

// Reload reads the rule files again (the glob patterns are expanded
// again) and applies them: groups that did not change keep evaluating,
// changed ones keep the state of their alerts. When a file does not load,
// the rules in force stay and the error says why.
func (m *Manager) Reload() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return errors.New("reload rules: the rule manager is stopped")
	}
	return m.load()
}

// RuleGroups returns the groups in force, ordered by file and name.
func (m *Manager) RuleGroups() []*promrules.Group { return m.rules.RuleGroups() }

// LoadedFiles returns the rule files in force.
func (m *Manager) LoadedFiles() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.files)
}

// Stop stops the evaluations, waits for those running, and sends the
// alerts waiting in the queues (for at most the Alertmanager timeout).
func (m *Manager) Stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	m.stopped = true
	if !m.started {
		// The groups wait for Run to start: let them start and see
		// their stop.
		go m.rules.Run()
	}
	m.rules.Stop()
	m.cancel()
	if m.notifier != nil {
		m.notifier.Stop()
	}
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(m.opts.AlertmanagerTimeout + time.Second):
		m.opts.Logger.Warn("alert notifications still being sent at stop")
	}
	m.metrics.close()
}
