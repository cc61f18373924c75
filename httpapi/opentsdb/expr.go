package opentsdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/tributarydb/tributary/model/aggregate"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
)

// subQuery is one metric query, as in the "queries" of a POST /api/query
// body; the m= parameter of GET /api/query parses into the same shape.
type subQuery struct {
	Aggregator   string            `json:"aggregator"`
	Metric       string            `json:"metric"`
	Downsample   string            `json:"downsample,omitempty"`
	Rate         bool              `json:"rate"`
	RateOptions  *rateOptions      `json:"rateOptions,omitempty"`
	Tags         map[string]string `json:"tags,omitempty"`
	Filters      []filterSpec      `json:"filters,omitempty"`
	ExplicitTags bool              `json:"explicitTags"`
	Tsuids       []string          `json:"tsuids,omitempty"`
	Percentiles  []float64         `json:"percentiles,omitempty"`
	Index        int               `json:"index"`
}

// rateOptions are OpenTSDB's counter options for rate.
type rateOptions struct {
	Counter    bool      `json:"counter"`
	CounterMax flexFloat `json:"counterMax"`
	ResetValue flexFloat `json:"resetValue"`
	DropResets bool      `json:"dropResets"`
}

// flexFloat is a JSON number that may also arrive as a numeric string.
type flexFloat struct {
	set bool
	v   float64
}

func (f *flexFloat) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if len(s) >= 2 && s[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			return nil
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%.32s is not a number", string(b))
	}
	f.set, f.v = true, v
	return nil
}

func (f flexFloat) MarshalJSON() ([]byte, error) {
	if !f.set {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f.v, 'g', -1, 64), nil
}

// filterSpec is one tag filter: {"type","tagk","filter","groupBy"}.
type filterSpec struct {
	Type    string `json:"type"`
	Tagk    string `json:"tagk"`
	Filter  string `json:"filter"`
	GroupBy bool   `json:"groupBy"`
}

// filterTypes are the supported filter types with a description each
// (served by /api/config/filters).
var filterTypes = map[string]struct {
	Examples    string `json:"examples"`
	Description string `json:"description"`
}{
	"literal_or":      {"host=literal_or(web01),  host=literal_or(web01|web02)", "Matches one of the values given, separated by '|'; case sensitive."},
	"iliteral_or":     {"host=iliteral_or(web01),  host=iliteral_or(WEB01|web02)", "Like literal_or, ignoring case."},
	"not_literal_or":  {"host=not_literal_or(web01|web02)", "Matches series that have the tag with none of the values given; case sensitive."},
	"not_iliteral_or": {"host=not_iliteral_or(web01|WEB02)", "Like not_literal_or, ignoring case."},
	"wildcard":        {"host=wildcard(web*),  host=wildcard(*.example.com)", "Matches values where each '*' stands for any run of characters; case sensitive."},
	"iwildcard":       {"host=iwildcard(WEB*)", "Like wildcard, ignoring case."},
	"regexp":          {"host=regexp(web[0-9]+)", "Matches values containing a match of the regular expression (RE2 syntax; anchor with ^ and $)."},
	"not_key":         {"host=not_key()", "Matches series that do not have the tag key at all."},
}

// parseTagFilter turns a legacy tag value ("*", "a|b", "web01" or
// "type(expr)") into a filter.
func parseTagFilter(tagk, v string, groupBy bool) (filterSpec, error) {
	if v == "*" {
		return filterSpec{Type: "wildcard", Tagk: tagk, Filter: "*", GroupBy: groupBy}, nil
	}
	if i := strings.IndexByte(v, '('); i > 0 && strings.HasSuffix(v, ")") {
		name := strings.ToLower(v[:i])
		if _, ok := filterTypes[name]; ok {
			return filterSpec{Type: name, Tagk: tagk, Filter: v[i+1 : len(v)-1], GroupBy: groupBy}, nil
		}
		if isIdent(name) {
			return filterSpec{}, fmt.Errorf("tag %q: unknown filter type %q (supported: %s)", tagk, name, strings.Join(sortedKeys(filterTypes), ", "))
		}
	}
	return filterSpec{Type: "literal_or", Tagk: tagk, Filter: v, GroupBy: groupBy}, nil
}

