package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tributarydb/tributary/internal/vfs"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/internal/store"
)

// Store health.
//
// Every store call that can fail on the write side is watched: each flush
// round, the series dictionary write of a new series, and reads by
// queries and flushes. A failure is classified (store.Classify):
//
//   - corruption is persistent at once: bytes on disk fail their checksum,
//     and nothing but a repair brings them back. The node records the
//     damage in DataDir/store.damaged, so it stays unhealthy across
//     restarts until `tributary node repair` (Repair) removes the record.
//   - any other failure (a full disk, an I/O error, a busy store) is
//     transient until the store has failed Options.FailuresBeforeUnhealthy
//     consecutive times over at least Options.FailingBeforeUnhealthy; then
//     it is persistent until a store call succeeds again.
//
// While the store is unhealthy, Ready returns a *StoreError (so /readyz
// answers 503 and the gRPC health service NOT_SERVING), writes to existing
// series are still accepted while they are durable in the WAL and the
// unflushed data stays within its bounds (Options.HeadMaxBytes twice over,
// Options.UnflushedWALMaxBytes), then refused with a *StoreError, and
// writes that need a new series are refused at once (the series
// dictionary lives in the store). Nothing acknowledged is lost: the WAL
// keeps every segment whose samples did not reach the store, and Close
// keeps them when the final flush fails.

// Store health reasons: the Reason of a StoreHealth and a StoreError, and
// the reason attribute of the node's store health metric. A fixed set.
const (
	ReasonOK         = "ok"
	ReasonCorruption = "corruption"
	ReasonNoSpace    = "no_space"
	ReasonIOError    = "io_error"
	ReasonStoreError = "store_error"
)

// StoreReasons lists the reasons a store can be unhealthy for.
var StoreReasons = []string{ReasonCorruption, ReasonNoSpace, ReasonIOError, ReasonStoreError}

// StoreHealth is the state of the node's store.
type StoreHealth struct {
	// Healthy: the store takes flushes (and no damage is on record).
	Healthy bool
	// Reason is ReasonOK or one of StoreReasons.
	Reason string
	// Err is the failure that made the store unhealthy (or the last
	// transient one while it is still healthy).
	Err string
	// FailingSince is when the current run of failures began (for a
	// damaged store, when the damage was found); zero when none.
	FailingSince time.Time
	// Failures counts consecutive failed store calls.
	Failures int
	// Damaged: a corruption is on record; only Repair clears it.
	Damaged bool
	// WritesRefused: unflushed data reached its bound (or the head
	// cannot take new series): writes are refused until the store heals.
	WritesRefused bool
}

// StoreError refuses a write (or reports readiness) while the store is
// unhealthy. It matches model.ErrStoreUnavailable; clients should retry later
// (HTTP 503 with Retry-After, gRPC UNAVAILABLE).
type StoreError struct {
	Reason string    // one of StoreReasons
	Since  time.Time // when the store started failing
	Cause  string    // the store's error
	// What is refused and why, e.g. "new series cannot be recorded".
	What string
}

func (e *StoreError) Error() string {
	msg := fmt.Sprintf("node: store unavailable (%s since %s): %s", e.Reason, e.Since.UTC().Format(time.RFC3339), e.Cause)
	if e.What != "" {
		msg += "; " + e.What
	}
	return msg
}

// Is makes a StoreError match model.ErrStoreUnavailable.
func (e *StoreError) Is(target error) bool { return target == model.ErrStoreUnavailable }

// damageFileName is the record of a corruption found, in the data dir.
const damageFileName = "store.damaged"

// damageRecord is the content of damageFileName (JSON).
type damageRecord struct {
	Since  time.Time `json:"since"`
	Reason string    `json:"reason"`
	Error  string    `json:"error"`
}

