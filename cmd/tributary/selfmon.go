package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
)

// DefaultSelfMonitorMaxSeries bounds the series self-monitoring writes.
const DefaultSelfMonitorMaxSeries = 5000

// selfMonitor writes the process's own metrics (the telemetry provider's
// Prometheus registry: what GET /metrics serves) into the node's store every interval, so that a node without a
// Prometheus server can be asked about itself with PromQL. The points are
// ordinary data: they count as accepted points and replicate like the
// rest.
//
// Every series keeps its /metrics name and labels plus instance (the node
// id) and job="tributary"; a label already named instance or job is kept
// as exported_instance or exported_job, as Prometheus does. Histograms are
// written as NAME_bucket{le=...}, NAME_sum and NAME_count, summaries as
// NAME{quantile=...}, NAME_sum and NAME_count. At most maxSeries distinct
// series are written; the rest are skipped (and logged once).
//
// Only the goroutine running run uses a selfMonitor.
type selfMonitor struct {
	n         *node.Node
	metrics   prometheus.Gatherer
	instance  string
	maxSeries int
	log       *slog.Logger
	now       func() time.Time

	seen       map[string]struct{} // series keys written so far
	overLimit  bool                // the series limit was reported
	lastFailed bool                // the last scrape or write failed (logged once per run of failures)
}

func newSelfMonitor(n *node.Node, metrics prometheus.Gatherer, maxSeries int, log *slog.Logger) *selfMonitor {
	return &selfMonitor{n: n, metrics: metrics, instance: n.NodeID(), maxSeries: maxSeries,
		log: log.With("component", "self-monitor"), now: time.Now, seen: map[string]struct{}{}}
}

// startSelfMonitor runs a selfMonitor every interval until stopped; a
// non-positive interval starts nothing (a nil *background stops as a
// no-op).
func startSelfMonitor(interval time.Duration, maxSeries int, n *node.Node, metrics prometheus.Gatherer, log *slog.Logger) *background {
	if interval <= 0 {
		return nil
	}
	m := newSelfMonitor(n, metrics, maxSeries, log)
	m.log.Info("writing this process's metrics into its own store", "interval", interval, "instance", m.instance, "max_series", maxSeries)
	return goBackground("self-monitoring", func(ctx context.Context) error {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
				m.once()
			}
		}
	}, log)
}

// once scrapes and writes one sample of every series; failures are
// logged, never fatal.
func (m *selfMonitor) once() {
	points, err := m.collect()
	if err == nil && len(points) > 0 {
		var res model.WriteResult
		res, err = m.n.Write(context.Background(), points)
		if err == nil && res.Rejected > 0 {
			err = fmt.Errorf("%d of %d points rejected (first: %v)", res.Rejected, res.Rejected+res.Accepted, firstRejection(res))
		}
	}
	switch {
	case err != nil && !m.lastFailed:
		m.log.Warn("self-monitoring sample not stored", "err", err)
	case err == nil && m.lastFailed:
		m.log.Info("self-monitoring samples stored again")
	}
	m.lastFailed = err != nil
}

func firstRejection(r model.WriteResult) string {
	if len(r.Rejections) == 0 {
		return "no detail"
	}
	return r.Rejections[0].Message
}