func isIdent(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c == '_') {
			return false
		}
	}
	return s != ""
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// matchers compiles f into label matchers on the mapped tag key. Every
// filter but not_key also requires the tag to be present, as in OpenTSDB.
func (f filterSpec) matchers() ([]*labels.Matcher, error) {
	name, err := queryLabelName(f.Tagk)
	if err != nil {
		return nil, fmt.Errorf("filter %s(%.64s): %v", f.Type, f.Filter, err)
	}
	alternatives := func(ci bool) (string, error) {
		var parts []string
		for _, v := range strings.Split(f.Filter, "|") {
			if v != "" {
				parts = append(parts, regexp.QuoteMeta(v))
			}
		}
		if len(parts) == 0 {
			return "", fmt.Errorf("filter %s on tag %q: no value given", f.Type, f.Tagk)
		}
		re := strings.Join(parts, "|")
		if ci {
			re = "(?i:" + re + ")"
		}
		return re, nil
	}
	var t labels.MatchType
	var value string
	switch typ := strings.ToLower(f.Type); typ {
	case "literal_or", "iliteral_or", "not_literal_or", "not_iliteral_or":
		value, err = alternatives(strings.Contains(typ, "iliteral"))
		if err != nil {
			return nil, err
		}
		t = labels.MatchRegexp
		if strings.HasPrefix(typ, "not_") {
			t = labels.MatchNotRegexp
		} else if !strings.Contains(f.Filter, "|") && typ == "literal_or" {
			t, value = labels.MatchEqual, f.Filter
		}
	case "wildcard", "iwildcard":
		if f.Filter == "" {
			return nil, fmt.Errorf("filter %s on tag %q: no pattern given", f.Type, f.Tagk)
		}
		parts := strings.Split(f.Filter, "*")
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		value = strings.Join(parts, ".*")
		if typ == "iwildcard" {
			value = "(?i:" + value + ")"
		}
		t = labels.MatchRegexp
	case "regexp":
		if _, err := regexp.Compile(f.Filter); err != nil {
			return nil, fmt.Errorf("filter regexp on tag %q: %v", f.Tagk, err)
		}
		// OpenTSDB matches a regexp anywhere in the value.
		t, value = labels.MatchRegexp, "(?s:.*(?:"+f.Filter+").*)"
	case "not_key":
		if f.Filter != "" {
			return nil, fmt.Errorf("filter not_key on tag %q takes no value, got %.64q", f.Tagk, f.Filter)
		}
		m, err := labels.NewMatcher(labels.MatchEqual, name, "")
		return []*labels.Matcher{m}, err
	default:
		return nil, fmt.Errorf("tag %q: unknown filter type %q (supported: %s)", f.Tagk, f.Type, strings.Join(sortedKeys(filterTypes), ", "))
	}
	m, err := labels.NewMatcher(t, name, value)
	if err != nil {
		return nil, fmt.Errorf("filter %s on tag %q: %v", f.Type, f.Tagk, err)
	}
	out := []*labels.Matcher{m}
	if m.MatchesEmpty() {
		present, _ := labels.NewMatcher(labels.MatchRegexp, name, ".+")
		out = append(out, present)
	}
	return out, nil
}

// aggregator is an OpenTSDB aggregation function mapped onto the node's.
type aggregator struct {
	name string
	fn   rollup.Func // FuncNone for "none" and for a dist
	// dist, for p50 ... p999 and dev, is the distribution fold: answered
	// in this package from raw samples (no rollup holds it).
	dist *aggregate.Dist
}

// distAggregators are OpenTSDB's percentile aggregators and dev
// (aggregate.Dist defines them as OpenTSDB does).
var distAggregators = map[string]aggregate.Dist{
	"p50": {Kind: aggregate.DistPercentile, P: 50}, "p75": {Kind: aggregate.DistPercentile, P: 75},
	"p90": {Kind: aggregate.DistPercentile, P: 90}, "p95": {Kind: aggregate.DistPercentile, P: 95},
	"p99": {Kind: aggregate.DistPercentile, P: 99}, "p999": {Kind: aggregate.DistPercentile, P: 99.9},
	"dev": {Kind: aggregate.DistDev},
}

