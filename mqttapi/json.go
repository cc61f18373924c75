package mqttapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tributarydb/tributary/node/labels"
)

// JSONMapping says how a JSON payload becomes points; docs/mqtt.md
// ("JSON payloads") is its specification. A path names a field of a
// record: keys separated by '.', each descending into an object.
type JSONMapping struct {
	// Metric is a fixed metric name. At most one of Metric, MetricField
	// and MetricTopic is set; with none, each value field is named after
	// its path alone.
	Metric string `json:"metric,omitempty"`
	// MetricField is the path of a string field holding the metric name.
	MetricField string `json:"metric_field,omitempty"`
	// MetricTopic is the capture name (a "+name" level of the topic
	// filter) whose topic level is the metric name; it is then not a
	// label.
	MetricTopic string `json:"metric_topic,omitempty"`
	// ValueFields are the paths of the values. Empty: every number and
	// boolean of the record, nested objects included, that is not used
	// as the metric name, a label or the time.
	ValueFields []string `json:"value_fields,omitempty"`
	// LabelFields are the paths of fields (strings, numbers, booleans)
	// that become labels, named after the path ('.' becomes '_').
	LabelFields []string `json:"label_fields,omitempty"`
	// TimeField is the path of the timestamp; empty: the time the message
	// was received.
	TimeField string `json:"time_field,omitempty"`
	// TimeUnit is the unit of TimeField: s, ms, us, ns (a number, or a
	// string holding one; s may have a fraction) or rfc3339 (a string).
	// Required with TimeField.
	TimeUnit string `json:"time_unit,omitempty"`
}

// maxJSONDepth bounds how deep value fields are looked for when
// ValueFields is empty.
const maxJSONDepth = 16

// jsonDecoder applies a JSONMapping.
type jsonDecoder struct {
	m          JSONMapping
	values     [][]string // split ValueFields
	labelPaths [][]string
	labelNames []string
	metricPath []string
	timePath   []string
	used       map[string]bool // paths not to take as values with ValueFields empty
	own        []labels.Label  // scratch
}

var timeUnits = map[string]int64{"s": 1000, "ms": 1, "us": -1000, "ns": -1_000_000, "rfc3339": 0}

