package fleetbench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
)

// coord is one coordinator process.
type coord struct {
	name, grpc, http, intake string
	node                     *nodeproc.Node
}

// startCoords starts n coordinators (one raft cluster, plaintext links)
// under dir, concurrently: none is ready before a quorum runs. Their
// intake listeners admit the connections of the simulated edges (two
// each, every one from 127.0.0.1, which the default per-address cap of
// 256 would refuse past 128 edges).
func startCoords(ctx context.Context, o Options, n, edges int, dir string, logger *slog.Logger) ([]*coord, error) {
	conns := strconv.Itoa(max(8192, 2*edges+256))
	plan, err := nodeproc.PlanCoordinators(n)
	if err != nil {
		return nil, err
	}
	run := nodeproc.Options{Binary: o.Binary, ReadyTimeout: o.ReadyTimeout, Logger: logger}
	cs := make([]*coord, n)
	opts := make([]nodeproc.Options, n)
	for i, co := range plan {
		cs[i] = &coord{name: co.Name, grpc: co.GRPC, http: co.HTTP, intake: co.Intake}
		opts[i] = co.Options(run, dir, append([]string{"--intake-max-conns", conns, "--intake-max-conns-per-ip", conns,
			"--peers", nodeproc.Peers(plan)}, o.CoordinatorArgs...)...)
	}
	err = nodeproc.Concurrently(n, func(i int) error {
		node, err := nodeproc.Start(ctx, opts[i])
		if err != nil {
			return fmt.Errorf("coordinator %s: %w", cs[i].name, err)
		}
		cs[i].node = node
		return nil
	})
	if err != nil {
		stopCoords(cs, o.StopTimeout)
		return nil, err
	}
	return cs, nil
}

// stopCoords stops every running coordinator, concurrently.
func stopCoords(cs []*coord, timeout time.Duration) error {
	return nodeproc.Concurrently(len(cs), func(i int) error {
		c := cs[i]
		if c == nil || c.node == nil {
			return nil
		}
		_, err := c.node.Stop(timeout)
		c.node = nil
		if err != nil {
			return fmt.Errorf("stop coordinator %s: %w", c.name, err)
		}
		return nil
	})
}

// coordSample is what one poll of a coordinator reads: its process usage
// and the catalog and intake figures of its /metrics.
type coordSample struct {
	At  time.Time
	CPU time.Duration
	RSS int64
	HWM int64
	m   metrics
}

func (c *coord) sample(ctx context.Context, hc *http.Client) (coordSample, error) {
	s := coordSample{At: time.Now()}
	u, err := c.node.Usage()
	if err != nil {
		return s, fmt.Errorf("coordinator %s: %w", c.name, err)
	}
	s.CPU, s.RSS, s.HWM = u.CPU, u.RSSBytes, u.HWMBytes
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.http+"/metrics", nil)
	if err != nil {
		return s, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return s, fmt.Errorf("metrics of coordinator %s: %w", c.name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("metrics of coordinator %s: status %s", c.name, resp.Status)
	}
	s.m, err = parseMetrics(resp.Body)
	if err != nil {
		return s, fmt.Errorf("metrics of coordinator %s: %w", c.name, err)
	}
	return s, nil
}

// Coordinator metrics the benchmark reads (Prometheus names).
const (
	metricProposal     = "tributary_raft_proposal_duration_seconds"
	metricApplied      = "tributary_raft_applied_index"
	metricIsLeader     = "tributary_raft_is_leader"
	metricIntakeSegs   = "tributary_intake_segments_total"
	metricIntakeBytes  = "tributary_intake_received_bytes_total"
	metricCatalogSerie = "tributary_catalog_series"
	metricIntakeRecs   = "tributary_intake_catalog_records_total"
	metricIntakeProps  = "tributary_intake_catalog_proposals_total"
)

// metrics is a parsed /metrics page.
type metrics map[string]*dto.MetricFamily

// parseMetrics reads the Prometheus text format.
func parseMetrics(r io.Reader) (metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return metrics(fams), nil
}

// sum adds every sample of a counter or gauge family whose labels include
// want (name=value pairs; nil: all). A missing family sums to NaN.
func (m metrics) sum(name string, want ...string) float64 {
	f, ok := m[name]
	if !ok {
		return math.NaN()
	}
	var t float64
	for _, s := range f.GetMetric() {
		if !hasLabels(s, want) {
			continue
		}
		switch {
		case s.Counter != nil:
			t += s.Counter.GetValue()
		case s.Gauge != nil:
			t += s.Gauge.GetValue()
		case s.Untyped != nil:
			t += s.Untyped.GetValue()
		}
	}
	return t
}

func hasLabels(s *dto.Metric, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		found := false
		for _, lp := range s.GetLabel() {
			if lp.GetName() == want[i] && lp.GetValue() == want[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// hist is a cumulative histogram: count, sum and the cumulative count at
// each upper bound.
type hist struct {
	Count  float64
	Sum    float64
	Bounds []float64 // ascending, +Inf excluded
	Cum    []float64
}

// histogram merges every sample of a histogram family whose labels include
// want.
func (m metrics) histogram(name string, want ...string) hist {
	var h hist
	f, ok := m[name]
	if !ok {
		return h
	}
	cum := map[float64]float64{}
	for _, s := range f.GetMetric() {
		if s.Histogram == nil || !hasLabels(s, want) {
			continue
		}
		h.Count += float64(s.Histogram.GetSampleCount())
		h.Sum += s.Histogram.GetSampleSum()
		for _, b := range s.Histogram.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) {
				cum[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
		}
	}
	for b := range cum {
		h.Bounds = append(h.Bounds, b)
	}
	sort.Float64s(h.Bounds)
	for _, b := range h.Bounds {
		h.Cum = append(h.Cum, cum[b])
	}
	return h
}

// sub is h minus an earlier reading of the same histogram.
func (h hist) sub(old hist) hist {
	out := hist{Count: h.Count - old.Count, Sum: h.Sum - old.Sum, Bounds: h.Bounds}
	prev := map[float64]float64{}
	for i, b := range old.Bounds {
		prev[b] = old.Cum[i]
	}
	for i, b := range h.Bounds {
		out.Cum = append(out.Cum, h.Cum[i]-prev[b])
	}
	return out
}

// quantile is the upper bound of the bucket that holds quantile q (an
// over-estimate by at most the bucket's width), NaN when empty, +Inf when
// it lies past the last bound.
func (h hist) quantile(q float64) float64 {
	if h.Count <= 0 {
		return math.NaN()
	}
	rank := q * h.Count
	for i, c := range h.Cum {
		if c >= rank {
			return h.Bounds[i]
		}
	}
	return math.Inf(1)
}

// mean is Sum/Count, NaN when empty.
func (h hist) mean() float64 {
	if h.Count <= 0 {
		return math.NaN()
	}
	return h.Sum / h.Count
}
