package catalog

import "github.com/tributarydb/tributary/node/labels"

// seriesBlock is the number of series per block of a seriesStore.
const seriesBlock = 4096

// labelChunk is the number of labels per chunk of a seriesStore (2 MiB).
const labelChunk = 1 << 16

// seriesStore holds the labels of the series by id. The labels of all
// series are packed into chunks, so that a series costs its labels and an
// 8-byte reference, with no allocation or slice header of its own; the
// references are kept in fixed-size blocks and the chunks never exceed
// labelChunk labels, so that growing the fleet never copies the whole
// table (a 10-million-series slice doubling would copy hundreds of
// megabytes under the write lock).
type seriesStore struct {
	blocks [][]labelsRef
	chunks [][]labels.Label
	n      int
}

// labelsRef locates the labels of one series: chunks[chunk][off:off+n].
type labelsRef struct {
	chunk uint32
	off   uint16
	n     uint16
}

func (s *seriesStore) len() int { return s.n }

// at returns the labels of series id (1 <= id <= len). They are shared:
// callers must not modify them.
func (s *seriesStore) at(id uint64) labels.Labels {
	i := id - 1
	r := s.blocks[i/seriesBlock][i%seriesBlock]
	off, end := int(r.off), int(r.off)+int(r.n)
	return s.chunks[r.chunk][off:end:end]
}

// add appends a series with a copy of ls (fewer than labelChunk labels)
// and returns its id.
func (s *seriesStore) add(ls labels.Labels) uint64 {
	if len(ls) >= labelChunk {
		panic("BUG: catalog: a series with more labels than a chunk holds")
	}
	last := len(s.chunks) - 1
	if last < 0 || len(s.chunks[last])+len(ls) > labelChunk {
		// The first chunk starts small, so that a small catalog stays
		// small.
		size := labelChunk
		if last < 0 {
			size = 64
		}
		s.chunks = append(s.chunks, make([]labels.Label, 0, size))
		last++
	}
	c := s.chunks[last]
	if len(c)+len(ls) > cap(c) {
		// Grow the last chunk, doubling up to labelChunk. Labels handed
		// out keep the old array, whose contents never change.
		grown := make([]labels.Label, len(c), min(labelChunk, max(2*cap(c), len(c)+len(ls))))
		copy(grown, c)
		c = grown
	}
	off := len(c)
	s.chunks[last] = append(c, ls...)
	if s.n%seriesBlock == 0 {
		s.blocks = append(s.blocks, make([]labelsRef, 0, seriesBlock))
	}
	b := &s.blocks[len(s.blocks)-1]
	*b = append(*b, labelsRef{chunk: uint32(last), off: uint16(off), n: uint16(len(ls))})
	s.n++
	return uint64(s.n)
}

// each calls fn for every series in id order.
func (s *seriesStore) each(fn func(id uint64, ls labels.Labels)) {
	id := uint64(0)
	for _, b := range s.blocks {
		for _, r := range b {
			id++
			off, end := int(r.off), int(r.off)+int(r.n)
			fn(id, s.chunks[r.chunk][off:end:end])
		}
	}
}