// aggregatorNames lists every supported aggregator, sorted.
func aggregatorNames() []string {
	names := sortedKeys(aggregators)
	for n := range distAggregators {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// aggregators lists the supported aggregators. zimsum, mimmax and mimmin
// are OpenTSDB's non-interpolating sum, max and min; this package never
// interpolates, so they equal sum, max and min.
var aggregators = map[string]rollup.Func{
	"avg": rollup.FuncAvg, "sum": rollup.FuncSum, "min": rollup.FuncMin, "max": rollup.FuncMax,
	"count": rollup.FuncCount, "first": rollup.FuncFirst, "last": rollup.FuncLast,
	"zimsum": rollup.FuncSum, "mimmax": rollup.FuncMax, "mimmin": rollup.FuncMin,
	"none": rollup.FuncNone,
}

func parseAggregator(name string, allowNone bool) (aggregator, error) {
	if d, ok := distAggregators[strings.ToLower(name)]; ok {
		return aggregator{name: strings.ToLower(name), dist: &d}, nil
	}
	fn, ok := aggregators[strings.ToLower(name)]
	if !ok || (!allowNone && fn == rollup.FuncNone) {
		if name == "" {
			return aggregator{}, errors.New("missing aggregator")
		}
		list := aggregatorNames()
		if !allowNone {
			list = slices.DeleteFunc(list, func(s string) bool { return s == "none" })
		}
		return aggregator{}, fmt.Errorf("aggregator %.32q is not supported (supported: %s)", name, strings.Join(list, ", "))
	}
	return aggregator{name: strings.ToLower(name), fn: fn}, nil
}

// fillPolicy says what a downsampled series holds in buckets without data.
type fillPolicy int

const (
	fillNone fillPolicy = iota // leave the bucket out
	fillNaN                    // NaN (written as null)
	fillNull                   // null
	fillZero                   // 0
)

// downsample is a parsed "<interval>-<aggregator>[-<fill>]".
type downsample struct {
	stepMs int64 // 0 with all
	all    bool  // "0all": one bucket for the whole range
	// calendar alignment was asked for (a 'c' unit suffix)
	calendar bool
	agg      aggregator
	fill     fillPolicy
}

// unitMs gives the length of OpenTSDB's duration units (n: 30 days, y:
// 365 days, as OpenTSDB counts them outside calendar mode).
var unitMs = map[string]int64{
	"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000,
	"w": 7 * 86_400_000, "n": 30 * 86_400_000, "y": 365 * 86_400_000,
}

// parseDuration parses "<number><unit>" such as "1m", "500ms", "2.5h"; a
// fractional number is rounded to the millisecond. A trailing 'c' asks
// for calendar alignment, accepted for units up to a day (where, in UTC,
// it coincides with the epoch alignment used here).
func parseDuration(s string) (ms int64, calendar bool, err error) {
	orig := s
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	num, unit := s[:i], s[i:]
	if strings.HasSuffix(unit, "c") && len(unit) > 1 {
		unit, calendar = unit[:len(unit)-1], true
	}
	mult, ok := unitMs[unit]
	if num == "" || !ok {
		return 0, false, fmt.Errorf("invalid duration %.32q: want a number and a unit (ms, s, m, h, d, w, n, y), e.g. 1m", orig)
	}
	if calendar && mult > unitMs["d"] {
		return 0, false, fmt.Errorf("duration %.32q: calendar alignment is supported for ms, s, m, h and d only", orig)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, false, fmt.Errorf("invalid duration %.32q: %v", orig, err)
	}
	f := math.Round(v * float64(mult))
	if f < 1 || f > float64(math.MaxInt64/4) {
		return 0, false, fmt.Errorf("duration %.32q is out of range", orig)
	}
	return int64(f), calendar, nil
}

// parseDownsample parses "1m-avg", "1h-sum-zero", "0all-max", "1m-avg-"
// (an empty fill policy, as some Grafana versions send, is none).
func parseDownsample(s string) (*downsample, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, "-")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, fmt.Errorf("downsample %.64q: want <interval>-<aggregator>[-<fill policy>], e.g. 1m-avg or 1m-avg-nan", s)
	}
	ds := &downsample{}
	if iv := parts[0]; iv == "all" || strings.HasSuffix(iv, "all") && httpapi.IsDigits(strings.TrimSuffix(iv, "all")) {
		ds.all = true
	} else {
		step, cal, err := parseDuration(iv)
		if err != nil {
			return nil, fmt.Errorf("downsample %.64q: %v", s, err)
		}
		ds.stepMs, ds.calendar = step, cal
	}
	agg, err := parseAggregator(parts[1], false)
	if err != nil {
		return nil, fmt.Errorf("downsample %.64q: %v", s, err)
	}
	ds.agg = agg
	if len(parts) == 3 {
		switch strings.ToLower(parts[2]) {
		case "", "none":
		case "nan":
			ds.fill = fillNaN
		case "null":
			ds.fill = fillNull
		case "zero":
			ds.fill = fillZero
		default:
			return nil, fmt.Errorf("downsample %.64q: fill policy %q is not supported (none, nan, null, zero)", s, parts[2])
		}
	}
	return ds, nil
}

