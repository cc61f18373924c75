package node

import (
	"errors"
	"fmt"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/internal/store"
)

// replicaMetaPrefix reserves a part of the store's meta column family for
// the coordinator's replica store (package coordinator/replica), which runs
// a Node to hold the data edges replicate to it and keeps its own small
// records (which segment of which edge it applied, with which checksum)
// beside the data. Nothing else in the node writes keys with this prefix.
const replicaMetaPrefix = "replica."

// GetReplicaMeta returns a copy of the replica record stored under key, and
// whether there is one.
func (n *Node) GetReplicaMeta(key string) ([]byte, bool, error) {
	if n.closed.Load() {
		return nil, false, model.ErrClosed
	}
	if key == "" {
		return nil, false, errors.New("get replica meta: empty key")
	}
	v, ok, err := n.db.GetMeta(replicaMetaPrefix + key)
	if err != nil {
		return nil, false, fmt.Errorf("get replica meta %q: %w", key, err)
	}
	return v, ok, nil
}

// PutReplicaMeta stores val under key and returns once it is durable
// (RocksDB's WAL is synced). It does not order itself after samples still
// in the node's head: a caller that records "these points are stored" must
// call it only after the Write that stored them returned.
func (n *Node) PutReplicaMeta(key string, val []byte) error {
	if key == "" {
		return errors.New("put replica meta: empty key")
	}
	// Durable before it returns: without the sync a power cut could lose
	// the record while the caller acted on it (e.g. acknowledged a
	// segment as held).
	return n.writeReplicaMeta(fmt.Sprintf("put replica meta %q", key), func(b *store.Batch) { b.PutMeta(replicaMetaPrefix+key, val) })
}

// ReplicaMetaRecord is a record PutReplicaMetas stores.
type ReplicaMetaRecord struct {
	Key string
	Val []byte
}

// PutReplicaMetas stores every record (in order: of two with the same key
// the later wins) in one batch, atomically, and returns once they are
// durable, like PutReplicaMeta but with one write lock and one sync of
// RocksDB's WAL for all of them: a caller that gathers the records of
// concurrent callers shares a sync among them (group commit).
func (n *Node) PutReplicaMetas(recs []ReplicaMetaRecord) error {
	for _, r := range recs {
		if r.Key == "" {
			return errors.New("put replica meta: empty key")
		}
	}
	if len(recs) == 0 {
		return nil
	}
	return n.writeReplicaMeta(fmt.Sprintf("put %d replica meta records", len(recs)), func(b *store.Batch) {
		for _, r := range recs {
			b.PutMeta(replicaMetaPrefix+r.Key, r.Val)
		}
	})
}

// ScanReplicaMeta calls fn for every replica record whose key starts with
// prefix ("" for all), in key order, with the key as PutReplicaMeta was
// given it. val is only valid during the call. It stops at the first
// error fn returns (returned as is). Records put or deleted meanwhile may
// or may not be seen.
func (n *Node) ScanReplicaMeta(prefix string, fn func(key string, val []byte) error) error {
	if n.closed.Load() {
		return model.ErrClosed
	}
	var fnErr error
	err := n.db.ScanMeta(replicaMetaPrefix+prefix, func(k, v []byte) error {
		fnErr = fn(string(k[len(replicaMetaPrefix):]), v)
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("scan replica meta %q: %w", prefix, err)
	}
	return nil
}

// DeleteReplicaMeta deletes the record under key (if any) and returns once
// that is durable.
func (n *Node) DeleteReplicaMeta(key string) error {
	if key == "" {
		return errors.New("delete replica meta: empty key")
	}
	return n.writeReplicaMeta("delete replica meta "+key, func(b *store.Batch) { b.DeleteMeta(replicaMetaPrefix + key) })
}

// DeleteReplicaMetaPrefix deletes every record whose key starts with one
// of prefixes (none empty), in one batch, and returns once that is
// durable. Its cost does not depend on the number of records.
func (n *Node) DeleteReplicaMetaPrefix(prefixes ...string) error {
	for _, p := range prefixes {
		if p == "" {
			return errors.New("delete replica meta: empty prefix")
		}
	}
	return n.writeReplicaMeta(fmt.Sprintf("delete replica meta under %q", prefixes), func(b *store.Batch) {
		for _, p := range prefixes {
			b.DeleteMetaPrefix(replicaMetaPrefix + p)
		}
	})
}

// writeReplicaMeta writes one batch built by fill under the write lock,
// which Close takes before it closes the store (a batch must not be built
// on a closed store), and syncs RocksDB's WAL.
func (n *Node) writeReplicaMeta(what string, fill func(*store.Batch)) error {
	err := func() error {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.closed.Load() {
			return model.ErrClosed
		}
		b := n.db.NewBatch()
		defer b.Close()
		fill(b)
		return n.db.Write(b)
	}()
	if err == nil {
		err = n.db.SyncWAL()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
