package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/metric"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/prom"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/replicator"
	"github.com/tributarydb/tributary/rules"
)

// listFlag is a repeatable string flag.
type listFlag struct{ list *[]string }

func (f listFlag) String() string {
	if f.list == nil {
		return ""
	}
	return strings.Join(*f.list, ",")
}

func (f listFlag) Set(s string) error {
	if s == "" {
		return errors.New("empty value")
	}
	*f.list = append(*f.list, s)
	return nil
}

// rulesFlags are the rule evaluation flags of node, local and coordinator
// (docs/rules.md).
type rulesFlags struct{ o rules.Options }

func (f *rulesFlags) register(fs *flag.FlagSet) {
	fs.Var(listFlag{&f.o.Files}, "rules", "rule files in Prometheus's format to evaluate, a glob pattern such as 'rules/*.yml' (repeatable); reloaded on SIGHUP and POST /-/reload")
	fs.DurationVar(&f.o.EvaluationInterval, "rules-evaluation-interval", rules.DefaultEvaluationInterval, "how often a rule group without an interval of its own is evaluated")
	fs.DurationVar(&f.o.ForGracePeriod, "rules-for-grace-period", rules.DefaultForGracePeriod, "after a restart, an alert whose `for` state is restored waits at least this long before firing; rules with a shorter `for` start their `for` again")
	fs.DurationVar(&f.o.OutageTolerance, "rules-outage-tolerance", rules.DefaultOutageTolerance, "longest downtime after which the `for` state of alerts is still restored")
	fs.DurationVar(&f.o.ResendDelay, "rules-resend-delay", rules.DefaultResendDelay, "how often active alerts are sent again to the Alertmanagers (this is also how a failed send is retried)")
	fs.IntVar(&f.o.MaxConcurrentEvals, "rules-max-concurrent-evals", rules.DefaultMaxConcurrentEvals, "rules of one group evaluated at once (1: one after the other); only rules that neither read nor feed another rule run concurrently, and their writes share WAL fsyncs")
	fs.Var(listFlag{&f.o.Alertmanagers}, "alertmanager-url", "base URL of an Alertmanager to send alerts to (its v2 API), e.g. http://127.0.0.1:9093 (repeatable)")
	h := &f.o.AlertmanagerHTTP
	fs.StringVar(&h.BasicAuthUser, "alertmanager-basic-auth-user", "", "user name of HTTP basic authentication to the Alertmanagers (with --alertmanager-basic-auth-password-file)")
	fs.StringVar(&h.BasicAuthPasswordFile, "alertmanager-basic-auth-password-file", "", "file holding the basic authentication password; read again at every send")
	fs.StringVar(&h.BearerTokenFile, "alertmanager-bearer-token-file", "", "file holding a bearer token sent to the Alertmanagers; read again at every send")
	fs.StringVar(&h.CAFile, "alertmanager-ca", "", "PEM bundle of the CAs that sign the Alertmanagers' certificates (default: the system's)")
	fs.StringVar(&h.CertFile, "alertmanager-cert", "", "client certificate (PEM) presented to the Alertmanagers, with --alertmanager-key")
	fs.StringVar(&h.KeyFile, "alertmanager-key", "", "key (PEM) of --alertmanager-cert")
	fs.StringVar(&h.ServerName, "alertmanager-server-name", "", "name the Alertmanagers' certificates must carry (default: the URL's host)")
	fs.BoolVar(&h.InsecureSkipVerify, "alertmanager-insecure-skip-verify", false, "accept any Alertmanager certificate (tests only)")
	fs.DurationVar(&f.o.AlertmanagerTimeout, "alertmanager-timeout", rules.DefaultAlertmanagerTimeout, "timeout of one request to an Alertmanager")
	fs.IntVar(&f.o.NotificationQueueCapacity, "alertmanager-queue-capacity", rules.DefaultNotificationQueueCapacity, "alerts waiting to be sent to one Alertmanager; beyond it the oldest are dropped and counted")
	fs.StringVar(&f.o.ExternalURL, "rules-external-url", "", "URL the alerts' generatorURL and the templates' $externalURL point to")
}

// validate checks the flags (on a copy: defaults are filled at start).
// fleet says whether the process takes the fleet's rule groups (an edge
// that replicates without --ignore-fleet-config).
func (f *rulesFlags) validate(fleet bool) error {
	o := f.o
	if err := o.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if f.o.AlertmanagerHTTP != (rules.AlertmanagerHTTP{}) && len(f.o.Alertmanagers) == 0 {
		return fmt.Errorf("%w: the --alertmanager-* authentication and TLS flags need --alertmanager-url", errUsage)
	}
	if len(f.o.Alertmanagers) > 0 && len(f.o.Files) == 0 && !fleet {
		return fmt.Errorf("%w: --alertmanager-url needs --rules, or the fleet's rule groups (--replicate-to) (alerts come from alerting rules)", errUsage)
	}
	return nil
}

// fleetRulesFile is where an edge keeps the fleet's rule groups.
func fleetRulesFile(dataDir string) string { return filepath.Join(dataDir, "fleet-rules.yml") }

