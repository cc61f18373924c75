package record

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/tributarydb/tributary/internal/binread"
	"github.com/tributarydb/tributary/node/chunk"
)

// compressor gathers a KindCompressed payload: the string table and the
// definitions as they come, the samples by series until appendTo.
type compressor struct {
	strs    []byte            // the string table's entries, encoded
	nStrs   int               // entries in strs
	index   map[string]uint64 // entry → its index
	defs    []byte            // encoded definitions
	nDefs   int
	byID    map[uint64]int // series id → its slot in series
	series  []pending      // in the order of their first run
	used    int            // slots of series in use
	encoded int64          // samples appendTo wrote
	rebuilt int            // bytes of the keys defined through the table

	// scratch of appendTo
	order  []int32
	ts     []int64
	chunkb []byte
}

// pending is the samples one record holds for a series, as added.
type pending struct {
	id     uint64
	ts     []int64
	vs     []float64
	sorted bool // ts strictly increasing so far
}

func (c *compressor) reset() {
	c.strs, c.nStrs, c.defs, c.nDefs = c.strs[:0], 0, c.defs[:0], 0
	clear(c.index)
	clear(c.byID)
	c.used, c.encoded, c.rebuilt = 0, 0, 0
}

// str returns the table index of s, adding it if new.
func (c *compressor) str(s []byte) uint64 {
	if i, ok := c.index[string(s)]; ok {
		return i
	}
	if c.index == nil {
		c.index = map[string]uint64{}
	}
	i := uint64(c.nStrs)
	c.index[string(s)] = i
	c.nStrs++
	c.strs = binary.AppendUvarint(c.strs, uint64(len(s)))
	c.strs = append(c.strs, s...)
	return i
}

func (c *compressor) define(id uint64, key []byte) {
	c.nDefs++
	c.defs = binary.AppendUvarint(c.defs, id)
	// A canonical labels key: a count, then 2×count length-prefixed
	// strings, and nothing after them.
	n, k := binary.Uvarint(key)
	if k > 0 && n <= uint64(len(key)) {
		rest := key[k:]
		var strs [64][]byte
		parts := strs[:0]
		ok := true
		for range 2 * n {
			l, k := binary.Uvarint(rest)
			if k <= 0 || l > uint64(len(rest)-k) {
				ok = false
				break
			}
			parts = append(parts, rest[k:k+int(l)])
			rest = rest[k+int(l):]
		}
		// A key the decoder would refuse to rebuild (MaxKeyBytes,
		// MaxDefinedKeyBytes) is stored literally.
		if ok && len(rest) == 0 && len(key) <= MaxKeyBytes && c.rebuilt+len(key) <= MaxDefinedKeyBytes {
			c.rebuilt += len(key)
			c.defs = binary.AppendUvarint(c.defs, n+1)
			for _, s := range parts {
				c.defs = binary.AppendUvarint(c.defs, c.str(s))
			}
			return
		}
	}
	c.defs = binary.AppendUvarint(c.defs, 0)
	c.defs = binary.AppendUvarint(c.defs, uint64(len(key)))
	c.defs = append(c.defs, key...)
}

func (c *compressor) add(id uint64, ts []int64, vs []float64) {
	slot, ok := c.byID[id]
	if !ok {
		if c.byID == nil {
			c.byID = map[uint64]int{}
		}
		slot = c.used
		c.used++
		if slot == len(c.series) {
			c.series = append(c.series, pending{})
		}
		p := &c.series[slot]
		p.id, p.ts, p.vs, p.sorted = id, p.ts[:0], p.vs[:0], true
		c.byID[id] = slot
	}
	p := &c.series[slot]
	if p.sorted {
		prev, has := int64(0), len(p.ts) > 0
		if has {
			prev = p.ts[len(p.ts)-1]
		}
		for _, t := range ts {
			if has && t <= prev {
				p.sorted = false
				break
			}
			prev, has = t, true
		}
	}
	p.ts = append(p.ts, ts...)
	p.vs = append(p.vs, vs...)
}

