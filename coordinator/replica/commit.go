package replica

import (
	"sync"

	"github.com/tributarydb/tributary/node"
)

// maxIndexBatch bounds the records of one index write (about 40 bytes
// each).
const maxIndexBatch = 1024

// indexCommitter writes the segment records of concurrent Applies into
// the index together (group commit): one engine batch and one sync of its
// store WAL for every record queued while the batch before was written.
// The caller whose record is first in the queue writes the batch (the
// leader), the others wait for its outcome; a leader leaving records in
// the queue hands the lead to the first of them.
type indexCommitter struct {
	// write stores records durably in one batch (the engine's
	// PutReplicaMetas, counted; tests wrap it).
	write func([]node.ReplicaMetaRecord) error

	mu      sync.Mutex
	queue   []*indexWait
	leading bool // a leader is writing; false: the queue is empty
}

// indexWait is a record waiting in the queue and how its caller learns
// what became of it.
type indexWait struct {
	rec  node.ReplicaMetaRecord
	done chan indexOutcome // buffered (1): one outcome
}

// indexOutcome is the outcome of a queued record: written (err nil),
// not written (err), or the lead handed to its caller (lead).
type indexOutcome struct {
	err  error
	lead bool
}

// put stores rec durably, in one batch with the records of concurrent
// callers, and returns once the batch is durable (or failed: then none of
// its records may be assumed stored).
func (c *indexCommitter) put(rec node.ReplicaMetaRecord) error {
	w := &indexWait{rec: rec, done: make(chan indexOutcome, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, w)
	if c.leading {
		c.mu.Unlock()
		if o := <-w.done; !o.lead {
			return o.err
		}
		c.mu.Lock()
	}
	// Leading: w is first in the queue (nothing else takes from it).
	c.leading = true
	n := min(len(c.queue), maxIndexBatch)
	group := c.queue[:n:n]
	c.queue = append([]*indexWait(nil), c.queue[n:]...)
	c.mu.Unlock()
	if group[0] != w {
		panic("BUG: replica index: the leader's record is not first in its batch")
	}
	recs := make([]node.ReplicaMetaRecord, len(group))
	for i, g := range group {
		recs[i] = g.rec
	}
	err := c.write(recs)
	c.mu.Lock()
	if len(c.queue) > 0 {
		c.queue[0].done <- indexOutcome{lead: true}
	} else {
		c.leading = false
	}
	c.mu.Unlock()
	for _, g := range group[1:] {
		g.done <- indexOutcome{err: err}
	}
	return err
}
