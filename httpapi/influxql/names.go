package influxql

import (
	"regexp"
	"sort"
	"strings"

	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/node/labels"
)

// valueField is the field name most single-field writers use (collectd,
// the InfluxDB client examples, Node-RED): a metric name ending in
// "_value" is split before it.
const valueField = "value"

// splitMetric splits a metric name written by the line protocol API
// (influx.MetricName: measurement "_" field) before a final "_value",
// else at its first '_' after the first character: the split every
// listing uses (SHOW MEASUREMENTS,
// SHOW FIELD KEYS without FROM, FROM /regex/). It reports false for a
// name without such a '_' (a series that did not come from line
// protocol). A query that names its measurement (FROM "cpu_load") finds
// its fields by prefix instead, so either spelling reaches the series.
func splitMetric(name string) (measurement, field string, ok bool) {
	if m, ok := strings.CutSuffix(name, "_"+valueField); ok && m != "" {
		return m, valueField, true
	}
	i := strings.IndexByte(name[min(1, len(name)):], '_')
	if i < 0 {
		return "", "", false
	}
	i++
	if i+1 >= len(name) {
		return "", "", false
	}
	return name[:i], name[i+1:], true
}

// metricPrefix is the start of every metric name of measurement m.
func metricPrefix(m string) string { return influx.MeasurementName(m) + "_" }

// fieldOf returns the field a metric name stands for under measurement m,
// or false when the name is not one of m's: it must start with m's
// prefix, and not be split (splitMetric) into a longer measurement that
// starts with the same prefix. So FROM cpu finds cpu_usage_user but not
// cpu_load_short_value (listed as measurement cpu_load_short), while FROM
// docker_container_cpu finds docker_container_cpu_usage (listed under
// docker).
func fieldOf(name, m string) (string, bool) {
	prefix := metricPrefix(m)
	f, ok := strings.CutPrefix(name, prefix)
	if !ok || f == "" {
		return "", false
	}
	if sm, _, ok := splitMetric(name); ok && sm+"_" != prefix && strings.HasPrefix(sm, prefix) {
		return "", false
	}
	return f, true
}

// prefixMatcher selects every series of measurement m.
func prefixMatcher(m string) *labels.Matcher {
	return mustMatcher(labels.MatchRegexp, labels.MetricName, regexp.QuoteMeta(metricPrefix(m))+".+")
}

// namesMatcher selects the series of the given fields of measurement m.
func namesMatcher(m string, fields []string) *labels.Matcher {
	if len(fields) == 1 {
		return mustMatcher(labels.MatchEqual, labels.MetricName, influx.MetricName(m, fields[0]))
	}
	alts := make([]string, len(fields))
	for i, f := range fields {
		alts[i] = regexp.QuoteMeta(influx.MetricName(m, f))
	}
	sort.Strings(alts)
	return mustMatcher(labels.MatchRegexp, labels.MetricName, strings.Join(alts, "|"))
}

// dbMatcher selects the series of database db.
func dbMatcher(db string) *labels.Matcher {
	return mustMatcher(labels.MatchEqual, influx.DatabaseLabel, db)
}

func mustMatcher(t labels.MatchType, name, value string) *labels.Matcher {
	m, err := labels.NewMatcher(t, name, value)
	if err != nil {
		panic("BUG: influxql: matcher: " + err.Error())
	}
	return m
}

// tagsOf returns the InfluxDB tags of a series: its labels without the
// metric name and the database.
func tagsOf(ls labels.Labels) labels.Labels {
	out := make(labels.Labels, 0, len(ls))
	for _, l := range ls {
		if l.Name != labels.MetricName && l.Name != influx.DatabaseLabel {
			out = append(out, l)
		}
	}
	return out
}

// seriesKey renders a measurement and tags as InfluxDB's series key
// (SHOW SERIES): measurement,k=v,... with line protocol escapes.
func seriesKey(m string, tags labels.Labels) string {
	var b strings.Builder
	b.WriteString(escapeKey(m, false))
	for _, t := range tags {
		b.WriteByte(',')
		b.WriteString(escapeKey(t.Name, true))
		b.WriteByte('=')
		b.WriteString(escapeKey(t.Value, true))
	}
	return b.String()
}

func escapeKey(s string, tag bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ',' || c == ' ' || (tag && c == '=') {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// tagKey is a canonical string of tags, for grouping and ordering.
func tagKey(tags labels.Labels) string {
	var b strings.Builder
	for _, t := range tags {
		b.WriteString(t.Name)
		b.WriteByte(0)
		b.WriteString(t.Value)
		b.WriteByte(0)
	}
	return b.String()
}
