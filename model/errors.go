package model

import "errors"

// The classified errors. A backend wraps one of them (fmt.Errorf with %w)
// to say what kind of failure an error is; backend.Classify and the
// protocol adapters match them with errors.Is and map them onto their
// status codes. Their texts are what a storage node says, since the node
// is where most of them arise.
var (
	// ErrBadQuery wraps every error caused by a query itself; retrying
	// it will not help.
	ErrBadQuery = errors.New("bad query")
	// ErrBadRequest marks other errors caused by the request (a write
	// sent where writes are not taken, a malformed listing request).
	ErrBadRequest = errors.New("bad request")
	// ErrOverloaded: the backend is shedding load (a node's head is full,
	// an ingest rate limit, a full replication backlog); nothing of the
	// request was stored, retry later.
	ErrOverloaded = errors.New("node: head is full, flushing is behind; retry later")
	// ErrClosed: the backend is shutting down.
	ErrClosed = errors.New("node: closed")
	// ErrStoreUnavailable: the backend cannot use its store (corruption,
	// a full or failing disk); retry later, possibly elsewhere.
	ErrStoreUnavailable = errors.New("node: store unavailable")
)