// rateSpec is a parsed rate with its counter options.
type rateSpec struct {
	counter    bool
	counterMax float64
	resetValue float64
	dropResets bool
}

func newRateSpec(o *rateOptions) (*rateSpec, error) {
	r := &rateSpec{counterMax: math.MaxInt64}
	if o == nil {
		return r, nil
	}
	r.counter, r.dropResets = o.Counter, o.DropResets
	if o.CounterMax.set {
		if o.CounterMax.v <= 0 {
			return nil, fmt.Errorf("rateOptions.counterMax %g must be positive", o.CounterMax.v)
		}
		r.counterMax = o.CounterMax.v
	}
	if o.ResetValue.set {
		if o.ResetValue.v < 0 {
			return nil, fmt.Errorf("rateOptions.resetValue %g must not be negative", o.ResetValue.v)
		}
		r.resetValue = o.ResetValue.v
	}
	return r, nil
}

// parseRate parses the rate part of m=: "rate", "rate{counter}",
// "rate{counter,<max>,<reset>}", "rate{dropcounter,...}".
func parseRate(s string) (*rateOptions, error) {
	if s == "rate" {
		return nil, nil
	}
	if !strings.HasPrefix(s, "rate{") || !strings.HasSuffix(s, "}") {
		return nil, fmt.Errorf("rate %.64q: want rate or rate{counter[,<max>[,<reset value>]]}", s)
	}
	parts := strings.Split(s[len("rate{"):len(s)-1], ",")
	o := &rateOptions{}
	switch parts[0] {
	case "counter":
		o.Counter = true
	case "dropcounter":
		o.Counter, o.DropResets = true, true
	case "":
	default:
		return nil, fmt.Errorf("rate %.64q: the first option must be counter or dropcounter", s)
	}
	if len(parts) > 3 {
		return nil, fmt.Errorf("rate %.64q: too many options", s)
	}
	for i, dst := range []*flexFloat{&o.CounterMax, &o.ResetValue} {
		if len(parts) > i+1 && parts[i+1] != "" {
			v, err := strconv.ParseFloat(parts[i+1], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("rate %.64q: %.32q is not a number", s, parts[i+1])
			}
			*dst = flexFloat{set: true, v: v}
		}
	}
	return o, nil
}

