package replbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/tributarydb/tributary/internal/promtext"
)

// Names of the edge's replication metrics on GET /metrics.
const (
	metricConnected       = "tributary_replication_connected"
	metricAckedThrough    = "tributary_replication_acked_through_seq"
	metricBacklogSegments = "tributary_replication_backlog_segments"
	metricBacklogBytes    = "tributary_replication_backlog_bytes"
	metricShippedSegments = "tributary_replication_shipped_segments_total"
	metricShippedBytes    = "tributary_replication_shipped_bytes_total"
	metricShippedPoints   = "tributary_replication_shipped_points_total"
	metricGapPoints       = "tributary_replication_gap_points"
	metricRefusals        = "tributary_replication_refusals_total"
)

// sample is one poll of the edge's replication metrics.
type sample struct {
	At              time.Time
	Connected       bool
	AckedThrough    uint64
	BacklogSegments int64
	BacklogBytes    int64
	ShippedSegments int64
	ShippedBytes    int64
	ShippedPoints   int64
	GapPoints       int64
	Refusals        int64
}

// sampleFrom picks the replication figures out of parsed metrics; every one
// must be there (an edge without replication has none).
func sampleFrom(at time.Time, m map[string]float64) (sample, error) {
	get := func(name string) (int64, error) {
		v, ok := m[name]
		if !ok {
			return 0, fmt.Errorf("edge metrics lack %s (is replication on?)", name)
		}
		if math.IsNaN(v) || v < 0 {
			return 0, fmt.Errorf("edge metric %s is %v", name, v)
		}
		return int64(v), nil
	}
	var (
		s    = sample{At: at}
		errs []error
	)
	one := func(dst *int64, name string) {
		v, err := get(name)
		if err != nil {
			errs = append(errs, err)
		}
		*dst = v
	}
	var connected, acked int64
	one(&connected, metricConnected)
	one(&acked, metricAckedThrough)
	one(&s.BacklogSegments, metricBacklogSegments)
	one(&s.BacklogBytes, metricBacklogBytes)
	one(&s.ShippedSegments, metricShippedSegments)
	one(&s.ShippedBytes, metricShippedBytes)
	one(&s.ShippedPoints, metricShippedPoints)
	one(&s.GapPoints, metricGapPoints)
	one(&s.Refusals, metricRefusals)
	if len(errs) > 0 {
		return sample{}, errs[0]
	}
	s.Connected, s.AckedThrough = connected == 1, uint64(acked)
	return s, nil
}

// metricsReader polls one edge's GET /metrics.
type metricsReader struct {
	url    string
	client *http.Client
}

func newMetricsReader(httpAddr string) *metricsReader {
	return &metricsReader{url: "http://" + httpAddr + "/metrics", client: &http.Client{Timeout: 5 * time.Second}}
}

// read fetches and parses the edge's metrics, stamped with the time the
// answer arrived.
func (r *metricsReader) read(ctx context.Context) (sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return sample{}, fmt.Errorf("get %s: %w", r.url, err)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return sample{}, fmt.Errorf("get %s: %w", r.url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return sample{}, fmt.Errorf("read %s: %w", r.url, err)
	}
	at := time.Now()
	if resp.StatusCode != http.StatusOK {
		return sample{}, fmt.Errorf("get %s: %s", r.url, resp.Status)
	}
	m, err := promtext.Parse(bytes.NewReader(body))
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", r.url, err)
	}
	return sampleFrom(at, m)
}
