package cluster

import "context"

// Metrics scrapes GET /metrics at httpAddr (any process's HTTP listener,
// plaintext and without a token) and returns the samples whose metric
// name starts with prefix.
func Metrics(ctx context.Context, httpAddr, prefix string) (map[string]float64, error) {
	return Client{}.Metrics(ctx, httpAddr, prefix)
}
