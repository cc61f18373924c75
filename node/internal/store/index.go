package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/linxGnu/grocksdb"
	"github.com/tributarydb/tributary/node/labels"
)

// ForEachSeries calls fn for every series in ascending id order, stopping at
// the first error, which it returns. fn owns ls.
func (db *DB) ForEachSeries(fn func(id uint64, ls labels.Labels) error) error {
	if err := db.acquire(); err != nil {
		return err
	}
	defer db.release()
	it := db.rdb.NewIteratorCF(db.readTotal, db.series)
	defer it.Close()
	for it.SeekToFirst(); it.Valid(); it.Next() {
		k := it.Key().Data()
		if len(k) != 8 {
			return fmt.Errorf("%w: series key %x", ErrCorrupt, k)
		}
		id := binary.BigEndian.Uint64(k)
		ls, err := labels.DecodeKey(it.Value().Data())
		if err != nil {
			return fmt.Errorf("%w: series %d: %v", ErrCorrupt, id, err)
		}
		if err := fn(id, ls); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("iterate series: %w", err)
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
	upper := appendAfter(appendTerminated(nil, name), value)
	var ids []uint64
	err := db.scanBounded(db.postings, upper, func(it *grocksdb.Iterator) error {
		for it.Seek(prefix); it.Valid(); it.Next() {
			id, err := postingID(it.Key().Data(), len(prefix))
			if err != nil {
				return err
			}
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postings %s=%q: %w", name, value, err)
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
	namePrefix := appendTerminated(nil, name)
	var ids []uint64
	err := db.scanBounded(db.postings, appendAfter(nil, name), func(it *grocksdb.Iterator) error {
		seek := slices.Clone(namePrefix) // reused; must not alias namePrefix
		it.Seek(seek)
		for it.Valid() {
			k := it.Key().Data()
			value, rest, err := readTerminated(k[len(namePrefix):])
			if err != nil {
				return err
			}
			if !match(value) {
				seek = appendAfter(append(seek[:0], namePrefix...), value)
				it.Seek(seek)
				continue
			}
			valuePrefixLen := len(k) - len(rest)
			valuePrefix := append(seek[:0], k[:valuePrefixLen]...)
			for ; it.Valid(); it.Next() {
				k := it.Key().Data()
				if !bytes.HasPrefix(k, valuePrefix) {
					break // the next value's first posting: no seek needed
				}
				id, err := postingID(k, len(valuePrefix))
				if err != nil {
					return err
				}
				ids = append(ids, id)
			}
			seek = valuePrefix
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postings matching %s: %w", name, err)
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// LabelNames returns every label name in use, sorted. It seeks from name to
// name instead of reading every posting.
func (db *DB) LabelNames() ([]string, error) {
	if err := db.acquire(); err != nil {
		return nil, err
	}
	defer db.release()
	it := db.rdb.NewIteratorCF(db.readTotal, db.postings)
	defer it.Close()
	var names []string
	var seek []byte
	for it.SeekToFirst(); it.Valid(); it.Seek(seek) {
		name, _, err := readTerminated(it.Key().Data())
		if err != nil {
			return nil, fmt.Errorf("label names: %w", err)
		}
		names = append(names, name)
		seek = appendAfter(seek[:0], name)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("label names: %w", err)
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
	var values []string
	err := db.scanBounded(db.postings, appendAfter(nil, name), func(it *grocksdb.Iterator) error {
		seek := slices.Clone(namePrefix)
		for it.Seek(seek); it.Valid(); it.Seek(seek) {
			value, _, err := readTerminated(it.Key().Data()[len(namePrefix):])
			if err != nil {
				return err
			}
			values = append(values, value)
			seek = appendAfter(append(seek[:0], namePrefix...), value)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("label values of %s: %w", name, err)
	}
	return values, nil
}

// scanBounded runs fn with an iterator over cf that never returns a key at
// or after upper, so that RocksDB reads nothing past it.
func (db *DB) scanBounded(cf *grocksdb.ColumnFamilyHandle, upper []byte, fn func(*grocksdb.Iterator) error) error {
	ro := grocksdb.NewDefaultReadOptions()
	defer ro.Destroy() // after it.Close: the iterator points at the bound
	ro.SetTotalOrderSeek(true)
	ro.SetIterateUpperBound(upper)
	it := db.rdb.NewIteratorCF(ro, cf)
	defer it.Close()
	if err := fn(it); err != nil {
		return err
	}
	return it.Err()
}

func postingID(key []byte, prefixLen int) (uint64, error) {
	if len(key) != prefixLen+8 {
		return 0, fmt.Errorf("%w: postings key %x", ErrCorrupt, key)
	}
	return binary.BigEndian.Uint64(key[prefixLen:]), nil
}