// healthTracker classifies store failures. Safe for concurrent use.
type healthTracker struct {
	limit  int
	window time.Duration
	now    func() time.Time
	log    interface{ Error(string, ...any) }
	// damagePath is where a corruption is recorded (DataDir/store.damaged).
	damagePath string

	// unhealthy mirrors !state().Healthy for the write path.
	unhealthy atomic.Bool
	// refusing: writes are refused (bound reached); set by the flush loop.
	refusing atomic.Bool

	mu        sync.Mutex
	failures  int
	firstFail time.Time
	lastErr   error
	lastFault store.Fault
	// persistent: the current run of failures passed the threshold.
	persistent bool
	damage     *damageRecord
	// recorded: the damage is in damagePath (or writing it failed and
	// was logged); do not write it again.
	recorded bool
}

// loadDamage reads the damage record of a previous run, if any.
func (h *healthTracker) loadDamage() error {
	b, err := os.ReadFile(h.damagePath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", h.damagePath, err)
	}
	var d damageRecord
	if err := json.Unmarshal(b, &d); err != nil || d.Reason == "" {
		// A torn record still says the store is damaged.
		d = damageRecord{Since: h.now(), Reason: ReasonCorruption, Error: fmt.Sprintf("damage record %s is unreadable (%v)", h.damagePath, err)}
	}
	h.mu.Lock()
	h.damage, h.recorded = &d, true
	h.mu.Unlock()
	h.unhealthy.Store(true)
	return nil
}

// classify returns the fault of a failed node-level store or WAL call.
func classify(err error) store.Fault {
	if errors.Is(err, syscall.ENOSPC) {
		return store.FaultNoSpace
	}
	f := store.Classify(err)
	if f == store.FaultOther {
		var pe *fs.PathError
		var errno syscall.Errno
		if errors.As(err, &pe) || errors.As(err, &errno) {
			return store.FaultIO
		}
	}
	return f
}

// observe records the outcome of a store call: nil is a success. It
// returns whether the call made the store unhealthy.
func (h *healthTracker) observe(err error) (flipped bool) {
	f := classify(err)
	if err != nil && f == store.FaultNone {
		return false // the node or the store is closing: not a health matter
	}
	now := h.now()
	h.mu.Lock()
	was := h.healthyLocked()
	if err == nil {
		h.failures, h.firstFail, h.lastErr, h.persistent = 0, time.Time{}, nil, false
		h.lastFault = store.FaultNone
	} else {
		if h.failures == 0 {
			h.firstFail = now
		}
		h.failures++
		h.lastErr, h.lastFault = err, f
		if f == store.FaultCorruption && h.damage == nil {
			h.damage = &damageRecord{Since: now, Reason: ReasonCorruption, Error: err.Error()}
		}
		if h.failures >= h.limit && now.Sub(h.firstFail) >= h.window {
			h.persistent = true
		}
	}
	is := h.healthyLocked()
	var record *damageRecord
	if h.damage != nil && !h.recorded {
		h.recorded = true
		d := *h.damage
		record = &d
	}
	h.mu.Unlock()
	// NB: the record is on disk before the node says it is not ready, so
	// that whoever acts on the readiness (an operator stopping the node to
	// repair it) finds it.
	if record != nil {
		if werr := writeDamageRecord(h.damagePath, *record); werr != nil {
			h.log.Error("store damage found but not recorded on disk; the node stays unready only until it restarts", "err", werr)
		}
	}
	h.unhealthy.Store(!h.healthy())
	return was && !is
}

func (h *healthTracker) healthy() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.healthyLocked()
}

// healthyLocked: REQUIRES h.mu held.
func (h *healthTracker) healthyLocked() bool { return h.damage == nil && !h.persistent }

// state returns the health.
func (h *healthTracker) state() StoreHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := StoreHealth{Healthy: h.healthyLocked(), Reason: ReasonOK, Failures: h.failures,
		FailingSince: h.firstFail, Damaged: h.damage != nil, WritesRefused: h.refusing.Load()}
	if h.lastErr != nil {
		st.Err = h.lastErr.Error()
	}
	switch {
	case h.damage != nil:
		st.Reason, st.Err, st.FailingSince = h.damage.Reason, h.damage.Error, h.damage.Since
	case h.persistent:
		st.Reason = reasonOf(h.lastFault)
	}
	return st
}

