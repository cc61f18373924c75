package influxql

import (
	"errors"
	"fmt"
	"sort"

	"github.com/influxdata/influxql"

	"github.com/tributarydb/tributary/node/labels"
)

// selectStatement answers a SELECT.
func (ex *executor) selectStatement(s *influxql.SelectStatement) ([]*row, error) {
	if s.Target != nil {
		return nil, errors.New("SELECT INTO is not supported by Tributary's InfluxQL API")
	}
	out, columns, err := ex.selectSeries(s, bounds{})
	if err != nil {
		return nil, err
	}
	rows := make([]*row, len(out))
	for i, o := range out {
		rows[i] = &row{Name: o.name, Tags: o.tags, Columns: columns, Values: o.rows, timeCol: true}
	}
	return rows, nil
}

// selectSeries evaluates s within outer (the time range of the query a
// subquery belongs to) and returns its series and columns.
func (ex *executor) selectSeries(s *influxql.SelectStatement, outer bounds) ([]*outSeries, []string, error) {
	db := ex.db
	for _, src := range s.Sources {
		if m, ok := src.(*influxql.Measurement); ok && m.Database != "" {
			db = m.Database
		}
	}
	if db == "" && hasMeasurement(s.Sources) {
		return nil, nil, errDatabaseRequired
	}
	fm := &fieldMapper{ex: ex, db: db}
	rs, err := s.RewriteFields(fm)
	if err == nil {
		err = fm.err
	}
	if err != nil {
		return nil, nil, err
	}
	p, err := ex.newPlan(rs, db, outer, fm.isTag)
	if err != nil {
		return nil, nil, err
	}
	var out []*outSeries
	for _, src := range rs.Sources {
		series, err := ex.sourceSeries(p, fm, src)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, series...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].name != out[j].name {
			return out[i].name < out[j].name
		}
		return out[i].key < out[j].key
	})
	return page(out, rs.SOffset, rs.SLimit), p.columns, nil
}

func hasMeasurement(srcs influxql.Sources) bool {
	for _, src := range srcs {
		if _, ok := src.(*influxql.Measurement); ok {
			return true
		}
	}
	return false
}

// sourceSeries evaluates the plan over one source.
func (ex *executor) sourceSeries(p *plan, fm *fieldMapper, src influxql.Source) ([]*outSeries, error) {
	switch src := src.(type) {
	case *influxql.Measurement:
		names, err := fm.resolve(src)
		if err != nil {
			return nil, err
		}
		var out []*outSeries
		for _, m := range names {
			list, err := ex.fetch(p, m)
			if err != nil {
				return nil, err
			}
			series, err := ex.evaluate(p, m, list, p.pushdown())
			if err != nil {
				return nil, err
			}
			out = append(out, series...)
		}
		return out, nil
	case *influxql.SubQuery:
		return ex.subquery(p, src)
	}
	return nil, fmt.Errorf("unsupported source %s", src)
}

// subquery evaluates the outer plan p over the answer of a subquery: the
// inner series become input series (their GROUP BY tags as tags, their
// numeric columns as fields), then p runs over them as over stored data.
func (ex *executor) subquery(p *plan, sq *influxql.SubQuery) ([]*outSeries, error) {
	inner, columns, err := ex.selectSeries(sq.Statement, bounds{start: p.start, end: p.end, set: true})
	if err != nil {
		return nil, err
	}
	byName := map[string][]*inSeries{}
	var names []string
	for _, o := range inner {
		var tags labels.Labels
		for k, v := range o.tags {
			tags = append(tags, labels.Label{Name: labelName(k), Value: v})
		}
		sort.Slice(tags, func(i, j int) bool { return tags[i].Name < tags[j].Name })
		in := &inSeries{measurement: o.name, tags: tags, key: tagKey(tags), cols: map[string]*column{}}
		for j, col := range columns[1:] {
			c := &column{}
			for _, r := range o.rows {
				t := r[0].(int64)
				if v, ok := r[j+1].(float64); ok && t >= p.start && t <= p.end {
					c.ts = append(c.ts, t)
					c.vs = append(c.vs, v)
				}
			}
			if len(c.ts) > 0 {
				in.cols[col] = c
			}
		}
		if !p.cond.matchSeries(in.tags) {
			continue
		}
		if byName[o.name] == nil {
			names = append(names, o.name)
		}
		byName[o.name] = append(byName[o.name], in)
	}
	var out []*outSeries
	for _, name := range names {
		series, err := ex.evaluate(p, name, byName[name], false)
		if err != nil {
			return nil, err
		}
		out = append(out, series...)
	}
	return out, nil
}
