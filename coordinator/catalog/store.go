package catalog

// seriesBlock is the number of series per block of a seriesStore.
const seriesBlock = 4096

// seriesStore holds series by id in fixed-size blocks, so that growing
// the fleet never copies the whole table (a 10-million-series slice
// doubling would copy hundreds of megabytes under the write lock).
type seriesStore struct {
	blocks [][]seriesRec
	n      int
}

func (s *seriesStore) len() int { return s.n }

// at returns series id (1 <= id <= len).
func (s *seriesStore) at(id uint64) *seriesRec {
	i := id - 1
	return &s.blocks[i/seriesBlock][i%seriesBlock]
}

// add appends a series and returns its id.
func (s *seriesStore) add(r seriesRec) uint64 {
	if s.n%seriesBlock == 0 {
		s.blocks = append(s.blocks, make([]seriesRec, 0, seriesBlock))
	}
	b := &s.blocks[len(s.blocks)-1]
	*b = append(*b, r)
	s.n++
	return uint64(s.n)
}

// each calls fn for every series in id order.
func (s *seriesStore) each(fn func(id uint64, r *seriesRec)) {
	id := uint64(0)
	for _, b := range s.blocks {
		for i := range b {
			id++
			fn(id, &b[i])
		}
	}
}
