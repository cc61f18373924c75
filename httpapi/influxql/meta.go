package influxql

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/influxdata/influxql"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// executor runs the statements of one request. It is not safe for
// concurrent use.
type executor struct {
	api    *API
	ctx    context.Context
	db     string
	now    time.Time
	points int64 // points held by the current statement, against MaxPoints
	// warnings are what the backend said the current statement's
	// answer is missing (a coordinator that could not reach an edge or
	// a replica); they become the result's warning messages.
	warnings []string
}

// warn records the warnings of a backend answer, once each.
func (ex *executor) warn(info model.QueryInfo) {
	for _, w := range info.Warnings {
		if !slices.Contains(ex.warnings, w) && len(ex.warnings) < maxWarnings {
			ex.warnings = append(ex.warnings, w)
		}
	}
}

// maxWarnings bounds the warnings of one statement.
const maxWarnings = 100

// errDatabaseRequired is InfluxDB's error for a statement without a
// database.
var errDatabaseRequired = errors.New("database name required")

// statement runs one statement and returns its series (nil for none).
func (ex *executor) statement(stmt influxql.Statement) ([]*row, error) {
	ex.points, ex.warnings = 0, nil
	switch s := stmt.(type) {
	case *influxql.SelectStatement:
		return ex.selectStatement(s)
	case *influxql.ShowDatabasesStatement:
		return ex.showDatabases()
	case *influxql.ShowMeasurementsStatement:
		return ex.showMeasurements(s)
	case *influxql.ShowTagKeysStatement:
		return ex.showTagKeys(s)
	case *influxql.ShowTagValuesStatement:
		return ex.showTagValues(s)
	case *influxql.ShowFieldKeysStatement:
		return ex.showFieldKeys(s)
	case *influxql.ShowSeriesStatement:
		return ex.showSeries(s)
	case *influxql.ShowRetentionPoliciesStatement:
		return ex.showRetentionPolicies(s)
	case *influxql.CreateDatabaseStatement, *influxql.CreateRetentionPolicyStatement:
		// No-ops: a database exists as soon as a point is written to it,
		// and retention is the node's (--retention flags), not a policy's.
		return nil, nil
	case *influxql.ShowContinuousQueriesStatement, *influxql.ShowUsersStatement,
		*influxql.ShowSubscriptionsStatement, *influxql.ShowGrantsForUserStatement:
		return nil, nil // nothing of the kind exists
	case *influxql.DropDatabaseStatement, *influxql.DropMeasurementStatement, *influxql.DropSeriesStatement,
		*influxql.DeleteSeriesStatement, *influxql.DeleteStatement, *influxql.DropRetentionPolicyStatement,
		*influxql.DropShardStatement:
		return nil, fmt.Errorf("%s is not supported by Tributary: data leaves by retention, never by a query (see docs/influx.md)", statementName(stmt))
	}
	return nil, fmt.Errorf("%s is not supported by Tributary's InfluxQL API (see docs/influx.md for what is)", statementName(stmt))
}

// statementName names a statement for errors: its first words.
func statementName(stmt influxql.Statement) string {
	s := stmt.String()
	n := 0
	for i, c := range s {
		if c == ' ' {
			if n++; n == 2 {
				return s[:i]
			}
		}
	}
	return s
}

// database returns the database of a statement: its own (ON db, or
// FROM db..m), else the request's.
func (ex *executor) database(own string) (string, error) {
	if own != "" {
		return own, nil
	}
	if ex.db == "" {
		return "", errDatabaseRequired
	}
	return ex.db, nil
}

// backendError turns a backend error into the statement's error text.
func backendError(err error) error {
	switch backend.Classify(err) {
	case backend.KindTimeout:
		return fmt.Errorf("query timeout: %v", err)
	}
	return err
}

func (ex *executor) showDatabases() ([]*row, error) {
	dbs, err := ex.api.b.LabelValues(ex.ctx, influx.DatabaseLabel, nil)
	if err != nil {
		return nil, backendError(err)
	}
	return []*row{listRow("databases", "name", dbs)}, nil
}

// listRow is a one-column series of names.
func listRow(name, column string, vals []string) *row {
	r := &row{Name: name, Columns: []string{column}}
	for _, v := range vals {
		r.Values = append(r.Values, []any{v})
	}
	return r
}

