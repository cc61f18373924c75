package influx

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tributarydb/tributary/node/labels"
)

// Approximate fixed costs, in bytes, of the cache structures (headers,
// map slots, pointers), used to keep the cache within MaxCacheBytes.
const (
	entryOverhead  = 160
	fieldOverhead  = 96
	labelOverhead  = 32
	seriesOverhead = 80
	dbOverhead     = 128
)

// entry returns the cache entry of a series key (the measurement and tag
// set of a line, as written), building it on a miss. It returns nil, with
// the line's error recorded, when the key cannot make a series, and nil
// with p.abort set when the key would be one more than MaxSeries in this
// call (checked before the entry is built).
func (p *Parser) entry(key []byte, base int) *keyEntry {
	e := p.prev
	if e == nil || e.key != string(key) {
		e = p.keys[string(key)]
	}
	if e != nil && e.gen == p.gen {
		p.prev = e
		return e
	}
	if max := p.opts.MaxSeries; max > 0 && p.keysUsed >= max {
		p.abortf(base+1, ErrTooManySeries, "the request holds more than %d series, the limit per request", max)
		return nil
	}
	if e == nil {
		if e = p.newEntry(key, base); e == nil {
			return nil
		}
		p.keys[e.key] = e
	}
	e.gen = p.gen
	p.keysUsed++
	p.prev = e
	return e
}

