package chunk

import (
	"math"
	"math/bits"
)

// maxBuckets is the most buckets a code may have (a 3-bit field).
const maxBuckets = 8

// code is a per-chunk prefix code for unsigned integers (see "Bucket
// codes" in the package doc). Bucket j holds [lo[j], lo[j]+2^width[j]) and
// is selected by a truncated-unary prefix: j one bits then a zero bit,
// except the last bucket, which is last one bits and no zero.
type code struct {
	last  uint8 // index of the last bucket (k-1)
	width [maxBuckets]uint8
	plen  [maxBuckets]uint8 // prefix length in bits
	pat   [maxBuckets]uint64
	lo    [maxBuckets]uint64
}

// makeCode builds a code from bucket widths. REQUIRES: 1 <= len(widths) <=
// maxBuckets and every width <= 64.
func makeCode(widths []uint8) code {
	var c code
	c.last = uint8(len(widths) - 1)
	var lo uint64
	for j, w := range widths {
		c.width[j] = w
		c.lo[j] = lo
		if j < int(c.last) {
			c.plen[j] = uint8(j + 1)
			c.pat[j] = (1<<j - 1) << 1
		} else {
			c.plen[j] = uint8(j)
			c.pat[j] = 1<<j - 1
		}
		lo += 1 << w // NB: wraps (1<<64 is 0); only the decoder sees such tables
	}
	return c
}

// tableBits is the size of a k-bucket table in the stream.
func tableBits(k int) int { return 3 + 7*k }

// minBits returns the fewest bits any value costs under c.
func (c *code) minBits() int {
	m := math.MaxInt
	for j := 0; j <= int(c.last); j++ {
		m = min(m, int(c.plen[j])+int(c.width[j]))
	}
	return m
}

// writeTable writes the table: k-1 in 3 bits, then k widths of 7 bits.
func (c *code) writeTable(w *bitWriter) {
	w.write(uint64(c.last), 3)
	for j := 0; j <= int(c.last); j++ {
		w.write(uint64(c.width[j]), 7)
	}
}

// readTable reads a table written by writeTable.
func readTable(r *bitReader) (code, bool) {
	var widths [maxBuckets]uint8
	k := int(r.read(3)) + 1
	for j := range k {
		w := r.read(7)
		if w > 64 {
			return code{}, false
		}
		widths[j] = uint8(w)
	}
	return makeCode(widths[:k]), true
}

// get reads one value.
func (c *code) get(r *bitReader) uint64 {
	if r.n < 56 {
		r.refill()
	}
	j := uint(bits.LeadingZeros64(^r.buf)) // leading one bits
	if j > uint(c.last) {
		j = uint(c.last)
	}
	pl, wd := uint(c.plen[j]), uint(c.width[j])
	if pl+wd <= r.n {
		v := r.buf << pl >> (64 - wd) // NB: wd == 0 shifts by 64, giving 0
		r.buf <<= pl + wd
		r.n -= pl + wd
		return c.lo[j] + v
	}
	r.read(pl)
	return c.lo[j] + r.read(wd)
}

// smallValues is how many small values a histogram counts one by one;
// larger ones are counted by bit length.
const smallValues = 16

// histLen is the size of a histogram: 16 small values, then bit lengths
// 5..64 at 11+length.
const histLen = 11 + 64 + 1

// histogram counts values: h[u] for u < 16, and h[11+b] for values of bit
// length b >= 5. Exact counts for small values let the planner see that,
// say, {0, 1, 2} fits buckets [0,1) and [1,3), which bit lengths alone
// cannot tell.
type histogram [histLen]int32

func (h *histogram) add(u uint64) {
	// For u < 16, u <= 11+bits.Len64(u); for u >= 16, u >= 11+bits.Len64(u).
	h[min(u, uint64(11+bits.Len64(u)))]++
}

// planCode returns the cheapest code for the values counted in h and its
// cost in bits: the table plus every value.
//
// Widths ascend, so each bucket starts below 2^width and buckets 0..j
// together cover at least [0, 2^width_j). Narrow buckets (width <= 4) are
// searched exactly: a set of distinct narrow widths is a bit mask, and the
// mask is where the next bucket starts, so the states form a tree rooted
// at 0. Wide buckets take widths from the bit lengths present in h and are
// charged as if bucket j covered only [.., 2^width_j), so the returned cost
// is exact for small values and an upper bound otherwise.
//
// maxU is the largest value counted in h.
func planCode(h *histogram, maxU uint64, sc *planScratch) (code, int) {
	// maxSmall is the largest small value; the last bucket must reach it
	// when no value is larger, so take it from maxU then, not from h.
	maxSmall := int(min(maxU, smallValues-1))
	for maxU >= smallValues && maxSmall >= 0 && h[maxSmall] == 0 {
		maxSmall--
	}
	cf := &sc.cf
	for x := range maxSmall + 1 {
		cf[x+1] = cf[x] + int(h[x])
	}
	for x := maxSmall + 2; x < len(cf); x++ {
		cf[x] = cf[maxSmall+1]
	}
	maxLen := bits.Len64(maxU) // of the values >= smallValues, if any
	if maxU < smallValues {
		maxLen = 0
	}
	total := cf[smallValues]
	for b := narrowMax + 1; b <= maxLen; b++ {
		total += int(h[11+b])
	}
	if total == 0 {
		return makeCode([]uint8{0}), tableBits(1)
	}

	best := math.MaxInt
	bestMask, bestLast := 0, 0
	// Depth-first over narrow masks. Only masks up to maxSmall have
	// children: past it every small value is covered already.
	stack, open := &sc.stack, &sc.open
	stack[0] = narrowState{}
	sp := 1
	nOpen := 0
	for sp > 0 {
		sp--
		st := stack[sp]
		lo := st.lo
		m := bits.Len(uint(lo)) - 1 // widest narrow bucket, -1 if none
		j := bits.OnesCount(uint(lo))
		// The last bucket from here.
		w := m + 1
		if maxLen > 0 {
			w = max(w, maxLen)
		} else {
			for lo+1<<w <= maxSmall {
				w++
			}
		}
		if c := st.cost + (j+w)*(total-cf[lo]) + tableBits(j+1); c < best {
			best, bestMask, bestLast = c, lo, w
		}
		if j+1 >= maxBuckets {
			continue
		}
		if maxLen > 0 {
			st.covered = cf[lo]
			open[nOpen] = st
			nOpen++
		}
		if lo > maxSmall {
			continue
		}
		for w := m + 1; w <= narrowMax; w++ {
			next := lo + 1<<w
			stack[sp] = narrowState{lo: next, cost: st.cost + (j+1+w)*(cf[next]-cf[lo])}
			sp++
			if next > maxSmall {
				break
			}
		}
	}
	var widths [maxBuckets]uint8
	k := 0
	if maxLen > 0 {
		if c, mask, ws, nw := planWide(h, maxLen, cf[smallValues], total, open[:nOpen], sc); c < best {
			best, bestMask, bestLast = c, mask, maxLen
			k = bits.OnesCount(uint(mask))
			copy(widths[k:], ws[:nw])
			k += nw
		}
	}
	if k == 0 {
		k = bits.OnesCount(uint(bestMask))
	}
	x := 0
	for w := range narrowMax + 1 {
		if bestMask&(1<<w) != 0 {
			widths[x] = uint8(w)
			x++
		}
	}
	widths[k] = uint8(bestLast)
	return makeCode(widths[:k+1]), best
}