// measurements lists the measurements of db that match src (a name, a
// regular expression, or nil for all), sorted.
func (ex *executor) measurements(db string, src *influxql.Measurement) ([]string, error) {
	if src != nil && src.Regex == nil {
		return []string{src.Name}, nil
	}
	names, err := ex.api.b.LabelValues(ex.ctx, labels.MetricName, []*labels.Matcher{dbMatcher(db)})
	if err != nil {
		return nil, backendError(err)
	}
	var out []string
	for _, n := range names {
		m, _, ok := splitMetric(n)
		if !ok || (src != nil && !src.Regex.Val.MatchString(m)) {
			continue
		}
		if len(out) == 0 || out[len(out)-1] != m {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return slices.Compact(out), nil
}

func (ex *executor) showMeasurements(s *influxql.ShowMeasurementsStatement) ([]*row, error) {
	db, err := ex.database(s.Database)
	if err != nil {
		return nil, err
	}
	var src *influxql.Measurement
	switch x := s.Source.(type) {
	case nil:
	case *influxql.Measurement:
		src = x
	default:
		return nil, fmt.Errorf("SHOW MEASUREMENTS WITH MEASUREMENT takes a name or a regular expression, not %s", x)
	}
	ms, err := ex.measurements(db, src)
	if err != nil {
		return nil, err
	}
	if s.Condition != nil {
		if ms, err = ex.filterMeasurements(db, ms, s.Condition); err != nil {
			return nil, err
		}
	}
	ms = page(ms, s.Offset, s.Limit)
	if len(ms) == 0 {
		return nil, nil
	}
	return []*row{listRow("measurements", "name", ms)}, nil
}

// page applies OFFSET and LIMIT to a list.
func page[T any](xs []T, offset, limit int) []T {
	if offset > 0 {
		xs = xs[min(offset, len(xs)):]
	}
	if limit > 0 && len(xs) > limit {
		xs = xs[:limit]
	}
	return xs
}

// filterMeasurements keeps the measurements with a series that passes
// cond (a condition on tags).
func (ex *executor) filterMeasurements(db string, ms []string, cond influxql.Expr) ([]string, error) {
	var out []string
	for _, m := range ms {
		series, err := ex.seriesOf(db, m, cond)
		if err != nil {
			return nil, err
		}
		if len(series) > 0 {
			out = append(out, m)
		}
	}
	return out, nil
}

// metaSeries is one InfluxDB series found by a listing: its measurement,
// field and tags.
type metaSeries struct {
	measurement, field string
	tags               labels.Labels
}

// seriesOf lists the series of measurement m in db (all measurements
// when m is "") that pass cond, a condition on tags; the time part of a
// condition is ignored, as listings cover all time.
func (ex *executor) seriesOf(db, m string, cond influxql.Expr) ([]metaSeries, error) {
	isTag := func(*influxql.VarRef) bool { return true }
	expr, _, err := influxql.ConditionExpr(cond, &influxql.NowValuer{Now: ex.now})
	if err != nil {
		return nil, err
	}
	c, err := newCondition(expr, isTag)
	if err != nil {
		return nil, err
	}
	ms, err := matchersOf(expr, isTag)
	if err != nil {
		return nil, fmt.Errorf("invalid condition %s: %v", expr, err)
	}
	ms = append(ms, dbMatcher(db))
	if m != "" {
		ms = append(ms, prefixMatcher(m))
	}
	limit := ex.api.cfg.Limits.MaxSeriesPerQuery
	list, err := ex.api.b.Series(ex.ctx, ms, limit+1)
	if err != nil {
		return nil, backendError(err)
	}
	if len(list) > limit {
		return nil, fmt.Errorf("max-select-series limit exceeded: more than %d series match; narrow the statement with FROM or WHERE", limit)
	}
	out := make([]metaSeries, 0, len(list))
	for _, ls := range list {
		name := ls.Get(labels.MetricName)
		ms := metaSeries{tags: tagsOf(ls)}
		var ok bool
		if m != "" {
			ms.measurement = m
			ms.field, ok = fieldOf(name, m)
		} else {
			ms.measurement, ms.field, ok = splitMetric(name)
		}
		if ok && c.matchSeries(ms.tags) {
			out = append(out, ms)
		}
	}
	return out, nil
}

// sourceMeasurements resolves the sources of a SHOW statement to
// measurements ("" meaning all of them).
func (ex *executor) sourceMeasurements(db string, srcs influxql.Sources) ([]string, error) {
	if len(srcs) == 0 {
		return []string{""}, nil
	}
	var out []string
	for _, src := range srcs {
		m, ok := src.(*influxql.Measurement)
		if !ok {
			return nil, fmt.Errorf("a subquery is not a valid source of a SHOW statement: %s", src)
		}
		names, err := ex.measurements(db, m)
		if err != nil {
			return nil, err
		}
		out = append(out, names...)
	}
	sort.Strings(out)
	return slices.Compact(out), nil
}

// perMeasurement collects, per measurement, a sorted set of strings from
// the series of a SHOW statement.
func (ex *executor) perMeasurement(db string, srcs influxql.Sources, cond influxql.Expr, pick func(metaSeries, func(string))) (map[string][]string, []string, error) {
	ms, err := ex.sourceMeasurements(db, srcs)
	if err != nil {
		return nil, nil, err
	}
	sets := map[string]map[string]struct{}{}
	for _, m := range ms {
		series, err := ex.seriesOf(db, m, cond)
		if err != nil {
			return nil, nil, err
		}
		for _, s := range series {
			set := sets[s.measurement]
			if set == nil {
				set = map[string]struct{}{}
				sets[s.measurement] = set
			}
			pick(s, func(v string) { set[v] = struct{}{} })
		}
	}
	out := make(map[string][]string, len(sets))
	names := make([]string, 0, len(sets))
	for m, set := range sets {
		vals := make([]string, 0, len(set))
		for v := range set {
			vals = append(vals, v)
		}
		sort.Strings(vals)
		out[m] = vals
		names = append(names, m)
	}
	sort.Strings(names)
	return out, names, nil
}

func (ex *executor) showTagKeys(s *influxql.ShowTagKeysStatement) ([]*row, error) {
	db, err := ex.database(s.Database)
	if err != nil {
		return nil, err
	}
	sets, names, err := ex.perMeasurement(db, s.Sources, s.Condition, func(ms metaSeries, add func(string)) {
		for _, t := range ms.tags {
			add(t.Name)
		}
	})
	if err != nil {
		return nil, err
	}
	var rows []*row
	for _, m := range page(names, s.SOffset, s.SLimit) {
		if keys := page(sets[m], s.Offset, s.Limit); len(keys) > 0 {
			rows = append(rows, listRow(m, "tagKey", keys))
		}
	}
	return rows, nil
}

func (ex *executor) showFieldKeys(s *influxql.ShowFieldKeysStatement) ([]*row, error) {
	db, err := ex.database(s.Database)
	if err != nil {
		return nil, err
	}
	sets, names, err := ex.perMeasurement(db, s.Sources, nil, func(ms metaSeries, add func(string)) { add(ms.field) })
	if err != nil {
		return nil, err
	}
	var rows []*row
	for _, m := range names {
		keys := page(sets[m], s.Offset, s.Limit)
		if len(keys) == 0 {
			continue
		}
		r := &row{Name: m, Columns: []string{"fieldKey", "fieldType"}}
		for _, k := range keys {
			r.Values = append(r.Values, []any{k, "float"}) // every value is stored as a float64
		}
		rows = append(rows, r)
	}
	return rows, nil
}

func (ex *executor) showTagValues(s *influxql.ShowTagValuesStatement) ([]*row, error) {
	db, err := ex.database(s.Database)
	if err != nil {
		return nil, err
	}
	keyOK, err := tagKeyFilter(s.Op, s.TagKeyExpr)
	if err != nil {
		return nil, err
	}
	const sep = "\x00"
	sets, names, err := ex.perMeasurement(db, s.Sources, s.Condition, func(ms metaSeries, add func(string)) {
		for _, t := range ms.tags {
			if keyOK(t.Name) {
				add(t.Name + sep + t.Value)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	var rows []*row
	for _, m := range names {
		pairs := page(sets[m], s.Offset, s.Limit)
		if len(pairs) == 0 {
			continue
		}
		r := &row{Name: m, Columns: []string{"key", "value"}}
		for _, p := range pairs {
			k, v, _ := strings.Cut(p, sep)
			r.Values = append(r.Values, []any{k, v})
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// tagKeyFilter compiles the WITH KEY clause of SHOW TAG VALUES.
func tagKeyFilter(op influxql.Token, lit influxql.Literal) (func(string) bool, error) {
	switch lit := lit.(type) {
	case *influxql.StringLiteral:
		k := influx.LabelName(lit.Val)
		switch op {
		case influxql.EQ:
			return func(s string) bool { return s == k }, nil
		case influxql.NEQ:
			return func(s string) bool { return s != k }, nil
		}
	case *influxql.ListLiteral:
		set := map[string]bool{}
		for _, v := range lit.Vals {
			set[influx.LabelName(v)] = true
		}
		return func(s string) bool { return set[s] }, nil
	case *influxql.RegexLiteral:
		switch op {
		case influxql.EQREGEX:
			return lit.Val.MatchString, nil
		case influxql.NEQREGEX:
			return func(s string) bool { return !lit.Val.MatchString(s) }, nil
		}
	}
	return nil, fmt.Errorf("unsupported WITH KEY clause: %s %s", op, lit)
}

func (ex *executor) showSeries(s *influxql.ShowSeriesStatement) ([]*row, error) {
	db, err := ex.database(s.Database)
	if err != nil {
		return nil, err
	}
	sets, names, err := ex.perMeasurement(db, s.Sources, s.Condition, func(ms metaSeries, add func(string)) {
		add(seriesKey(ms.measurement, ms.tags))
	})
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, m := range names {
		keys = append(keys, sets[m]...)
	}
	keys = page(keys, s.Offset, s.Limit)
	if len(keys) == 0 {
		return nil, nil
	}
	return []*row{listRow("", "key", keys)}, nil
}

func (ex *executor) showRetentionPolicies(s *influxql.ShowRetentionPoliciesStatement) ([]*row, error) {
	if _, err := ex.database(s.Database); err != nil {
		return nil, err
	}
	// One policy, the default one InfluxDB creates with a database.
	// Tributary keeps data as long as the node's retention flags say;
	// "0s" is InfluxDB's "forever".
	return []*row{{
		Columns: []string{"name", "duration", "shardGroupDuration", "replicaN", "default"},
		Values:  [][]any{{"autogen", "0s", "168h0m0s", float64(1), true}},
	}}, nil
}
