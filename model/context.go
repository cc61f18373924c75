package model

import "context"

// Query APIs: which client protocol a query arrives through. Backends
// that measure queries use it as an attribute (a node's
// tributary.query.duration histogram).
const (
	QueryAPIGRPC     = "grpc"
	QueryAPIPromQL   = "promql"
	QueryAPIOpenTSDB = "opentsdb"
)

type queryAPIKey struct{}

// WithQueryAPI tags ctx with the client API a query arrives through
// (QueryAPIGRPC, QueryAPIPromQL, ...). Protocol adapters tag the contexts
// of the queries they pass to a backend.
func WithQueryAPI(ctx context.Context, api string) context.Context {
	return context.WithValue(ctx, queryAPIKey{}, api)
}

// QueryAPIFrom returns the API ctx was tagged with by WithQueryAPI, and
// false for an untagged context (an in-process caller).
func QueryAPIFrom(ctx context.Context) (string, bool) {
	api, ok := ctx.Value(queryAPIKey{}).(string)
	return api, ok
}