// narrowMax is the widest narrow bucket: 2^narrowMax == smallValues.
const narrowMax = 4

// planScratch is planCode's working memory, kept between chunks so that it
// need not be zeroed each time (Go zeroes local arrays).
type planScratch struct {
	cf    [2 * smallValues]int // small values below x
	stack [narrowMax * (narrowMax + 1)]narrowState
	open  [2 * smallValues]narrowState // narrow sets a wide bucket may follow
	// planWide: dp[j][i] is the cheapest j non-last buckets whose last
	// has width lens[i]; it came from open[fromOpen] (if >= 0) or from
	// dp[j-1][fromWide].
	dp       [maxBuckets][maxWide]int
	fromOpen [maxBuckets][maxWide]int8
	fromWide [maxBuckets][maxWide]int8
	hist     [3]histogram // planInts
}

// maxWide is the most wide widths planWide considers: every length >= 5
// below the largest.
const maxWide = 64 - narrowMax - 1

// narrowState is a set of narrow buckets: lo is the mask of their widths
// and where the next bucket starts; cost is what they cost and covered how
// many values they hold.
type narrowState struct{ lo, cost, covered int }

// planWide extends the narrow bucket sets in open with wide buckets, whose
// widths are the bit lengths >= 5 present below maxLen; the last bucket
// then has width maxLen. It returns the cheapest such plan: its cost, its
// narrow mask and its nw wide widths. small counts the values below 16.
func planWide(h *histogram, maxLen, small, total int, open []narrowState, sc *planScratch) (cost, mask int, widths [maxBuckets]uint8, nw int) {
	var lens [maxWide]uint8 // candidate widths, ascending
	var below [maxWide]int  // values below 2^lens[i]
	n := 0
	cum := small
	for b := 5; b < maxLen; b++ {
		cum += int(h[11+b])
		if h[11+b] != 0 {
			lens[n], below[n] = uint8(b), cum
			n++
		}
	}
	cost = math.MaxInt
	if n == 0 {
		return cost, 0, widths, 0
	}
	dp, fromOpen, fromWide := &sc.dp, &sc.fromOpen, &sc.fromWide
	for j := range dp {
		for i := range n {
			dp[j][i] = math.MaxInt
		}
	}
	for oi, st := range open {
		j := bits.OnesCount(uint(st.lo)) + 1 // buckets once the wide one is added
		for i := range n {
			if v := st.cost + (j+int(lens[i]))*(below[i]-st.covered); v < dp[j][i] {
				dp[j][i], fromOpen[j][i] = v, int8(oi)
			}
		}
	}
	bj, bi := -1, -1
	for j := 1; j < maxBuckets; j++ {
		for i := range n {
			c0 := dp[j][i]
			if c0 == math.MaxInt {
				continue
			}
			if c := c0 + (j+maxLen)*(total-below[i]) + tableBits(j+1); c < cost {
				cost, bj, bi = c, j, i
			}
			if j+1 >= maxBuckets {
				continue
			}
			for i2 := i + 1; i2 < n; i2++ {
				v := c0 + (j+1+int(lens[i2]))*(below[i2]-below[i])
				if v < dp[j+1][i2] {
					dp[j+1][i2], fromOpen[j+1][i2], fromWide[j+1][i2] = v, -1, int8(i)
				}
			}
		}
	}
	if bj < 0 {
		return cost, 0, widths, 0
	}
	// Walk back to the narrow state, collecting wide widths last first.
	var rev [maxBuckets]uint8
	for {
		rev[nw] = lens[bi]
		nw++
		if oi := fromOpen[bj][bi]; oi >= 0 {
			mask = open[oi].lo
			break
		}
		bi = int(fromWide[bj][bi])
		bj--
	}
	for x := range nw {
		widths[x] = rev[nw-1-x]
	}
	return cost, mask, widths, nw
}