// newJSONDecoder checks m and compiles it. caps are the subscription's
// capture names.
func newJSONDecoder(m JSONMapping, caps []string) (*jsonDecoder, error) {
	set := 0
	for _, s := range []string{m.Metric, m.MetricField, m.MetricTopic} {
		if s != "" {
			set++
		}
	}
	if set > 1 {
		return nil, errors.New("json: set at most one of metric, metric_field and metric_topic")
	}
	if m.MetricTopic != "" && !slices.Contains(caps, m.MetricTopic) {
		return nil, fmt.Errorf("json: metric_topic %q is not a capture of the topic filter (a level written +%s)", m.MetricTopic, m.MetricTopic)
	}
	if m.Metric != "" && sanitizeName(m.Metric) != m.Metric {
		return nil, fmt.Errorf("json: metric %q is not a metric name ([a-zA-Z_][a-zA-Z0-9_.:-]*)", m.Metric)
	}
	if _, ok := timeUnits[m.TimeUnit]; m.TimeField != "" && !ok {
		return nil, fmt.Errorf("json: time_field %q needs time_unit s, ms, us, ns or rfc3339 (got %q)", m.TimeField, m.TimeUnit)
	}
	if m.TimeField == "" && m.TimeUnit != "" {
		return nil, errors.New("json: time_unit without time_field")
	}
	d := &jsonDecoder{m: m, used: map[string]bool{}}
	var err error
	path := func(what, p string) []string {
		if err != nil || p == "" {
			return nil
		}
		parts := strings.Split(p, ".")
		if slices.Contains(parts, "") {
			err = fmt.Errorf("json: %s %q: empty key in path", what, p)
		}
		d.used[p] = true
		return parts
	}
	d.metricPath = path("metric_field", m.MetricField)
	d.timePath = path("time_field", m.TimeField)
	labelNames := map[string]bool{}
	for _, c := range caps {
		labelNames[c] = true
	}
	for _, p := range m.LabelFields {
		d.labelPaths = append(d.labelPaths, path("label_fields", p))
		name := pathName(p)
		if labelNames[name] || strings.HasPrefix(name, "__") {
			return nil, fmt.Errorf("json: label field %q makes label %q, which is a topic capture, another label field or reserved", p, name)
		}
		labelNames[name] = true
		d.labelNames = append(d.labelNames, name)
	}
	for _, p := range m.ValueFields {
		if d.used[p] {
			return nil, fmt.Errorf("json: value field %q is also the metric, time or a label", p)
		}
		d.values = append(d.values, path("value_fields", p))
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// pathName is the metric or label name a path gives.
func pathName(p string) string { return sanitizeName(strings.ReplaceAll(p, ".", "_")) }

func (d *jsonDecoder) decode(in *inbound, r *result) {
	dec := json.NewDecoder(bytes.NewReader(in.payload))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		r.refuseAll(reasonSyntax, "not JSON: %v", err)
		return
	}
	if _, err := dec.Token(); err != io.EOF {
		r.refuseAll(reasonSyntax, "not JSON: data after the top-level value")
		return
	}
	switch v := doc.(type) {
	case map[string]any:
		d.record(v, in, r)
	case []any:
		for i, e := range v {
			obj, ok := e.(map[string]any)
			if !ok {
				r.refuse(reasonSyntax, 1, "element %d of the array is not an object", i)
				continue
			}
			if !d.record(obj, in, r) {
				return
			}
		}
	default:
		r.refuseAll(reasonSyntax, "the payload is neither an object nor an array of objects")
	}
}

// record turns one object into points; false when the message is
// refused whole.
func (d *jsonDecoder) record(obj map[string]any, in *inbound, r *result) bool {
	base, err := d.metricBase(obj, in)
	if err != nil {
		r.refuse(err.why, 1, "%s", err.msg)
		return true
	}
	ts := in.receivedMs
	if d.timePath != nil {
		if ts, err = d.timestamp(obj); err != nil {
			r.refuse(err.why, 1, "%s", err.msg)
			return true
		}
	}
	d.own = d.own[:0]
	for i, p := range d.labelPaths {
		v, ok := lookup(obj, p)
		if !ok || v == nil {
			continue
		}
		s, ok := scalarString(v)
		if !ok {
			r.refuse(reasonBadValue, 1, "label field %q is an object or an array", d.m.LabelFields[i])
			return true
		}
		d.own = append(d.own, labels.Label{Name: d.labelNames[i], Value: s})
	}
	if d.values != nil {
		return d.explicitValues(obj, base, ts, r)
	}
	return d.allValues(obj, "", 0, base, ts, r)
}

// explicitValues stores the ValueFields of obj.
func (d *jsonDecoder) explicitValues(obj map[string]any, base string, ts int64, r *result) bool {
	for i, p := range d.values {
		path := d.m.ValueFields[i]
		v, ok := lookup(obj, p)
		switch {
		case !ok:
			r.refuse(reasonMissingField, 1, "value field %q is missing", path)
			continue
		case v == nil:
			continue // null: no value
		}
		f, ok := number(v)
		if !ok {
			r.refuse(reasonBadValue, 1, "value field %q is not a number or a boolean", path)
			continue
		}
		name := base
		if base == "" {
			name = pathName(path)
		} else if len(d.values) > 1 {
			name = base + "_" + pathName(path)
		}
		if !r.add(name, d.own, ts, f) {
			return false
		}
	}
	return true
}

// allValues stores every number and boolean of obj (nested objects
// included) whose path is not otherwise used, in key order.
func (d *jsonDecoder) allValues(obj map[string]any, prefix string, depth int, base string, ts int64, r *result) bool {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		if d.used[path] {
			continue
		}
		switch v := obj[k].(type) {
		case map[string]any:
			if depth+1 < maxJSONDepth && !d.allValues(v, path, depth+1, base, ts, r) {
				return false
			}
		case json.Number, bool:
			f, ok := number(v)
			if !ok {
				r.refuse(reasonBadValue, 1, "field %q: %v is out of range", path, v)
				continue
			}
			name := pathName(path)
			if base != "" {
				name = base + "_" + name
			}
			if !r.add(name, d.own, ts, f) {
				return false
			}
		}
	}
	return true
}

