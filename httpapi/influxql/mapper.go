package influxql

import (
	"strings"

	"github.com/influxdata/influxql"

	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/node/labels"
)

// fieldMapper tells the InfluxQL rewriter which fields and tags a
// measurement has (to expand wildcards and type identifiers), from the
// series the backend holds. Every value is a float. Errors are kept in
// err, since the rewriter's interface has no room for them.
type fieldMapper struct {
	ex    *executor
	db    string
	cache map[string]*measurementInfo
	err   error
}

// measurementInfo is what a measurement holds.
type measurementInfo struct {
	fields map[string]bool
	tags   map[string]bool // label names
}

// resolve returns the measurements a source names.
func (fm *fieldMapper) resolve(m *influxql.Measurement) ([]string, error) {
	if m.Regex == nil {
		return []string{m.Name}, nil
	}
	return fm.ex.measurements(fm.db, m)
}

// info returns the fields and tags of measurement m.
func (fm *fieldMapper) info(m string) *measurementInfo {
	if fm.cache == nil {
		fm.cache = map[string]*measurementInfo{}
	}
	if mi := fm.cache[m]; mi != nil {
		return mi
	}
	mi := &measurementInfo{fields: map[string]bool{}, tags: map[string]bool{}}
	fm.cache[m] = mi
	ms := []*labels.Matcher{dbMatcher(fm.db), prefixMatcher(m)}
	names, err := fm.ex.api.b.LabelValues(fm.ex.ctx, labels.MetricName, ms)
	if err != nil {
		fm.fail(err)
		return mi
	}
	var fields []string
	for _, n := range names {
		if f, ok := fieldOf(n, m); ok {
			mi.fields[f] = true
			fields = append(fields, f)
		}
	}
	if len(fields) == 0 {
		return mi
	}
	// The tags of m's own series only: the prefix may select series of
	// a longer measurement too (fieldOf).
	ms = []*labels.Matcher{dbMatcher(fm.db), namesMatcher(m, fields)}
	keys, err := fm.ex.api.b.LabelNames(fm.ex.ctx, ms)
	if err != nil {
		fm.fail(err)
		return mi
	}
	for _, k := range keys {
		if k != labels.MetricName && k != influx.DatabaseLabel {
			mi.tags[k] = true
		}
	}
	return mi
}

func (fm *fieldMapper) fail(err error) {
	if fm.err == nil {
		fm.err = backendError(err)
	}
}

// FieldDimensions implements influxql.FieldMapper.
func (fm *fieldMapper) FieldDimensions(m *influxql.Measurement) (map[string]influxql.DataType, map[string]struct{}, error) {
	names, err := fm.resolve(m)
	if err != nil {
		return nil, nil, err
	}
	fields := map[string]influxql.DataType{}
	dims := map[string]struct{}{}
	for _, name := range names {
		mi := fm.info(name)
		for f := range mi.fields {
			fields[f] = influxql.Float
		}
		for t := range mi.tags {
			dims[t] = struct{}{}
		}
	}
	return fields, dims, fm.err
}

// MapType implements influxql.TypeMapper.
func (fm *fieldMapper) MapType(m *influxql.Measurement, field string) influxql.DataType {
	names, err := fm.resolve(m)
	if err != nil {
		fm.fail(err)
		return influxql.Unknown
	}
	for _, name := range names {
		mi := fm.info(name)
		if mi.fields[influx.LabelName(field)] || mi.fields[field] {
			return influxql.Float
		}
		if mi.tags[influx.LabelName(field)] {
			return influxql.Tag
		}
	}
	return influxql.Unknown
}

// CallType implements influxql.CallTypeMapper: every function answers a
// float.
func (fm *fieldMapper) CallType(name string, args []influxql.DataType) (influxql.DataType, error) {
	return influxql.Float, nil
}

// isTag says whether an identifier reads a tag: typed ::tag, or known
// as a tag and not as a field.
func (fm *fieldMapper) isTag(ref *influxql.VarRef) bool {
	switch ref.Type {
	case influxql.Tag:
		return true
	case influxql.Unknown:
		return !strings.EqualFold(ref.Val, "time")
	}
	return false
}
