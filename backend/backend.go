// Package backend is the storage interface that the client-facing
// protocols (gRPC in grpcapi; InfluxDB line protocol, OpenTSDB and
// Prometheus in httpapi/...) are served from. A storage node
// (*node.Node) implements it over its own data, and a coordinator's query
// front end (*query.Frontend) over the fleet's replicated data and the
// edges' fresh tails, so every protocol works unchanged on both.
//
// Errors returned by a Backend are classified by Classify so that each
// protocol can map them onto its own status codes the same way.
//
// backend speaks only the vocabulary in model and node/labels: it links
// no storage engine, so a protocol adapter built on it does not either.
package backend

import (
	"context"
	"errors"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// Backend stores and answers queries. Implementations are safe for
// concurrent use.
type Backend interface {
	// Write validates and stores batches; see node.Node.Write for the
	// meaning of the result and of an error. The batches' slices belong to
	// the caller again once Write returns (callers reuse them): an
	// implementation must copy what it keeps.
	Write(ctx context.Context, batches []model.Batch) (model.WriteResult, error)
	// Query runs q and calls emit per series (or group) in label order.
	Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error)
	// Series lists the label sets matching ms, at most limit of them
	// (limit <= 0: the backend's default).
	Series(ctx context.Context, ms []*labels.Matcher, limit int) ([]labels.Labels, error)
	// LabelNames lists label names of series matching ms (all series when
	// ms is empty), sorted.
	LabelNames(ctx context.Context, ms []*labels.Matcher) ([]string, error)
	// LabelValues lists the values of name among series matching ms (all
	// series when ms is empty), sorted.
	LabelValues(ctx context.Context, name string, ms []*labels.Matcher) ([]string, error)
}

// Kind is the class of a backend error, which protocols map onto their
// status codes.
type Kind int

// The kinds of error.
const (
	// KindNone: no error.
	KindNone Kind = iota
	// KindBadRequest: the request itself is wrong; retrying it will not
	// help (model.ErrBadQuery, model.ErrBadRequest).
	KindBadRequest
	// KindOverloaded: the backend is shedding load; retry after a pause
	// (HTTP 429, gRPC RESOURCE_EXHAUSTED; model.ErrOverloaded).
	KindOverloaded
	// KindUnavailable: the backend is shutting down or cannot reach its
	// disk; retry, possibly elsewhere (HTTP 503, gRPC UNAVAILABLE;
	// model.ErrClosed, model.ErrStoreUnavailable and every error Classify
	// does not know).
	KindUnavailable
	// KindTimeout: the request's deadline passed or it was cancelled.
	KindTimeout
)

// Classify says what kind of error err is. Errors it does not know are
// KindUnavailable: for a write that means "not acknowledged, retry".
func Classify(err error) Kind {
	switch {
	case err == nil:
		return KindNone
	case errors.Is(err, model.ErrBadQuery), errors.Is(err, model.ErrBadRequest):
		return KindBadRequest
	case errors.Is(err, model.ErrOverloaded):
		return KindOverloaded
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return KindTimeout
	}
	return KindUnavailable
}
