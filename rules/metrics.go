package rules

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	promrules "github.com/prometheus/prometheus/rules"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// bridged are the upstream rules and notifier metrics (registered on the
// Manager's own Prometheus registry) that are observed as OpenTelemetry
// instruments of the process; their labels (rule_group, alertmanager)
// become attributes.
var bridged = []struct {
	prom, otel, unit, desc string
	counter                bool
}{
	{"prometheus_rule_evaluations_total", "tributary.rules.evaluations", "{evaluation}", "Rule evaluations.", true},
	{"prometheus_rule_evaluation_failures_total", "tributary.rules.evaluation_failures", "{evaluation}", "Rule evaluations that failed (the query or the write of its result).", true},
	{"prometheus_rule_group_iterations_total", "tributary.rules.group.iterations", "{iteration}", "Group evaluations scheduled, missed ones included.", true},
	{"prometheus_rule_group_iterations_missed_total", "tributary.rules.group.iterations_missed", "{iteration}", "Group evaluations skipped because the previous one was still running.", true},
	{"prometheus_rule_group_last_duration_seconds", "tributary.rules.group.last_duration", "s", "Duration of the group's last evaluation.", false},
	{"prometheus_rule_group_last_evaluation_samples", "tributary.rules.group.last_samples", "{sample}", "Samples the group's last evaluation produced.", false},
	{"prometheus_rule_group_rules", "tributary.rules.group.rules", "{rule}", "Rules in the group.", false},
	{"prometheus_notifications_sent_total", "tributary.rules.notifications.sent", "{alert}", "Alerts sent to an Alertmanager.", true},
	{"prometheus_notifications_errors_total", "tributary.rules.notifications.errors", "{alert}", "Alerts whose send to an Alertmanager failed.", true},
	{"prometheus_notifications_dropped_total", "tributary.rules.notifications.dropped", "{alert}", "Alerts dropped: queue full, or an error sending to every Alertmanager.", true},
	{"prometheus_notifications_queue_length", "tributary.rules.notifications.queue_length", "{alert}", "Alerts waiting to be sent to an Alertmanager.", false},
	{"tributary_rules_fleet_version", "tributary.rules.fleet.version", "1", "Version (catalog raft index) of the fleet's rule groups in force on this node; 0: none received.", false},
}

// metrics holds the Manager's instruments.
type metrics struct {
	evalDuration metric.Float64Histogram
	reg          metric.Registration
}

func newMetrics(mp metric.MeterProvider, reg *prometheus.Registry) (*metrics, error) {
	meter := mp.Meter("github.com/tributarydb/tributary/rules")
	m := &metrics{}
	var err error
	m.evalDuration, err = meter.Float64Histogram("tributary.rules.group.evaluation_duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of a group's evaluation (all its rules)."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	if err != nil {
		return nil, fmt.Errorf("rules metrics: %w", err)
	}
	counters := make(map[string]metric.Float64ObservableCounter)
	gauges := make(map[string]metric.Float64ObservableGauge)
	insts := make([]metric.Observable, 0, len(bridged))
	for _, b := range bridged {
		var o metric.Observable
		if b.counter {
			c, err := meter.Float64ObservableCounter(b.otel, metric.WithUnit(b.unit), metric.WithDescription(b.desc))
			if err != nil {
				return nil, fmt.Errorf("rules metrics: %w", err)
			}
			counters[b.prom], o = c, c
		} else {
			g, err := meter.Float64ObservableGauge(b.otel, metric.WithUnit(b.unit), metric.WithDescription(b.desc))
			if err != nil {
				return nil, fmt.Errorf("rules metrics: %w", err)
			}
			gauges[b.prom], o = g, g
		}
		insts = append(insts, o)
	}
	m.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		families, err := reg.Gather()
		if err != nil {
			return err
		}
		for _, f := range families {
			for _, pm := range f.GetMetric() {
				attrs := metric.WithAttributes(promAttributes(pm)...)
				if c, ok := counters[f.GetName()]; ok && pm.GetCounter() != nil {
					o.ObserveFloat64(c, pm.GetCounter().GetValue(), attrs)
				}
				if g, ok := gauges[f.GetName()]; ok && pm.GetGauge() != nil {
					o.ObserveFloat64(g, pm.GetGauge().GetValue(), attrs)
				}
			}
		}
		return nil
	}, insts...)
	if err != nil {
		return nil, fmt.Errorf("rules metrics: %w", err)
	}
	return m, nil
}

func promAttributes(pm *dto.Metric) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, len(pm.GetLabel()))
	for _, l := range pm.GetLabel() {
		attrs = append(attrs, attribute.String(l.GetName(), l.GetValue()))
	}
	return attrs
}

// recordEval records the duration of one evaluation of g.
func (m *metrics) recordEval(ctx context.Context, g *promrules.Group, d time.Duration) {
	m.evalDuration.Record(ctx, d.Seconds(),
		metric.WithAttributes(attribute.String("rule_group", promrules.GroupKey(g.File(), g.Name()))))
}

func (m *metrics) close() {
	if m.reg != nil {
		_ = m.reg.Unregister()
	}
}