// fleetRules hands the fleet's rule groups the Shipper receives to the
// rule manager, once it is open; a set that arrives before is kept and
// applied then. Applying writes the set to the data directory (one small
// fsynced file) and reloads the rules, which happens on a change of the
// fleet's rule groups and when a stream opens: rare enough to do on the
// Shipper's goroutine.
type fleetRules struct {
	log     *slog.Logger
	mu      sync.Mutex
	m       *rules.Manager
	pending *replicator.RuleGroups
}

// hook is the Shipper's OnRuleGroups.
func (f *fleetRules) hook(rg replicator.RuleGroups) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.pending = &rg
		return
	}
	f.apply(rg)
}

// attach sets the manager and applies a pending set. A nil fleetRules
// does nothing.
func (f *fleetRules) attach(r *ruleRunner) {
	if f == nil || r == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m = r.m
	if f.pending != nil {
		f.apply(*f.pending)
		f.pending = nil
	}
}

// apply applies rg. REQUIRES: f.mu held, f.m set.
func (f *fleetRules) apply(rg replicator.RuleGroups) {
	groups := make([]rules.FleetGroup, 0, len(rg.Groups))
	for _, g := range rg.Groups {
		groups = append(groups, rules.FleetGroup{Name: g.Name, YAML: g.YAML, Selector: g.Selector, Version: g.Version})
	}
	if err := f.m.ApplyFleetRules(rg.Version, groups); err != nil {
		f.log.Error("fleet rule groups not applied; the ones in force stay", "version", rg.Version, "err", err)
	}
}

// ruleRunner is a rule manager with its SIGHUP reload.
type ruleRunner struct {
	m   *rules.Manager
	hup *background
}

// open builds the rule manager over b (nil without --rules and without
// fleetFile) and loads the rule files: a file that does not load stops
// the start. fleetFile, when not empty, keeps the fleet's rule groups
// (fleetRules). Rules are evaluated by a PromQL engine of their own with
// sf's query limits.
func (f *rulesFlags) open(b backend.Backend, sf *serveFlags, fleetFile string, mp metric.MeterProvider, log *slog.Logger) (*ruleRunner, error) {
	if len(f.o.Files) == 0 && fleetFile == "" {
		return nil, nil
	}
	po := sf.prom
	po.Logger = log
	api, err := prom.New(b, &httpapi.Config{Limits: sf.limits}, po)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	o := f.o
	o.Logger, o.MeterProvider = log.With("component", "rules"), mp
	o.FleetRulesFile = fleetFile
	m, err := rules.New(b, api.Engine(), api.Queryable(), o)
	if err != nil {
		return nil, err
	}
	if len(f.o.Files) > 0 || !sf.alertsFromSeries {
		// tributary local without --rules keeps its fleet view of the
		// alerts (the ALERTS series, the fleet groups' included).
		sf.rules = m
	}
	return &ruleRunner{m: m}, nil
}

// serveGroups makes q's RuleGroups call answer what /api/v1/rules lists
// (a coordinator asks it for the fleet's listing); without rules it
// answers no groups.
func (r *ruleRunner) serveGroups(q *grpcapi.QueryServer) {
	if r == nil {
		return
	}
	q.SetRuleGroups(func(_ context.Context, f model.RuleFilter) ([]model.RuleGroup, error) {
		return prom.ListRuleGroups(r.m, f), nil
	})
}

// start starts the evaluations and the reload on SIGHUP.
func (r *ruleRunner) start(log *slog.Logger) {
	if r == nil {
		return
	}
	r.m.Start()
	r.hup = goOnSIGHUP("rules SIGHUP handler", func() {
		if err := r.m.Reload(); err != nil {
			log.Error("SIGHUP: rule files not reloaded; the rules in force stay", "err", err)
		} else {
			log.Info("SIGHUP: rule files reloaded", "files", len(r.m.LoadedFiles()))
		}
	}, log)
}

// stop stops the evaluations; call it before the backend closes.
func (r *ruleRunner) stop() {
	if r == nil {
		return
	}
	r.hup.stop()
	r.m.Stop()
}

// runRules is `tributary rules`: `rules check FILE...` and `rules
// backfill` (backfill.go).
func runRules(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "backfill" {
		return runRulesBackfill(args[1:], stdout, stderr)
	}
	if len(args) == 0 || args[0] != "check" {
		fmt.Fprintln(stderr, "usage: tributary rules check FILE...\n       tributary rules backfill --rules FILE --start T --end T (--node URL | --data-dir DIR)")
		return fmt.Errorf("%w: the subcommands are check and backfill", errUsage)
	}
	fs := newFlagSet("rules check", stderr, "FILE...")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: no rule file given", errUsage)
	}
	failed := 0
	for _, p := range fs.Args() {
		sum, errs := rules.CheckFile(p)
		if len(errs) > 0 {
			failed++
			fmt.Fprintf(stdout, "FAILED %s:\n", p)
			for _, err := range errs {
				fmt.Fprintf(stdout, "  %v\n", err)
			}
			continue
		}
		fmt.Fprintf(stdout, "SUCCESS %s: %d groups, %d recording rules, %d alerting rules\n", p, sum.Groups, sum.Recording, sum.Alerting)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d rule files are not valid", failed, fs.NArg())
	}
	return nil
}