// decodeErr is a refusal of one record.
type decodeErr struct {
	why reason
	msg string
}

// metricBase returns the metric name (or prefix) of a record, "" when
// values are named by their path alone.
func (d *jsonDecoder) metricBase(obj map[string]any, in *inbound) (string, *decodeErr) {
	switch {
	case d.m.Metric != "":
		return d.m.Metric, nil
	case d.m.MetricTopic != "":
		for _, c := range in.caps {
			if c.name == d.m.MetricTopic {
				if c.value == "" {
					return "", &decodeErr{reasonBadTopic, fmt.Sprintf("topic %q: the metric level %q is empty", in.topic, c.name)}
				}
				return sanitizeName(c.value), nil
			}
		}
		return "", &decodeErr{reasonBadTopic, fmt.Sprintf("topic %q has no level %q", in.topic, d.m.MetricTopic)}
	case d.metricPath != nil:
		v, ok := lookup(obj, d.metricPath)
		if !ok {
			return "", &decodeErr{reasonMissingField, fmt.Sprintf("metric field %q is missing", d.m.MetricField)}
		}
		s, ok := v.(string)
		if !ok || s == "" {
			return "", &decodeErr{reasonBadValue, fmt.Sprintf("metric field %q is not a non-empty string", d.m.MetricField)}
		}
		return sanitizeName(s), nil
	}
	return "", nil
}

// timestamp reads the record's time in milliseconds since the epoch.
func (d *jsonDecoder) timestamp(obj map[string]any) (int64, *decodeErr) {
	v, ok := lookup(obj, d.timePath)
	if !ok || v == nil {
		return 0, &decodeErr{reasonMissingField, fmt.Sprintf("time field %q is missing", d.m.TimeField)}
	}
	bad := func(format string, args ...any) (int64, *decodeErr) {
		return 0, &decodeErr{reasonBadTimestamp, fmt.Sprintf("time field %q: ", d.m.TimeField) + fmt.Sprintf(format, args...)}
	}
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case json.Number:
		s = v.String()
	default:
		return bad("not a number or a string")
	}
	if d.m.TimeUnit == "rfc3339" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return bad("%q is not an RFC 3339 time", s)
		}
		return t.UnixMilli(), nil
	}
	ms, ok := toMillis(s, timeUnits[d.m.TimeUnit])
	if !ok {
		return bad("%q is not a timestamp in %s", s, d.m.TimeUnit)
	}
	return ms, nil
}

// toMillis converts a decimal number to milliseconds: mult > 0 multiplies
// by mult, mult < 0 divides by -mult (towards the earlier millisecond).
func toMillis(s string, mult int64) (int64, bool) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		if mult > 0 {
			if i > math.MaxInt64/mult || i < math.MinInt64/mult {
				return 0, false
			}
			return i * mult, true
		}
		d := -mult
		q := i / d
		if i%d < 0 {
			q--
		}
		return q, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	if mult > 0 {
		f *= float64(mult)
	} else {
		f /= float64(-mult)
	}
	f = math.Floor(f)
	if f >= math.MaxInt64 || f < math.MinInt64 {
		return 0, false
	}
	return int64(f), true
}

// lookup follows path through nested objects.
func lookup(obj map[string]any, path []string) (any, bool) {
	var v any = obj
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// number reads a JSON number or boolean as a float64.
func number(v any) (float64, bool) {
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(v.String(), 64)
		return f, err == nil && !math.IsInf(f, 0)
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// scalarString renders a label field's value.
func scalarString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}