// storeError describes the unhealthy store for a refusal; nil while the
// store is healthy.
func (h *healthTracker) storeError(what string) *StoreError {
	st := h.state()
	if st.Healthy {
		return nil
	}
	return &StoreError{Reason: st.Reason, Since: st.FailingSince, Cause: st.Err, What: what}
}

func reasonOf(f store.Fault) string {
	switch f {
	case store.FaultNone:
		return ReasonOK
	case store.FaultCorruption:
		return ReasonCorruption
	case store.FaultNoSpace:
		return ReasonNoSpace
	case store.FaultIO:
		return ReasonIOError
	}
	return ReasonStoreError
}

// writeDamageRecord writes d to path durably (vfs.WriteFileAtomic; without
// the fsyncs, a power cut could forget the record and let a damaged store
// look healthy). Like the store beside it, the record is on the real file
// system, not on Options.WALFS.
func writeDamageRecord(path string, d damageRecord) error {
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return writeFileDurable(path, append(b, '\n'))
}

func writeFileDurable(path string, data []byte) error {
	if err := vfs.WriteFileAtomic(vfs.OS{}, path, 0o644, data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// removeFileDurable removes path (absent is fine) and syncs its directory.
func removeFileDurable(path string) error {
	fsys := vfs.OS{}
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// injectedFault is the test seam of a failing store: when set, the store
// writes of flush rounds and of new series fail with what it returns.
func (n *Node) injectedFault() error {
	if f := n.storeFault.Load(); f != nil {
		return (*f)()
	}
	return nil
}

// StoreHealth reports the state of the node's store.
func (n *Node) StoreHealth() StoreHealth { return n.health.state() }

// noteStoreErr records the outcome of a read of the store (a query, a
// flush's read of stored chunks or rollups): only a corruption counts, a
// read that merely failed (a closed store, a cancelled query) says nothing
// about the store's health.
func (n *Node) noteStoreErr(err error) {
	if err != nil && classify(err) == store.FaultCorruption {
		if n.health.observe(err) {
			n.log.Error("store is damaged: the node is not ready until it is repaired (tributary node repair)", "err", err)
		}
	}
}

// writeBound says why writes must be refused while the store is
// unhealthy, or "" while unflushed data is within its bounds.
func (n *Node) writeBound() string {
	if hb := n.headBytes.Load(); hb > 2*n.opts.HeadMaxBytes {
		return fmt.Sprintf("unflushed samples hold %d bytes of memory, the bound is %d (2 x --head-max-bytes); writes are refused until the store takes flushes again", hb, 2*n.opts.HeadMaxBytes)
	}
	if wb := n.unflushedWALBytes.Load(); wb > n.opts.UnflushedWALMaxBytes {
		return fmt.Sprintf("WAL segments not flushed to the store hold %d bytes, the bound is %d (--wal-max-unflushed-bytes); writes are refused until the store takes flushes again", wb, n.opts.UnflushedWALMaxBytes)
	}
	return ""
}

// updateUnflushedWAL measures, while the store is unhealthy, the WAL
// bytes flushes have not released (flush loop only). A healthy store
// needs no measure: the bound applies only while it cannot flush.
func (n *Node) updateUnflushedWAL() {
	var total int64
	if n.health.unhealthy.Load() {
		low := n.flushedLow
		for _, s := range n.wal.Segments() {
			if s.Seq >= low {
				total += s.Bytes
			}
		}
	}
	n.unflushedWALBytes.Store(total)
	refuse := n.health.unhealthy.Load() && n.writeBound() != ""
	if n.health.refusing.Swap(refuse) != refuse {
		if refuse {
			n.log.Error("store cannot flush and unflushed data reached its bound: writes are refused (retryable) until it heals or is repaired",
				"head_bytes", n.headBytes.Load(), "unflushed_wal_bytes", total)
		} else {
			n.log.Info("writes are accepted again")
		}
	}
}
