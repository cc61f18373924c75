package store

// The link flags are grocksdb's own (its non_builtin.go), so this package
// links no library that grocksdb does not, and the static build's
// CGO_LDFLAGS apply to both alike.
//
// noescape: C copies what it keeps (the upper bound) and writes into the
// batch buffer only during the call, so the Go arguments need not escape.
// nocallback: RocksDB runs no Go code during a scan, because the store uses
// only built-in comparators, filters and prefix extractors; a Go-implemented
// one would crash here until the nocallback lines are removed.

// #cgo LDFLAGS: -lrocksdb -pthread -lstdc++ -ldl -lm -lzstd -llz4 -lz -lsnappy
// #cgo noescape store_scan_open
// #cgo nocallback store_scan_open
// #cgo noescape store_scan_fill
// #cgo nocallback store_scan_fill
// #include "scan.h"
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/linxGnu/grocksdb"
)

// scanMode selects how a scan's iterator treats prefixes.
type scanMode int

const (
	// scanTotal seeks in total key order and ignores the prefix blooms.
	scanTotal scanMode = iota
	// scanPrefix stays within the 16-byte partition|series prefix of each
	// seek key, and lets the prefix blooms skip the SST files without it.
	scanPrefix
)

// Batch buffer sizes.
const (
	// scanBufBytes holds ~400 daily rollups or ~150 chunks of 180 bytes:
	// a partition of one series' rollups in one cgo call, yet little to
	// read ahead when a callback stops a scan early.
	scanBufBytes = 32 << 10
	// A buffer grown past this for one large entry is not pooled.
	maxPooledScanBytes = 1 << 20
)

var scanPool = sync.Pool{New: func() any { return &scan{buf: make([]byte, scanBufBytes)} }}

// scan reads a RocksDB iterator in batches. Each cgo call (scan.c) seeks if
// asked to and copies as many entries as fit into a Go buffer, as
//
//	[u32 key length][key][u32 value length][value]   lengths in host byte order
//
// and next hands them out without calling C. This costs one cgo call per
// batch instead of about four per entry through grocksdb's Iterator.
//
// A scan reads in windows: seek, seekLast and resume each open one, which
// ends at an exclusive limit key, after a number of entries, or at the end
// of the column family (or the scan's upper bound). Windows let a scan stop
// exactly where its caller does, so that batching reads nothing a
// one-entry-at-a-time iterator would not have read, unless a callback stops
// the read early.
//
// Keys and values returned by next alias the buffer: they are valid until
// the next call of next, seek, seekLast, resume or close. A scan is not
// safe for concurrent use.
type scan struct {
	c *C.store_scan

	buf   []byte // batch buffer, pooled with the scan
	batch []byte // entries of buf that next has not returned yet

	// The window.
	mode     C.int  // how the next fill positions the iterator
	seekKey  []byte // copy of the seek key
	limit    []byte // copy of the exclusive limit, if hasLimit
	hasLimit bool
	left     int  // entries the window may still return; < 0: any number
	done     bool // the window holds nothing more

	// err is the iterator error that ended the scan, if any. It stays:
	// every later window is empty.
	err error
}

// openScan opens a scan over cf. If upper is not nil, RocksDB reads no key
// at or past it. The scan is positioned nowhere: seek or seekLast first.
// REQUIRES: db acquired until the scan is closed.
func (db *DB) openScan(cf *grocksdb.ColumnFamilyHandle, mode scanMode, upper []byte) *scan {
	var prefix C.int
	if mode == scanPrefix {
		prefix = 1
	}
	var up *C.char
	if upper != nil {
		up = cBytes(upper)
	}
	s := scanPool.Get().(*scan)
	s.c = C.store_scan_open((*C.rocksdb_t)(cPtr(db.rdb)), (*C.rocksdb_column_family_handle_t)(cPtr(cf)),
		prefix, up, C.size_t(len(upper)))
	if s.c == nil {
		panic("store: out of C memory opening a scan")
	}
	s.done = true // positioned nowhere
	return s
}

// close frees the iterator and returns the buffer to the pool.
func (s *scan) close() {
	C.store_scan_close(s.c) // INVARIANT: the only place that frees a scan's C memory
	*s = scan{buf: s.buf, seekKey: s.seekKey[:0], limit: s.limit[:0]}
	if cap(s.buf) <= maxPooledScanBytes {
		scanPool.Put(s)
	}
}

// seek opens a window at the first key >= key (at the first key if key is
// empty) that returns at most maxEntries entries (0: any number) with keys
// below limit (nil: no limit). Entries of the last window that next has not
// returned are dropped.
func (s *scan) seek(key, limit []byte, maxEntries int) {
	s.seekKey = append(s.seekKey[:0], key...)
	s.window(C.STORE_SCAN_SEEK, limit, maxEntries)
}

// seekLast opens a window of the last key alone.
func (s *scan) seekLast() {
	s.window(C.STORE_SCAN_LAST, nil, 1)
}

