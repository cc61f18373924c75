// Package selfmon writes a process's own metrics (a Prometheus gatherer:
// what GET /metrics serves) into its own store at an interval, so that a
// node without a Prometheus server can be asked about itself with PromQL.
// The points are ordinary data: they count as accepted points and
// replicate like the rest.
//
// Every series keeps its /metrics name and labels plus instance (the node
// id) and job="tributary"; a label already named instance or job is kept
// as exported_instance or exported_job, as Prometheus does. Histograms are
// written as NAME_bucket{le=...}, NAME_sum and NAME_count, summaries as
// NAME{quantile=...}, NAME_sum and NAME_count. At most MaxSeries distinct
// series are written; the rest are skipped (and logged once). A failed
// sample is logged once per run of failures, never fatal.
//
// Concurrency: Run is called once, and nothing else is; the Writer must
// be safe to call from Run's goroutine.
package selfmon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tributarydb/tributary/internal/pace"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// DefaultMaxSeries bounds the series self-monitoring writes.
const DefaultMaxSeries = 5000

// Writer is where the samples go (a node.Node).
type Writer interface {
	Write(ctx context.Context, batches []model.Batch) (model.WriteResult, error)
}

// Options configure Run. The zero value of a field means its default.
type Options struct {
	// Writer stores the samples; Metrics is what they are read from;
	// Instance is the instance label (the node id). Required.
	Writer   Writer
	Metrics  prometheus.Gatherer
	Instance string
	// Interval between samples. Required (positive).
	Interval time.Duration
	// MaxSeries bounds the series written. Default DefaultMaxSeries.
	MaxSeries int
	Logger    *slog.Logger
	// Now stamps the samples. Default time.Now.
	Now func() time.Time
}

// Validate fills in defaults and rejects impossible values.
func (o *Options) Validate() error {
	var bad []string
	if o.Writer == nil || o.Metrics == nil || o.Instance == "" {
		bad = append(bad, "Writer, Metrics and Instance are required")
	}
	if o.Interval <= 0 {
		bad = append(bad, fmt.Sprintf("Interval %s is not positive", o.Interval))
	}
	o.MaxSeries = cmp.Or(o.MaxSeries, DefaultMaxSeries)
	if o.MaxSeries < 0 {
		bad = append(bad, fmt.Sprintf("MaxSeries %d is negative", o.MaxSeries))
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if len(bad) > 0 {
		return errors.New("self-monitoring options: " + strings.Join(bad, "; "))
	}
	return nil
}

// Run writes a sample of every series each Interval until ctx ends, then
// returns ctx's error (or Validate's at once).
func Run(ctx context.Context, o Options) error {
	m, err := newMonitor(o)
	if err != nil {
		return err
	}
	m.log.Info("writing this process's metrics into its own store", "interval", o.Interval, "instance", o.Instance, "max_series", o.MaxSeries)
	pace.Every(ctx.Done(), o.Interval, nil, m.once)
	return ctx.Err()
}

// monitor is one Run's state. Only Run's goroutine uses it.
type monitor struct {
	o   Options
	log *slog.Logger

	seen       map[string]struct{} // series keys written so far
	overLimit  bool                // the series limit was reported
	lastFailed bool                // the last scrape or write failed (logged once per run of failures)
}

func newMonitor(o Options) (*monitor, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &monitor{o: o, log: o.Logger.With("component", "self-monitor"), seen: map[string]struct{}{}}, nil
}

// once scrapes and writes one sample of every series; failures are
// logged, never fatal.
func (m *monitor) once() {
	points, err := m.collect()
	if err == nil && len(points) > 0 {
		var res model.WriteResult
		res, err = m.o.Writer.Write(context.Background(), points)
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
func (m *monitor) collect() ([]model.Batch, error) {
	families, err := m.o.Metrics.Gather()
	if err != nil && len(families) == 0 {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	// NB: Gather may return the families it could gather with an error
	// about the rest; those are written.
	ts := m.o.Now().UnixMilli()
	var out []model.Batch
	add := func(name string, base []*dto.LabelPair, v float64, extra ...labels.Label) {
		if math.IsNaN(v) {
			return
		}
		ls := m.labelsOf(name, base, extra...)
		key := labels.Labels(ls).String()
		if _, ok := m.seen[key]; !ok {
			if len(m.seen) >= m.o.MaxSeries {
				if !m.overLimit {
					m.overLimit = true
					m.log.Warn("self-monitoring series limit reached: new series are skipped", "max_series", m.o.MaxSeries, "first_skipped", key)
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
func (m *monitor) labelsOf(name string, base []*dto.LabelPair, extra ...labels.Label) []labels.Label {
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
	ls = append(ls, labels.Label{Name: "instance", Value: m.o.Instance}, labels.Label{Name: "job", Value: "tributary"})
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