// appendTo appends the payload, with timestamps less base.
func (c *compressor) appendTo(dst []byte, base int64) []byte {
	dst = append(dst, KindCompressed)
	dst = binary.AppendUvarint(dst, uint64(c.nStrs))
	dst = append(dst, c.strs...)
	dst = binary.AppendUvarint(dst, uint64(c.nDefs))
	dst = append(dst, c.defs...)
	dst = binary.AppendVarint(dst, base)
	// The run count is known once the runs are cut; they go to c.chunkb's
	// tail first.
	runs := 0
	body := c.chunkb[:0]
	for i := range c.used {
		p := &c.series[i]
		ts, vs := p.ts, p.vs
		if !p.sorted {
			ts, vs = c.sortDedup(ts, vs)
		}
		c.ts = slices.Grow(c.ts[:0], len(ts))[:len(ts)]
		for j, t := range ts {
			c.ts[j] = t - base
		}
		c.encoded += int64(len(ts))
		for off := 0; off < len(ts); off += chunk.MaxSamples {
			end := min(len(ts), off+chunk.MaxSamples)
			body = binary.AppendUvarint(body, p.id)
			// The chunk's length goes before it: encode it after a
			// gap of the largest length's size, then close the gap.
			at := len(body)
			body = append(body, make([]byte, binary.MaxVarintLen64)...)
			body = chunk.Encode(body, c.ts[off:end], vs[off:end])
			n := len(body) - at - binary.MaxVarintLen64
			k := binary.PutUvarint(body[at:], uint64(n))
			copy(body[at+k:], body[at+binary.MaxVarintLen64:])
			body = body[:at+k+n]
			runs++
		}
	}
	c.chunkb = body
	dst = binary.AppendUvarint(dst, uint64(runs))
	return append(dst, body...)
}

// sortDedup returns the samples sorted by timestamp, keeping of equal
// timestamps the one added last.
func (c *compressor) sortDedup(ts []int64, vs []float64) ([]int64, []float64) {
	c.order = slices.Grow(c.order[:0], len(ts))[:len(ts)]
	for i := range c.order {
		c.order[i] = int32(i)
	}
	slices.SortStableFunc(c.order, func(a, b int32) int { return cmp.Compare(ts[a], ts[b]) })
	ots, ovs := make([]int64, 0, len(ts)), make([]float64, 0, len(ts))
	for k, i := range c.order {
		if k+1 < len(c.order) && ts[c.order[k+1]] == ts[i] {
			continue // a later sample has the same timestamp
		}
		ots, ovs = append(ots, ts[i]), append(ovs, vs[i])
	}
	return ots, ovs
}

// decodeCompressed decodes a KindCompressed payload, b without its kind.
func (d *Decoder) decodeCompressed(b []byte, def func(id uint64, key []byte) error, run func(id uint64, ts []int64, vs []float64) error) error {
	r := binread.New(b)
	nStrs := r.Count("strings")
	d.strs = d.strs[:0]
	for i := uint64(0); i < nStrs && r.Err() == nil; i++ {
		d.strs = append(d.strs, r.Bytes("string"))
	}
	nDefs := r.Count("definitions")
	rebuilt := 0 // bytes of the keys rebuilt so far
	for i := uint64(0); i < nDefs && r.Err() == nil; i++ {
		id := r.Uvarint()
		m := r.Uvarint()
		var key []byte
		switch {
		case r.Err() != nil:
		case m == 0:
			key = r.Bytes("series key")
		case m-1 > uint64(len(r.Rest()))/2:
			r.Fail(fmt.Errorf("series %d: %d labels do not fit in %d bytes", id, m-1, len(r.Rest())))
		default:
			d.key = binary.AppendUvarint(d.key[:0], m-1)
			for range 2 * (m - 1) {
				j := r.Uvarint()
				if r.Err() != nil {
					break
				}
				if j >= uint64(len(d.strs)) {
					r.Fail(fmt.Errorf("series %d: string %d of a table of %d", id, j, len(d.strs)))
					break
				}
				d.key = binary.AppendUvarint(d.key, uint64(len(d.strs[j])))
				d.key = append(d.key, d.strs[j]...)
				if len(d.key) > MaxKeyBytes {
					r.Fail(fmt.Errorf("series %d: key rebuilt from the string table exceeds %d bytes", id, MaxKeyBytes))
					break
				}
			}
			if rebuilt += len(d.key); r.Err() == nil && rebuilt > MaxDefinedKeyBytes {
				r.Fail(fmt.Errorf("series %d: the record's rebuilt keys exceed %d bytes", id, MaxDefinedKeyBytes))
			}
			key = d.key
		}
		if r.Err() != nil {
			break
		}
		if err := def(id, key); err != nil {
			return err
		}
	}
	base := r.Varint()
	nRuns := r.Count("runs")
	for i := uint64(0); i < nRuns && r.Err() == nil; i++ {
		id := r.Uvarint()
		cb := r.Bytes("chunk")
		if r.Err() != nil {
			break
		}
		var err error
		d.ts, d.vs, err = chunk.Decode(cb, d.ts[:0], d.vs[:0])
		if err != nil {
			r.Fail(fmt.Errorf("run %d of series %d: %w", i, id, err))
			break
		}
		for j := range d.ts {
			d.ts[j] += base
		}
		if err := run(id, d.ts, d.vs); err != nil {
			return err
		}
	}
	if err := r.Done(); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return nil
}