// collect gathers the metrics and turns them into one batch per series,
// all stamped with the same time.
func (m *selfMonitor) collect() ([]model.Batch, error) {
	families, err := m.metrics.Gather()
	if err != nil && len(families) == 0 {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	// NB: Gather may return the families it could gather with an error
	// about the rest; those are written.
	ts := m.now().UnixMilli()
	var out []model.Batch
	add := func(name string, base []*dto.LabelPair, v float64, extra ...labels.Label) {
		if math.IsNaN(v) {
			return
		}
		ls := m.labelsOf(name, base, extra...)
		key := labels.Labels(ls).String()
		if _, ok := m.seen[key]; !ok {
			if len(m.seen) >= m.maxSeries {
				if !m.overLimit {
					m.overLimit = true
					m.log.Warn("self-monitoring series limit reached: new series are skipped", "max_series", m.maxSeries, "first_skipped", key)
				}
				return
			}
			m.seen[key] = struct{}{}
		}
		out = append(out, model.Batch{Labels: ls, Ts: []int64{ts}, Vs: []float64{v}})
	}
	for _, f := range families {
		name := f.GetName()
		for _, mt := range f.GetMetric() {
			lp := mt.GetLabel()
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				add(name, lp, mt.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, lp, mt.GetGauge().GetValue())
			case dto.MetricType_UNTYPED:
				add(name, lp, mt.GetUntyped().GetValue())
			case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
				h := mt.GetHistogram()
				for _, b := range h.GetBucket() {
					add(name+"_bucket", lp, float64(b.GetCumulativeCount()), labels.Label{Name: "le", Value: formatFloat(b.GetUpperBound())})
				}
				add(name+"_bucket", lp, float64(h.GetSampleCount()), labels.Label{Name: "le", Value: "+Inf"})
				add(name+"_sum", lp, h.GetSampleSum())
				add(name+"_count", lp, float64(h.GetSampleCount()))
			case dto.MetricType_SUMMARY:
				s := mt.GetSummary()
				for _, q := range s.GetQuantile() {
					add(name, lp, q.GetValue(), labels.Label{Name: "quantile", Value: formatFloat(q.GetQuantile())})
				}
				add(name+"_sum", lp, s.GetSampleSum())
				add(name+"_count", lp, float64(s.GetSampleCount()))
			}
		}
	}
	return out, nil
}

// labelsOf is a series' labels: the metric's own, then instance and job.
func (m *selfMonitor) labelsOf(name string, base []*dto.LabelPair, extra ...labels.Label) []labels.Label {
	ls := make([]labels.Label, 0, len(base)+len(extra)+3)
	ls = append(ls, labels.Label{Name: labels.MetricName, Value: name})
	for _, l := range base {
		n := l.GetName()
		if n == "instance" || n == "job" {
			n = "exported_" + n
		}
		ls = append(ls, labels.Label{Name: n, Value: l.GetValue()})
	}
	ls = append(ls, extra...)
	ls = append(ls, labels.Label{Name: "instance", Value: m.instance}, labels.Label{Name: "job", Value: "tributary"})
	sorted, err := labels.New(ls, labels.Limits{})
	if err != nil {
		return ls // the node validates and rejects it with a reason
	}
	return sorted
}

// formatFloat writes a bucket bound or quantile as Prometheus does.
func formatFloat(f float64) string {
	if math.IsInf(f, +1) {
		return "+Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// selfMonitorFlags are --self-monitor and --self-monitor-max-series
// (tributary node and tributary local).
type selfMonitorFlags struct {
	every     time.Duration
	maxSeries int
}

func (f *selfMonitorFlags) register(fs *flag.FlagSet) {
	fs.DurationVar(&f.every, "self-monitor", 0, "write this process's own metrics into its own store every interval (e.g. 15s), named as on /metrics with instance=<node id> and job=\"tributary\", so PromQL can ask the node about itself (0: off)")
	fs.IntVar(&f.maxSeries, "self-monitor-max-series", DefaultSelfMonitorMaxSeries, "most series self-monitoring writes; further series are skipped")
}

func (f *selfMonitorFlags) validate() error {
	if f.every < 0 {
		return fmt.Errorf("%w: --self-monitor %s is negative", errUsage, f.every)
	}
	if f.every > 0 && f.every < time.Second {
		return fmt.Errorf("%w: --self-monitor %s: want at least 1s", errUsage, f.every)
	}
	if f.maxSeries < 1 {
		return fmt.Errorf("%w: --self-monitor-max-series %d: want 1 or more", errUsage, f.maxSeries)
	}
	return nil
}

// start runs self-monitoring of n when asked; stop the result before
// closing n.
func (f *selfMonitorFlags) start(n *node.Node, tp *telemetry.Provider, log *slog.Logger) *background {
	return startSelfMonitor(f.every, f.maxSeries, n, tp.Gatherer(), log)
}