// resume opens a window where the last one stopped: at the first key it did
// not return.
// REQUIRES: next returned every entry the last window read (its final
// call, or the one that reached maxEntries).
func (s *scan) resume(limit []byte, maxEntries int) {
	if len(s.batch) > 0 {
		panic("BUG: store: scan resumed with unread entries")
	}
	s.window(C.STORE_SCAN_CONTINUE, limit, maxEntries)
}

func (s *scan) window(mode C.int, limit []byte, maxEntries int) {
	s.mode, s.batch = mode, nil
	s.hasLimit = limit != nil
	s.limit = append(s.limit[:0], limit...)
	s.left = -1
	if maxEntries > 0 {
		s.left = maxEntries
	}
	// No key is below an empty limit; C reads a NULL limit as none.
	s.done = s.err != nil || (s.hasLimit && len(limit) == 0)
}

// next returns the next entry of the window. When it reports false, the
// window is over, and s.err tells whether because of an error.
func (s *scan) next() (key, val []byte, ok bool) {
	if len(s.batch) == 0 && !s.fill() {
		return nil, nil, false
	}
	b := s.batch
	n := int(binary.NativeEndian.Uint32(b))
	key, b = b[4:4+n:4+n], b[4+n:]
	n = int(binary.NativeEndian.Uint32(b))
	val, s.batch = b[4:4+n:4+n], b[4+n:]
	return key, val, true
}

// fill reads the next batch of the window into buf.
func (s *scan) fill() bool {
	for !s.done {
		var limit *C.char
		if s.hasLimit {
			limit = cBytes(s.limit)
		}
		maxEntries := max(s.left, 0)
		r := C.store_scan_fill(s.c, s.mode, cBytes(s.seekKey), C.size_t(len(s.seekKey)),
			limit, C.size_t(len(s.limit)), C.size_t(maxEntries), cBytes(s.buf), C.size_t(len(s.buf)))
		s.mode = C.STORE_SCAN_CONTINUE
		if r.err != nil {
			s.err = errors.New(C.GoString(r.err))
		}
		s.done = r.done != 0 || r.err != nil
		if r.need > 0 {
			// One entry larger than the buffer: grow it and read it again,
			// from where the iterator stopped.
			s.buf = make([]byte, max(int(r.need), 2*len(s.buf)))
			continue
		}
		if s.left > 0 {
			s.left -= int(r.count)
			s.done = s.done || s.left == 0
		}
		if r.count > 0 {
			s.batch = s.buf[:r.used]
			return true
		}
		if !s.done {
			panic(fmt.Sprintf("BUG: store: scan fill returned nothing and is not done (%+v)", r))
		}
	}
	return false
}

// cBytes returns a C view of b for the duration of one cgo call; C must
// not keep it.
func cBytes(b []byte) *C.char { return (*C.char)(unsafe.Pointer(unsafe.SliceData(b))) }

// cPtr returns the C object that a grocksdb DB or column family handle
// wraps.
//
// NB: grocksdb v1.7.11 keeps these pointers in unexported fields and has no
// accessor for them, yet scans create their iterators in C. Both structs
// begin with the pointer:
//
//	type DB struct { c *C.rocksdb_t; ... }
//	type ColumnFamilyHandle struct { c *C.rocksdb_column_family_handle_t }
//
// so cPtr reads the first word. It is the only code that depends on
// grocksdb's layout: Open checks its results against grocksdb (checkNative),
// and TestScan_MatchesGrocksdbIterator compares scans with grocksdb's own
// iterator, so an upgrade that moves the field fails loudly instead of
// reading garbage. If grocksdb ever exports the pointers, use that instead.
func cPtr[T grocksdb.DB | grocksdb.ColumnFamilyHandle](v *T) unsafe.Pointer {
	p := *(*unsafe.Pointer)(unsafe.Pointer(v))
	if p == nil {
		panic(fmt.Sprintf("BUG: store: %T wraps no C object (destroyed, or grocksdb's layout changed)", v))
	}
	return p
}

// checkNative checks cPtr against grocksdb: the id of every column family
// handle, and the DB's latest sequence number, must be the same through
// the C pointers as through grocksdb.
// REQUIRES: no concurrent writes (called from Open).
func (db *DB) checkNative() {
	for i, h := range db.handles {
		got := uint32(C.rocksdb_column_family_handle_get_id((*C.rocksdb_column_family_handle_t)(cPtr(h))))
		if want := h.ID(); got != want {
			panic(fmt.Sprintf("BUG: store: column family %s has id %d through cPtr, %d through grocksdb: grocksdb's layout changed",
				cfSpecs[i].name, got, want))
		}
	}
	got := uint64(C.rocksdb_get_latest_sequence_number((*C.rocksdb_t)(cPtr(db.rdb))))
	if want := db.rdb.GetLatestSequenceNumber(); got != want {
		panic(fmt.Sprintf("BUG: store: latest sequence number %d through cPtr, %d through grocksdb: grocksdb's layout changed", got, want))
	}
}
