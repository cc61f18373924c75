package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Metrics scrapes GET /metrics at httpAddr (any process's HTTP listener)
// and returns the samples whose metric name starts with prefix.
func Metrics(ctx context.Context, httpAddr, prefix string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", httpAddr, err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: %w", httpAddr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("metrics of %s: read: %w", httpAddr, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics of %s: %s", httpAddr, resp.Status)
	}
	return parseMetrics(string(body), prefix)
}
