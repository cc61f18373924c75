// Package tributary is the Go client for Tributary's gRPC API
// (proto/tributary/v1): writing samples, querying them back and listing
// series and labels, against a storage node or a coordinator (whose answers
// cover the whole fleet).
//
// # Connecting
//
// Dial returns a Client for one address. It does not wait for the
// connection unless WithBlock is given; the first call connects. Options
// select TLS (WithCAFile, WithTLSConfig, WithInsecureSkipVerify,
// WithClientCertificate), a bearer token (WithToken), keepalive
// (WithKeepalive), a per-call timeout (WithTimeout), the retry policy
// (WithRetry) and the user agent (WithUserAgent). A token is never sent in
// clear text to an address that is not loopback unless
// WithTokenOverPlaintext says so.
//
// # Writing
//
// Client.Write sends batches as they are. Client.NewWriter returns a Writer
// that buffers points, groups them per series into columnar batches and
// sends them in the background when a batch is full or FlushInterval has
// passed. Its memory is bounded by WriterOptions.MaxBufferedPoints and
// MaxBufferedBytes: when the buffer is full, Add blocks until the sender
// has made room or the caller's context ends (backpressure, never an
// unbounded queue). Points the server refuses (too old, invalid series,
// ...) are reported to WriterOptions.OnRejected with their series,
// timestamp and reason; batches that could not be delivered after retries
// are reported to OnError and by Flush and Close.
//
// # Retries and idempotence
//
// Calls are retried with exponential backoff and jitter when the server
// answers UNAVAILABLE (shutting down, disk error, connection lost) or
// RESOURCE_EXHAUSTED (overloaded: its unflushed data reached its bound),
// and, for reads only, DEADLINE_EXCEEDED of one attempt while the caller's
// own context is still alive. Nothing else is retried: INVALID_ARGUMENT,
// UNAUTHENTICATED and the like fail at once.
//
// Retrying a write is safe. A node stores a sample under its (series,
// timestamp) pair, and a duplicate timestamp is last-write-wins, so a write
// applied twice leaves the same data as a write applied once. (The node's
// accepted-points counter does count it twice, and if another client wrote a
// different value at the same series and timestamp in between, the retry
// wins.) Writes are not retried on DEADLINE_EXCEEDED: the attempt may still
// be running on a slow server, and sending it again would add load where
// there is already too much.
//
// # Querying
//
// Client.Query takes a Query (build one with Raw, Downsample or Last, and
// GroupBy for cross-series aggregation) and returns a SeriesIter, which
// streams the answer series by series; SeriesIter.All adapts it to a
// range-over-func loop. Selectors are PromQL-style strings
// (`cpu{host="pi-7",region=~"eu-.*"}`), parsed by ParseSelector.
//
// # Concurrency
//
// A Client is safe for concurrent use and should be shared; Close it when
// done. A Writer is safe for concurrent use (Add from many goroutines); its
// callbacks run on its single sender goroutine. A SeriesIter is not safe for
// concurrent use.
package tributary
