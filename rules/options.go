package rules

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Options configure a Manager. The zero value of a field means its
// default.
type Options struct {
	// Files are the rule files to load: glob patterns (filepath.Match
	// syntax), expanded at every load. A pattern that matches nothing
	// loads nothing and is logged.
	Files []string
	// FleetRulesFile is where the rule groups the fleet pushes to this
	// node are kept (ApplyFleetRules), in its data directory; they are
	// evaluated with Files, and after a restart from this file. Empty:
	// no fleet rule groups.
	FleetRulesFile string
	// EvaluationInterval is how often a group without an interval of its
	// own is evaluated. Default 1m, as in Prometheus.
	EvaluationInterval time.Duration
	// OutageTolerance is how long the process may have been down for the
	// `for` state of its alerts to be restored. Default 1h.
	OutageTolerance time.Duration
	// ForGracePeriod is the least time an alert restored after a start
	// waits before firing; rules with a shorter `for` are not restored.
	// Default 10m, as in Prometheus.
	ForGracePeriod time.Duration
	// ResendDelay is how often an active alert is sent again to the
	// Alertmanagers. Default 1m.
	ResendDelay time.Duration
	// Alertmanagers are the base URLs (http or https, host:port and an
	// optional path prefix) of the Alertmanagers alerts are sent to.
	Alertmanagers []string
	// AlertmanagerHTTP is how the process authenticates to the
	// Alertmanagers and checks their certificates (the same for all of
	// them). The zero value: no credentials, the system's CAs.
	AlertmanagerHTTP AlertmanagerHTTP
	// AlertmanagerTimeout bounds one request to an Alertmanager. Default 10s.
	AlertmanagerTimeout time.Duration
	// NotificationQueueCapacity bounds the alerts waiting to be sent to one
	// Alertmanager; beyond it the oldest are dropped and counted. Default
	// 10,000, as in Prometheus.
	NotificationQueueCapacity int
	// MaxConcurrentEvals is how many rules of one group may be evaluated
	// at once; 1 evaluates them one after the other. Only rules that
	// neither read another rule's output nor have their output read by
	// one run concurrently (the upstream dependency analysis); a rule's
	// write waits for its WAL fsync, which concurrent rules share.
	// Default 4.
	MaxConcurrentEvals int
	// MaxSamplesPerWrite bounds the samples of one write to the backend;
	// a rule producing more writes several batches. Default 10,000.
	MaxSamplesPerWrite int
	// ExactForRestore restores the `for` state of alerts as it was
	// stored: an alert whose ALERTS_FOR_STATE series (within
	// OutageTolerance) says it has been active since T keeps T as its
	// active time, with no grace period and no shift by the time nothing
	// evaluated it. It is for a Manager that takes over from another one
	// evaluating the same rules over the same data (a coordinator that
	// became the raft leader), where the gap is a hand-over, not an
	// outage. ForGracePeriod is then not applied.
	ExactForRestore bool
	// ExternalURL is the URL alerts link to (their generatorURL) and
	// templates see as $externalURL. Default empty.
	ExternalURL string
	// Logger receives the manager's and the rule evaluations' logs.
	// Default: discard.
	Logger *slog.Logger
	// MeterProvider receives the evaluation and notification metrics.
	// Default: no-op.
	MeterProvider metric.MeterProvider
}

// Defaults for Options.
const (
	DefaultEvaluationInterval        = time.Minute
	DefaultOutageTolerance           = time.Hour
	DefaultForGracePeriod            = 10 * time.Minute
	DefaultResendDelay               = time.Minute
	DefaultAlertmanagerTimeout       = 10 * time.Second
	DefaultNotificationQueueCapacity = 10_000
	DefaultMaxSamplesPerWrite        = 10_000
	DefaultMaxConcurrentEvals        = 4
)

// Validate fills defaults and rejects impossible values.
func (o *Options) Validate() error {
	if o.EvaluationInterval < 0 || o.OutageTolerance < 0 || o.ForGracePeriod < 0 || o.ResendDelay < 0 ||
		o.AlertmanagerTimeout < 0 || o.NotificationQueueCapacity < 0 || o.MaxSamplesPerWrite < 0 || o.MaxConcurrentEvals < 0 {
		return errors.New("rules options: durations and limits must not be negative")
	}
	for _, u := range o.Alertmanagers {
		if _, err := parseAlertmanagerURL(u); err != nil {
			return err
		}
	}
	if err := o.AlertmanagerHTTP.validate(); err != nil {
		return err
	}
	if o.ExternalURL != "" {
		if _, err := url.Parse(o.ExternalURL); err != nil {
			return fmt.Errorf("rules options: external URL %q: %w", o.ExternalURL, err)
		}
	}
	o.EvaluationInterval = cmp.Or(o.EvaluationInterval, DefaultEvaluationInterval)
	o.OutageTolerance = cmp.Or(o.OutageTolerance, DefaultOutageTolerance)
	o.ForGracePeriod = cmp.Or(o.ForGracePeriod, DefaultForGracePeriod)
	o.ResendDelay = cmp.Or(o.ResendDelay, DefaultResendDelay)
	o.AlertmanagerTimeout = cmp.Or(o.AlertmanagerTimeout, DefaultAlertmanagerTimeout)
	o.NotificationQueueCapacity = cmp.Or(o.NotificationQueueCapacity, DefaultNotificationQueueCapacity)
	o.MaxSamplesPerWrite = cmp.Or(o.MaxSamplesPerWrite, DefaultMaxSamplesPerWrite)
	o.MaxConcurrentEvals = cmp.Or(o.MaxConcurrentEvals, DefaultMaxConcurrentEvals)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MeterProvider == nil {
		o.MeterProvider = noop.NewMeterProvider()
	}
	return nil
}

// parseAlertmanagerURL checks an Alertmanager's base URL.
func parseAlertmanagerURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, fmt.Errorf("alertmanager URL %q: %w", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("alertmanager URL %q: the scheme must be http or https", s)
	case u.Host == "":
		return nil, fmt.Errorf("alertmanager URL %q: no host", s)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("alertmanager URL %q: credentials, a query or a fragment are not supported", s)
	}
	return u, nil
}