// scanTo returns the index of the first unescaped byte of key at or after
// i that is one of stop (',' or '='), or len(key).
func scanTo(key []byte, i int, stopEq bool) int {
	for i < len(key) {
		c := key[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == ',' || (stopEq && c == '=') {
			return i
		}
		i++
	}
	return len(key)
}

// newEntry parses and validates a series key.
func (p *Parser) newEntry(key []byte, base int) *keyEntry {
	lim := p.opts.Limits
	col := func(i int) int { return base + i + 1 }

	i := scanTo(key, 0, false)
	raw := key[:i]
	if len(raw) == 0 {
		p.fail(col(0), func() string { return "missing measurement name" })
		return nil
	}
	p.scratch = unescape(p.scratch[:0], raw, escMeasurement)
	if !utf8.Valid(p.scratch) {
		p.fail(col(0), func() string { return fmt.Sprintf("measurement %s is not valid UTF-8", quote(raw)) })
		return nil
	}
	measurement := string(p.sanitize(p.scratch, true))

	// Room for tags besides __name__.
	maxTags := 0
	if lim.MaxLabels > 0 {
		maxTags = lim.MaxLabels - 1
	}
	tags := p.tags[:0]
	pos := p.tagPos[:0] // start of each tag's key, for duplicate messages
	hasDB := false
	for i < len(key) { // key[i] == ','
		i++
		ks := i
		i = scanTo(key, i, true)
		if i == len(key) || key[i] != '=' {
			p.fail(col(ks), func() string { return fmt.Sprintf("tag %s has no value (missing '=')", quote(key[ks:i])) })
			return nil
		}
		if i == ks {
			p.fail(col(ks), func() string { return "empty tag key" })
			return nil
		}
		rawK := key[ks:i]
		i++
		vs := i
		i = scanTo(key, i, true)
		if i < len(key) && key[i] == '=' {
			p.fail(col(i), func() string { return fmt.Sprintf("the value of tag %s has an unescaped '='", quote(rawK)) })
			return nil
		}
		rawV := key[vs:i]
		if len(rawV) == 0 {
			continue // an empty value is no label
		}
		if maxTags > 0 && len(tags) >= maxTags {
			p.fail(col(ks), func() string {
				return fmt.Sprintf("too many tags: a series has at most %d labels, including __name__ and db", lim.MaxLabels)
			})
			return nil
		}

		name, ok := p.tagName(key, rawK, base+ks+1, tags, pos)
		if !ok {
			return nil
		}
		value, ok := p.tagValue(rawK, rawV, base+vs+1)
		if !ok {
			return nil
		}
		n := string(name)
		hasDB = hasDB || n == "db"
		tags = append(tags, labels.Label{Name: n, Value: string(value)})
		pos = append(pos, ks)
	}
	if p.db != "" && !hasDB {
		if maxTags > 0 && len(tags) >= maxTags {
			p.fail(col(0), func() string {
				return fmt.Sprintf("too many tags: a series has at most %d labels, including __name__ and db", lim.MaxLabels)
			})
			return nil
		}
		tags = append(tags, labels.Label{Name: "db", Value: p.db})
	}
	slices.SortFunc(tags, func(a, b labels.Label) int { return strings.Compare(a.Name, b.Name) })

	e := &keyEntry{key: string(key), measurement: measurement, tags: slices.Clone(tags)}
	cost := int64(entryOverhead + len(key) + len(measurement))
	for _, t := range tags {
		cost += int64(labelOverhead + len(t.Name) + len(t.Value))
	}
	p.cacheBytes += cost
	clear(tags) // do not pin strings from the scratch slices
	p.tags, p.tagPos = tags[:0], pos[:0]
	return e
}

// tagName checks the key rawK of a tag at column col and returns it as a
// label name (valid until the next sanitize): valid UTF-8, not the metric
// name, within the limit, and not the name of a tag already in tags (whose
// keys start at pos in key).
func (p *Parser) tagName(key, rawK []byte, col int, tags []labels.Label, pos []int) ([]byte, bool) {
	lim := p.opts.Limits
	p.scratch = unescape(p.scratch[:0], rawK, escKey)
	if !utf8.Valid(p.scratch) {
		p.fail(col, func() string { return fmt.Sprintf("tag key %s is not valid UTF-8", quote(rawK)) })
		return nil, false
	}
	name := p.sanitize(p.scratch, true)
	if string(name) == labels.MetricName {
		p.fail(col, func() string { return fmt.Sprintf("tag key %s is reserved for the metric name", quote(rawK)) })
		return nil, false
	}
	if lim.MaxNameBytes > 0 && len(name) > lim.MaxNameBytes {
		p.fail(col, func() string {
			return fmt.Sprintf("tag key %s is %d bytes, limit is %d", quote(rawK), len(name), lim.MaxNameBytes)
		})
		return nil, false
	}
	for j := range tags {
		if tags[j].Name == string(name) {
			prev := key[pos[j]:]
			prev = prev[:scanTo(prev, 0, true)]
			if bytes.Equal(prev, rawK) {
				p.fail(col, func() string { return fmt.Sprintf("duplicate tag key %s", quote(rawK)) })
			} else {
				p.fail(col, func() string {
					return fmt.Sprintf("tag keys %s and %s both become label %q", quote(prev), quote(rawK), name)
				})
			}
			return nil, false
		}
	}
	return name, true
}

// tagValue checks the value rawV of tag rawK, at column col, and returns
// it unescaped (in p.scratch, valid until its next use): within the limit,
// valid UTF-8 without control characters.
func (p *Parser) tagValue(rawK, rawV []byte, col int) ([]byte, bool) {
	lim := p.opts.Limits
	if lim.MaxValueBytes > 0 && len(rawV) > 2*lim.MaxValueBytes {
		// An escape takes two bytes, so this value is too long
		// whatever it holds; do not copy it.
		p.fail(col, func() string {
			return fmt.Sprintf("the value of tag %s is %d bytes, limit is %d", quote(rawK), len(rawV), lim.MaxValueBytes)
		})
		return nil, false
	}
	p.scratch = unescape(p.scratch[:0], rawV, escKey)
	if lim.MaxValueBytes > 0 && len(p.scratch) > lim.MaxValueBytes {
		p.fail(col, func() string {
			return fmt.Sprintf("the value of tag %s is %d bytes, limit is %d", quote(rawK), len(p.scratch), lim.MaxValueBytes)
		})
		return nil, false
	}
	if !utf8.Valid(p.scratch) {
		p.fail(col, func() string {
			return fmt.Sprintf("the value of tag %s is not valid UTF-8: %s", quote(rawK), quote(rawV))
		})
		return nil, false
	}
	if r, bad := badValueChar(p.scratch); bad {
		p.fail(col, func() string {
			return fmt.Sprintf("the value of tag %s contains the control character %U", quote(rawK), r)
		})
		return nil, false
	}
	return p.scratch, true
}

// sanitize returns s made a valid label name (see appendSanitized) in a
// scratch buffer that the next call reuses.
func (p *Parser) sanitize(s []byte, first bool) []byte {
	p.nameBuf = appendSanitized(p.nameBuf[:0], s, first)
	return p.nameBuf
}

// fieldRef returns the series of field raw (as written) under entry e;
// ord is the field's position in its line, the usual place of the field
// in e.fields. It returns nil, with the line's error recorded, when the
// field cannot make a series.
func (p *Parser) fieldRef(e *keyEntry, raw []byte, ord int, col int) *seriesRef {
	if ord < len(e.fields) && e.fields[ord].raw == string(raw) {
		return e.fields[ord].ref
	}
	if e.fieldIndex != nil {
		if k, ok := e.fieldIndex[string(raw)]; ok {
			return e.fields[k].ref
		}
	} else {
		for k := range e.fields {
			if e.fields[k].raw == string(raw) {
				return e.fields[k].ref
			}
		}
	}
	return p.newField(e, raw, col)
}

func (p *Parser) newField(e *keyEntry, raw []byte, col int) *seriesRef {
	lim := p.opts.Limits
	p.scratch = unescape(p.scratch[:0], raw, escKey)
	if !utf8.Valid(p.scratch) {
		p.fail(col, func() string { return fmt.Sprintf("field key %s is not valid UTF-8", quote(raw)) })
		return nil
	}
	name := append(p.nameBuf[:0], e.measurement...)
	name = append(name, '_')
	name = appendSanitized(name, p.scratch, false)
	p.nameBuf = name
	if lim.MaxValueBytes > 0 && len(name) > lim.MaxValueBytes {
		p.fail(col, func() string {
			return fmt.Sprintf("metric name %s (measurement_field) is %d bytes, limit is %d", quote(name), len(name), lim.MaxValueBytes)
		})
		return nil
	}
	// The label set is built in scratch space first: a series of another
	// spelling may hold it already, and a new one must pass MaxSeries
	// before anything is kept for it.
	k, _ := slices.BinarySearchFunc(e.tags, labels.MetricName, func(l labels.Label, n string) int { return strings.Compare(l.Name, n) })
	lset := append(p.lsetBuf[:0], e.tags[:k]...)
	lset = append(lset, labels.Label{Name: labels.MetricName})
	lset = append(lset, e.tags[k:]...)
	p.lsetBuf = lset
	lset[k].Value = unsafeString(name) // only until it is cloned below

	// Share the series with any other spelling of it (tags in another
	// order, names that sanitize alike), so it gets one batch.
	p.scratch = labels.Labels(lset).AppendKey(p.scratch[:0])
	h := labels.Hash(p.scratch)
	var ref *seriesRef
	for _, r := range p.series[h] {
		if labels.Equal(r.lset, lset) {
			ref = r
			break
		}
	}
	cost := int64(fieldOverhead + len(raw))
	if ref == nil {
		if max := p.opts.MaxSeries; max > 0 && len(p.refs) >= max {
			clear(lset)
			p.abortf(col, ErrTooManySeries, "the request holds more than %d series, the limit per request", max)
			return nil
		}
		lset[k].Value = string(name)
		ref = &seriesRef{lset: slices.Clone(lset)}
		p.series[h] = append(p.series[h], ref)
		cost += int64(seriesOverhead + len(name) + labelOverhead*len(lset))
	}
	clear(lset) // do not pin strings from the cache or the name buffer
	e.fields = append(e.fields, fieldEntry{raw: string(raw), ref: ref})
	switch {
	case e.fieldIndex != nil:
		e.fieldIndex[e.fields[len(e.fields)-1].raw] = int32(len(e.fields) - 1)
	case len(e.fields) > linearFields:
		e.fieldIndex = make(map[string]int32, 2*len(e.fields))
		for k, f := range e.fields {
			e.fieldIndex[f.raw] = int32(k)
		}
	}
	p.cacheBytes += cost
	return ref
}

// unsafeString returns b as a string without copying; the string must not
// be used once b changes.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
