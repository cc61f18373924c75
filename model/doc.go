// Package model is the vocabulary every layer of Tributary speaks: the
// points a client writes (Batch) and what a write did with them
// (WriteResult, Rejection), the rule groups a node evaluates as the rules
// API lists them (RuleGroup, RuleFilter), the queries a backend answers (Query, its
// modes and limits) and their answers (Series, QueryInfo), and the
// classified errors a protocol adapter maps onto its status codes
// (ErrBadQuery, ErrBadRequest, ErrOverloaded, ErrClosed,
// ErrStoreUnavailable).
//
// The storage node (node), the coordinator's replica store and query front
// end (coordinator/...), the replicator and the protocol adapters
// (grpcapi, httpapi/...) all exchange these types, through the
// backend.Backend interface or directly. They live here, apart from the
// storage engine, so that a package that only speaks the vocabulary does
// not link the engine: model imports nothing of the project but the pure
// leaf packages node/labels (series identity and matchers), node/rollup
// (the aggregate functions a query names) and model/aggregate (how a query
// is downsampled and aggregated, which every backend shares), and nothing
// that needs cgo.
// The name follows Prometheus' common/model, which plays the same part
// there.
//
// node/labels and node/rollup stay where they are: both are leaves with
// no cgo (the layering check in internal/layering holds them to it), both
// are also the node's storage formats (the label encoding of WAL records,
// the rollup encoding in the store), and moving them would change import
// paths across the tree without changing a single dependency arrow.
//
// # What belongs here
//
// A type belongs here when more than one component must agree on it
// (it crosses the Backend interface, or a wire conversion names it), and
// it is plain data: no I/O, no goroutines, no state beyond the value
// itself. The rules of a valid query (Query.Validate) and the limits that
// are part of the contract (MaxBuckets, DefaultQuerySeriesLimit,
// MaxRejectionDetails) are here so that every backend refuses the same
// queries with the same words. How a query is executed is not; what its
// answer means (the buckets, the folds, the groups) is in model/aggregate,
// which every backend calls.
//
// # Concurrency
//
// The types are values: safe to share for reading, not for concurrent
// mutation. Query.Validate and WriteResult.Reject modify their receiver.
package model