// splitTop splits s at sep outside {} and ().
func splitTop(s string, sep byte) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{', '(':
			depth++
		case '}', ')':
			if depth > 0 {
				depth--
			}
		case sep:
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// parseM parses the m= parameter:
//
//	<aggregator>:[<downsample>:][rate[{counter[,max[,reset]]}]:][explicit_tags:]<metric>[{<group-by filters>}][{<filters>}]
func parseM(s string) (subQuery, error) {
	var sq subQuery
	parts := splitTop(s, ':')
	if len(parts) < 2 {
		return sq, fmt.Errorf("m=%.128q: want <aggregator>:[<downsample>:][rate:]<metric>[{tags}]", s)
	}
	sq.Aggregator = parts[0]
	for _, p := range parts[1 : len(parts)-1] {
		switch {
		case p == "rate" || strings.HasPrefix(p, "rate{"):
			o, err := parseRate(p)
			if err != nil {
				return sq, fmt.Errorf("m=%.128q: %v", s, err)
			}
			sq.Rate, sq.RateOptions = true, o
		case p == "explicit_tags":
			sq.ExplicitTags = true
		case strings.HasPrefix(p, "percentiles"):
			return sq, fmt.Errorf("m=%.128q: percentiles are not supported", s)
		case strings.Contains(p, "-"):
			if sq.Downsample != "" {
				return sq, fmt.Errorf("m=%.128q: more than one downsampler", s)
			}
			sq.Downsample = p
		default:
			return sq, fmt.Errorf("m=%.128q: unexpected part %.64q (want a downsampler like 1m-avg, rate, or explicit_tags)", s, p)
		}
	}
	metric, filters, err := parseMetricSpec(parts[len(parts)-1])
	if err != nil {
		return sq, fmt.Errorf("m=%.128q: %v", s, err)
	}
	sq.Metric, sq.Filters = metric, filters
	return sq, nil
}

// parseMetricSpec parses "metric{k=v,...}{k=v,...}": tags in the first
// braces group the answer, those in the second only filter.
func parseMetricSpec(s string) (string, []filterSpec, error) {
	i := strings.IndexByte(s, '{')
	if i < 0 {
		if s == "" {
			return "", nil, errors.New("missing metric name")
		}
		return s, nil, nil
	}
	metric, rest := s[:i], s[i:]
	if metric == "" {
		return "", nil, errors.New("missing metric name")
	}
	var filters []filterSpec
	for braces := 0; rest != ""; braces++ {
		if braces == 2 {
			return "", nil, fmt.Errorf("unexpected %.64q after the filters", rest)
		}
		if rest[0] != '{' {
			return "", nil, fmt.Errorf("unexpected %.64q after the metric", rest)
		}
		end := matchBrace(rest)
		if end < 0 {
			return "", nil, fmt.Errorf("unbalanced braces in %.64q", rest)
		}
		body := rest[1:end]
		rest = rest[end+1:]
		groupBy := braces == 0
		if strings.TrimSpace(body) == "" {
			continue
		}
		for _, kv := range splitTop(body, ',') {
			k, v, ok := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return "", nil, fmt.Errorf("tag filter %.64q: want key=value", kv)
			}
			f, err := parseTagFilter(k, strings.TrimSpace(v), groupBy)
			if err != nil {
				return "", nil, err
			}
			filters = append(filters, f)
		}
	}
	return metric, filters, nil
}

// matchBrace returns the index of the '}' closing s[0] == '{', or -1.
func matchBrace(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// plan is a compiled sub-query.
type plan struct {
	sq       subQuery
	metric   string
	agg      aggregator
	ds       *downsample
	rate     *rateSpec
	matchers []*labels.Matcher
	groupBy  []string // label names, sorted
	filters  []filterSpec
	explicit []string // label names the series must have exactly (with explicitTags)
}

// maxFilters bounds the filters of one sub-query.
const maxFilters = 256

// compile checks sq and turns it into a plan.
func compile(sq subQuery) (*plan, error) {
	p := &plan{sq: sq, metric: sq.Metric}
	if sq.Metric == "" {
		return nil, errors.New("missing metric name")
	}
	if len(sq.Tsuids) > 0 {
		return nil, errors.New("queries by tsuids are not supported: query by metric and tags")
	}
	if len(sq.Percentiles) > 0 {
		return nil, errors.New("percentiles are not supported")
	}
	var err error
	if p.agg, err = parseAggregator(sq.Aggregator, true); err != nil {
		return nil, err
	}
	if p.ds, err = parseDownsample(sq.Downsample); err != nil {
		return nil, err
	}
	if sq.Rate {
		if p.rate, err = newRateSpec(sq.RateOptions); err != nil {
			return nil, err
		}
	}
	p.filters = slices.Clone(sq.Filters)
	for _, k := range sortedKeys(sq.Tags) {
		f, err := parseTagFilter(k, sq.Tags[k], true)
		if err != nil {
			return nil, err
		}
		p.filters = append(p.filters, f)
	}
	if len(p.filters) > maxFilters {
		return nil, fmt.Errorf("%d tag filters, limit is %d", len(p.filters), maxFilters)
	}
	name, err := labels.NewMatcher(labels.MatchEqual, labels.MetricName, sq.Metric)
	if err != nil {
		return nil, err
	}
	p.matchers = []*labels.Matcher{name}
	for _, f := range p.filters {
		ms, err := f.matchers()
		if err != nil {
			return nil, err
		}
		p.matchers = append(p.matchers, ms...)
		ln := ms[0].Name
		if f.GroupBy && !strings.EqualFold(f.Type, "not_key") {
			p.groupBy = append(p.groupBy, ln)
		}
		if !strings.EqualFold(f.Type, "not_key") {
			p.explicit = append(p.explicit, ln)
		}
	}
	slices.Sort(p.groupBy)
	p.groupBy = slices.Compact(p.groupBy)
	slices.Sort(p.explicit)
	p.explicit = slices.Compact(p.explicit)
	if !sq.ExplicitTags {
		p.explicit = nil
	}
	return p, nil
}

// parseTime parses an OpenTSDB time: "now", "<n><unit>-ago", a Unix
// timestamp (10 digits or fewer: seconds, more: milliseconds; "s.mmm"
// seconds with milliseconds) or "yyyy/MM/dd[-HH:mm[:ss]]" (a space may
// replace the '-') in loc.
func parseTime(s string, now time.Time, loc *time.Location) (int64, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return 0, errors.New("empty time")
	case strings.EqualFold(s, "now"):
		return now.UnixMilli(), nil
	case strings.HasSuffix(strings.ToLower(s), "-ago"):
		d, _, err := parseDuration(s[:len(s)-4])
		if err != nil {
			return 0, fmt.Errorf("relative time %.32q: %v", s, err)
		}
		t := now.UnixMilli() - d
		if t < 0 {
			return 0, fmt.Errorf("relative time %.32q is before the epoch", s)
		}
		return t, nil
	case strings.ContainsAny(s, "/:"):
		for _, layout := range []string{"2006/01/02-15:04:05", "2006/01/02 15:04:05", "2006/01/02-15:04", "2006/01/02 15:04", "2006/01/02",
			"2006/01/02-15:04:05.000", "2006/01/02 15:04:05.000"} {
			if t, err := time.ParseInLocation(layout, s, loc); err == nil {
				if t.UnixMilli() < 0 {
					return 0, fmt.Errorf("time %.32q is before the epoch", s)
				}
				return t.UnixMilli(), nil
			}
		}
		return 0, fmt.Errorf("time %.32q: want yyyy/MM/dd-HH:mm:ss, yyyy/MM/dd, a Unix timestamp or <n><unit>-ago", s)
	}
	whole, frac, dot := strings.Cut(s, ".")
	if !httpapi.IsDigits(whole) || dot && (!httpapi.IsDigits(frac) || len(frac) > 3) {
		if strings.HasPrefix(s, "-") {
			return 0, fmt.Errorf("time %.32q: negative timestamps are not supported", s)
		}
		return 0, fmt.Errorf("time %.32q: want a Unix timestamp, yyyy/MM/dd-HH:mm:ss or <n><unit>-ago", s)
	}
	if len(whole) > 13 {
		return 0, fmt.Errorf("time %.32q is too large: use seconds (10 digits) or milliseconds (13 digits)", s)
	}
	v, _ := strconv.ParseInt(whole, 10, 64)
	if dot {
		ms, _ := strconv.ParseInt(frac+"00"[:3-len(frac)], 10, 64)
		return v*1000 + ms, nil
	}
	if len(whole) <= 10 {
		return v * 1000, nil
	}
	return v, nil
}
