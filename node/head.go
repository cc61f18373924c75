package node

import (
	"cmp"
	"math"
	"slices"
	"sync"

	"github.com/tributarydb/tributary/node/chunk"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// memSeries is one series in the head: its identity and the samples not
// yet written to RocksDB.
//
// Samples of a series live in three places until flushed, in increasing
// precedence for equal timestamps (last write wins):
//
//	closed  full or hour-ended chunks waiting for the flush loop, oldest first
//	open    the chunk being appended to: sorted, unique, within one hour
//	ooo     out-of-order samples, in arrival order
//
// INVARIANT: every sample in ooo arrived after every sample with the same
// timestamp in closed and open (the open chunk only takes timestamps above
// its newest), and everything in the head arrived after everything in
// RocksDB (the flush writes ooo together with the open chunk).
type memSeries struct {
	id   uint64
	lset labels.Labels

	// definedSeq is the WAL segment this series was last defined in.
	// REQUIRES: Node.mu held.
	definedSeq uint64

	mu sync.Mutex // guards everything below
	// open chunk, compressed as it is appended to
	open         chunk.Appender
	openHour     int64
	openFirstSeq uint64
	openedAtNs   int64
	// newest timestamp seen since start (for the out-of-order window)
	maxT    int64
	hasMaxT bool
	ooo     []sample
	oooSeq  uint64 // WAL seq of the first ooo sample
	closed  []headChunk
	// closedBytes is the memory of the closed chunks (fixed once sealed);
	// bytes is the memory of all the samples above.
	closedBytes int64
	bytes       int64
}

type sample struct {
	t int64
	v float64
}

type headChunk struct {
	c        chunk.Sealed
	firstSeq uint64
}

// append adds one sample. It returns the change in the series' head memory
// and whether the open chunk was closed (the caller may wake the flush
// loop).
// REQUIRES: s.mu held.
func (s *memSeries) append(t int64, v float64, seq uint64, nowNs int64, chunkSamples int) (bytesDelta int64, closed bool) {
	if !s.hasMaxT || t > s.maxT {
		s.maxT, s.hasMaxT = t, true
	}
	n := s.open.Len()
	switch {
	case n == 0 && t >= s.maxT:
		// The newest sample, and no open chunk.
		s.startChunk(t, v, seq, nowNs)
	case n > 0 && t > s.open.LastT():
		if rollup.BucketStart(t, rollup.Hour) != s.openHour || n >= chunkSamples {
			s.closeOpen()
			s.startChunk(t, v, seq, nowNs)
			closed = true
		} else {
			s.open.Append(t, v)
		}
	default:
		// Older than the open chunk's newest sample, or a duplicate: the
		// flush merges it with what is stored, last write wins.
		if len(s.ooo) == 0 {
			s.oooSeq = seq
		}
		s.ooo = append(s.ooo, sample{t, v})
	}
	return s.resize(), closed
}

// resize recomputes the series' head memory and returns the change.
// REQUIRES: s.mu held.
func (s *memSeries) resize() int64 {
	b := int64(s.open.SizeBytes()+cap(s.ooo)*16) + s.closedBytes
	d := b - s.bytes
	s.bytes = b
	return d
}

func (s *memSeries) startChunk(t int64, v float64, seq uint64, nowNs int64) {
	s.open.Append(t, v)
	s.openHour = rollup.BucketStart(t, rollup.Hour)
	s.openFirstSeq = seq
	s.openedAtNs = nowNs
}

// closeOpen moves the open chunk to the closed list. REQUIRES: s.mu held.
func (s *memSeries) closeOpen() {
	if s.open.Len() == 0 {
		return
	}
	c := s.open.Seal()
	s.closed = append(s.closed, headChunk{c: c, firstSeq: s.openFirstSeq})
	s.closedBytes += int64(c.SizeBytes())
}

// firstSeq is the oldest WAL segment holding samples of this series that
// are not yet in RocksDB, or 0 when the head holds none.
// REQUIRES: s.mu held.
func (s *memSeries) firstSeq() uint64 {
	var m uint64
	take := func(q uint64) {
		if q != 0 && (m == 0 || q < m) {
			m = q
		}
	}
	for _, c := range s.closed {
		take(c.firstSeq)
	}
	if s.open.Len() > 0 {
		take(s.openFirstSeq)
	}
	if len(s.ooo) > 0 {
		take(s.oooSeq)
	}
	return m
}

// snapshot returns the head's samples of this series within [mint, maxt],
// sorted by time with duplicates resolved last-write-wins.
func (s *memSeries) snapshot(mint, maxt int64) []sample {
	var out []sample
	sc := decodeScratchPool.Get().(*decodeScratch)
	defer sc.put()
	ts, vs := sc.ts, sc.vs
	defer func() { sc.ts, sc.vs = ts, vs }()
	s.mu.Lock()
	for _, c := range s.closed {
		if c.c.LastT() >= mint && c.c.FirstT() <= maxt {
			ts, vs = c.c.AppendSamples(ts[:0], vs[:0])
			out = appendRange(out, ts, vs, mint, maxt)
		}
	}
	if s.open.Len() > 0 && s.open.LastT() >= mint && s.open.FirstT() <= maxt {
		ts, vs = s.open.AppendSamples(ts[:0], vs[:0])
		out = appendRange(out, ts, vs, mint, maxt)
	}
	for _, o := range s.ooo {
		if o.t >= mint && o.t <= maxt {
			out = append(out, o)
		}
	}
	s.mu.Unlock()
	return sortLWW(out)
}

// newest returns the sample snapshot(mint, maxt) ends with — the newest
// in [mint, maxt]; on an equal timestamp an out-of-order sample (the later
// one) wins over the open chunk, and the open chunk over the closed ones,
// a later closed chunk over an earlier one — decoding only the chunks that
// may hold it: sources are visited from the highest precedence down, and a
// chunk whose newest sample in range is not newer than the best so far is
// skipped.
func (s *memSeries) newest(mint, maxt int64) (sample, bool) {
	sc := decodeScratchPool.Get().(*decodeScratch)
	defer sc.put()
	var best sample
	found := false
	consider := func(x sample) { // x has lower precedence than every earlier x
		if !found || x.t > best.t {
			best, found = x, true
		}
	}
	fromChunk := func(firstT, lastT int64, decode func(ts []int64, vs []float64) ([]int64, []float64)) {
		if lastT < mint || firstT > maxt || (found && min(lastT, maxt) <= best.t) {
			return
		}
		ts, vs := decode(sc.ts[:0], sc.vs[:0])
		sc.ts, sc.vs = ts, vs
		i := len(ts)
		if maxt < math.MaxInt64 {
			i, _ = slices.BinarySearch(ts, maxt+1)
		}
		if i--; i >= 0 && ts[i] >= mint {
			consider(sample{ts[i], vs[i]})
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.ooo) - 1; i >= 0; i-- {
		if o := s.ooo[i]; o.t >= mint && o.t <= maxt {
			consider(o)
		}
	}
	if s.open.Len() > 0 {
		fromChunk(s.open.FirstT(), s.open.LastT(), s.open.AppendSamples)
	}
	for i := len(s.closed) - 1; i >= 0; i-- {
		c := s.closed[i].c
		fromChunk(c.FirstT(), c.LastT(), c.AppendSamples)
	}
	return best, found
}

// decodeScratch is a buffer for decoding one head chunk, reused across
// queries through decodeScratchPool.
type decodeScratch struct {
	ts []int64
	vs []float64
}

var decodeScratchPool = sync.Pool{New: func() any { return new(decodeScratch) }}

// maxScratchSamples bounds the buffers kept in decodeScratchPool.
const maxScratchSamples = 1 << 16

// put returns sc to the pool, unless a large chunk grew it past the bound.
func (sc *decodeScratch) put() {
	if cap(sc.ts) > maxScratchSamples || cap(sc.vs) > maxScratchSamples {
		return
	}
	decodeScratchPool.Put(sc)
}

func appendRange(dst []sample, ts []int64, vs []float64, mint, maxt int64) []sample {
	lo, _ := slices.BinarySearch(ts, mint)
	for i := lo; i < len(ts) && ts[i] <= maxt; i++ {
		dst = append(dst, sample{ts[i], vs[i]})
	}
	return dst
}

// sortLWW sorts samples by time, stably, and keeps the last of each run of
// equal timestamps: the input is in precedence order.
func sortLWW(ss []sample) []sample {
	sorted := slices.IsSortedFunc(ss, func(a, b sample) int { return cmp.Compare(a.t, b.t) })
	if !sorted {
		slices.SortStableFunc(ss, func(a, b sample) int { return cmp.Compare(a.t, b.t) })
	}
	out := ss[:0]
	for i, x := range ss {
		if i+1 < len(ss) && ss[i+1].t == x.t {
			continue
		}
		out = append(out, x)
	}
	return out
}

// mergeLWW merges two sorted, unique sample lists; on equal timestamps the
// newer list wins.
func mergeLWW(older, newer []sample) []sample {
	if len(newer) == 0 {
		return older
	}
	if len(older) == 0 {
		return newer
	}
	out := make([]sample, 0, len(older)+len(newer))
	i, j := 0, 0
	for i < len(older) && j < len(newer) {
		switch {
		case older[i].t < newer[j].t:
			out = append(out, older[i])
			i++
		case older[i].t > newer[j].t:
			out = append(out, newer[j])
			j++
		default:
			out = append(out, newer[j])
			i++
			j++
		}
	}
	out = append(out, older[i:]...)
	return append(out, newer[j:]...)
}
