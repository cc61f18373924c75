package store

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/tributarydb/tributary/node/labels"
)

// ForEachSeries calls fn for every series in ascending id order, stopping at
// the first error, which it returns. fn owns ls.
func (db *DB) ForEachSeries(fn func(id uint64, ls labels.Labels) error) error {
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	s := db.openScan(db.series, scanTotal, nil)
	defer s.close()
	s.seek(nil, nil, 0)
	for k, v, ok := s.next(); ok; k, v, ok = s.next() {
		if len(k) != 8 {
			return fmt.Errorf("%w: series key %x", ErrCorrupt, k)
		}
		id := binary.BigEndian.Uint64(k)
		ls, err := labels.DecodeKey(v) // copies the strings out of v
		if err != nil {
			return fmt.Errorf("%w: series %d: %v", ErrCorrupt, id, err)
		}
		if err := fn(id, ls); err != nil {
			return err
		}
	}
	if s.err != nil {
		return fmt.Errorf("iterate series: %w", s.err)
	}
	return nil
}

// SeriesLabels returns the labels of series id.
func (db *DB) SeriesLabels(id uint64) (labels.Labels, bool, error) {
	if err := db.acquire(); err != nil {
		return nil, false, err
	}
	defer db.release()
	v, found, err := db.get(db.series, appendID(nil, id))
	if err != nil || !found {
		if err != nil {
			err = fmt.Errorf("get series %d: %w", id, err)
		}
		return nil, false, err
	}
	ls, err := labels.DecodeKey(v)
	if err != nil {
		return nil, false, fmt.Errorf("%w: series %d: %v", ErrCorrupt, id, err)
	}
	return ls, true, nil
}

// Postings returns the ids of the series with label name=value, ascending.
func (db *DB) Postings(name, value string) ([]uint64, error) {
	if err := db.acquire(); err != nil {
		return nil, err
	}
	defer db.release()
	prefix := appendPostingsValuePrefix(nil, name, value)
	s := db.openScan(db.postings, scanTotal, appendAfter(appendTerminated(nil, name), value))
	defer s.close()
	var ids []uint64
	s.seek(prefix, nil, 0)
	for k, _, ok := s.next(); ok; k, _, ok = s.next() {
		id, err := postingID(k, len(prefix))
		if err != nil {
			return nil, fmt.Errorf("postings %s=%q: %w", name, value, err)
		}
		ids = append(ids, id)
	}
	if s.err != nil {
		return nil, fmt.Errorf("postings %s=%q: %w", name, value, s.err)
	}
	return ids, nil
}

// PostingsMatching returns the ids of the series whose label name has a
// value for which match returns true, ascending and unique. It reads only
// the postings of name, and of those only the values that match.
func (db *DB) PostingsMatching(name string, match func(value string) bool) ([]uint64, error) {
	if err := db.acquire(); err != nil {
		return nil, err
	}
	defer db.release()
	ids, err := db.postingsMatching(name, match)
	if err != nil {
		return nil, fmt.Errorf("postings matching %s: %w", name, err)
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// postingsMatching reads the first posting of each value of name alone: if
// the value does not match, it seeks past the value's postings; if it does,
// it reads them in batches that end where the value does.
func (db *DB) postingsMatching(name string, match func(value string) bool) ([]uint64, error) {
	namePrefix := appendTerminated(nil, name)
	s := db.openScan(db.postings, scanTotal, appendAfter(nil, name))
	defer s.close()
	var ids []uint64
	var bound []byte // reused: the key after every posting of a value
	s.seek(namePrefix, nil, 1)
	for {
		k, _, ok := s.next()
		if !ok {
			break
		}
		value, rest, err := readTerminated(k[len(namePrefix):])
		if err != nil {
			return nil, err
		}
		bound = appendAfter(append(bound[:0], namePrefix...), value)
		if !match(value) {
			s.seek(bound, nil, 1)
			continue
		}
		valuePrefixLen := len(k) - len(rest)
		id, err := postingID(k, valuePrefixLen)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
		s.resume(bound, 0)
		for k, _, ok := s.next(); ok; k, _, ok = s.next() {
			id, err := postingID(k, valuePrefixLen)
			if err != nil {
				return nil, err
			}
			ids = append(ids, id)
		}
		// The batch stopped at the next value's first posting without
		// returning it: read it without a seek.
		s.resume(nil, 1)
	}
	return ids, s.err
}

// LabelNames returns every label name in use, sorted. It seeks from name to
// name instead of reading every posting.
func (db *DB) LabelNames() ([]string, error) {
	if err := db.acquire(); err != nil {
		return nil, err
	}
	defer db.release()
	s := db.openScan(db.postings, scanTotal, nil)
	defer s.close()
	var names []string
	var seek []byte
	for s.seek(nil, nil, 1); ; s.seek(seek, nil, 1) {
		k, _, ok := s.next()
		if !ok {
			break
		}
		name, _, err := readTerminated(k)
		if err != nil {
			return nil, fmt.Errorf("label names: %w", err)
		}
		names = append(names, name)
		seek = appendAfter(seek[:0], name)
	}
	if s.err != nil {
		return nil, fmt.Errorf("label names: %w", s.err)
	}
	return names, nil
}

// LabelValues returns every value of label name, sorted. It seeks from value
// to value instead of reading every posting.
func (db *DB) LabelValues(name string) ([]string, error) {
	if err := db.acquire(); err != nil {
		return nil, err
	}
	defer db.release()
	namePrefix := appendTerminated(nil, name)
	s := db.openScan(db.postings, scanTotal, appendAfter(nil, name))
	defer s.close()
	var values []string
	seek := slices.Clone(namePrefix) // reused; must not alias namePrefix
	for s.seek(seek, nil, 1); ; s.seek(seek, nil, 1) {
		k, _, ok := s.next()
		if !ok {
			break
		}
		value, _, err := readTerminated(k[len(namePrefix):])
		if err != nil {
			return nil, fmt.Errorf("label values of %s: %w", name, err)
		}
		values = append(values, value)
		seek = appendAfter(append(seek[:0], namePrefix...), value)
	}
	if s.err != nil {
		return nil, fmt.Errorf("label values of %s: %w", name, s.err)
	}
	return values, nil
}

func postingID(key []byte, prefixLen int) (uint64, error) {
	if len(key) != prefixLen+8 {
		return 0, fmt.Errorf("%w: postings key %x", ErrCorrupt, key)
	}
	return binary.BigEndian.Uint64(key[prefixLen:]), nil
}
