// Package grpcapi is the gRPC protocol adapter: it serves the public API's
// tributary.v1 WriteService and QueryService over any backend.Backend (a
// storage node, a coordinator's query front end, tributary local's
// combination of the two), beside the HTTP protocols in httpapi/. It also
// holds the one conversion between the API's protobuf messages and the
// vocabulary in model, which the coordinator's edge client uses too.
//
// # Errors
//
// A query's backend errors map onto gRPC status codes through
// backend.Classify: model.ErrBadQuery and model.ErrBadRequest become
// INVALID_ARGUMENT, model.ErrOverloaded RESOURCE_EXHAUSTED, a deadline or
// cancellation its context status, model.ErrClosed UNAVAILABLE ("node is
// shutting down"), anything else INTERNAL. A write's become UNAVAILABLE
// for model.ErrClosed, RESOURCE_EXHAUSTED for model.ErrOverloaded, and
// UNAVAILABLE ("write not acknowledged") for anything else, so that a
// client retries a write it cannot know was stored. Requests the adapter
// refuses itself (a malformed matcher, too many points) are
// INVALID_ARGUMENT.
//
// # Query answers
//
// A Query answer is a stream of QueryResponse messages:
//
//   - each series (or group) is sent as one or more messages of at most
//     maxPointsPerResponse points, all carrying its SeriesIndex (0, 1, ...
//     in label order); the first of them carries its labels;
//   - the first message of the answer carries Source, what the query is
//     answered from (model.Query.Source);
//   - the last message carries the answer's Warnings (QueryInfo.Warnings,
//     known only at the end, so the newest message is held back until the
//     next one or the end) and FreshThroughMs (QueryInfo.FreshThroughMs: a
//     coordinator's answer given with a staleness allowance,
//     QueryRequest.max_staleness_ms);
//   - an empty answer is one message with SeriesIndex -1 that carries
//     Source, Warnings and FreshThroughMs.
//
// ReadAnswer reads that stream back into model.Series.
//
// # Concurrency
//
// A Server is safe for concurrent use: gRPC calls it from many goroutines.
// The conversions keep no state.
package grpcapi
