package mqttapi

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tributarydb/tributary/node/labels"
)

// Sparkplug B (Eclipse Sparkplug 3.0) payloads are protocol buffers. The
// fields read here, by number (proto2; every other field is skipped):
//
//	Payload: 1 timestamp (uint64, ms)  2 metrics (repeated Metric)
//	Metric:  1 name (string)  2 alias (uint64)  3 timestamp (uint64, ms)
//	         4 datatype (uint32)  7 is_null (bool)
//	         value, one of: 10 int_value (uint32)  11 long_value (uint64)
//	         12 float_value (float)  13 double_value (double)
//	         14 boolean_value (bool)  15..19 string, bytes, dataset,
//	         template, extension (not stored)
const (
	spPayloadTimestamp = 1
	spPayloadMetrics   = 2

	spMetricName      = 1
	spMetricAlias     = 2
	spMetricTimestamp = 3
	spMetricDatatype  = 4
	spMetricIsNull    = 7
	spMetricInt       = 10
	spMetricLong      = 11
	spMetricFloat     = 12
	spMetricDouble    = 13
	spMetricBool      = 14
	spMetricFirstNon  = 15 // string_value; 15..19 are values not stored
	spMetricLastNon   = 19
)

// Sparkplug data types (the datatype field) that are stored.
const (
	spInt8     = 1
	spInt16    = 2
	spInt32    = 3
	spInt64    = 4
	spUInt8    = 5
	spUInt16   = 6
	spUInt32   = 7
	spUInt64   = 8
	spFloat    = 9
	spDouble   = 10
	spBoolean  = 11
	spDateTime = 13
)

// Labels of Sparkplug points, from the topic.
const (
	labelGroup    = "group_id"
	labelEdgeNode = "edge_node_id"
	labelDevice   = "device_id"
)

// DefaultMaxAliasBytes bounds the memory of the Sparkplug alias tables.
const DefaultMaxAliasBytes = 4 << 20

// aliasEntry is what a BIRTH said about an alias.
type aliasEntry struct {
	name     string
	datatype uint32
}

// aliasTable holds the metric aliases each edge node declared in its
// NBIRTH and its devices' DBIRTHs. Aliases are scoped to an edge node
// (group id and edge node id); an NBIRTH starts the node's table afresh,
// an NDEATH drops it. The tables hold at most maxBytes (names plus a
// fixed cost per entry); past that, the tables of the nodes that were
// born longest ago are dropped. Used by the ingest goroutine only.
type aliasTable struct {
	maxBytes int
	bytes    int
	nodes    map[string]*nodeAliases
	order    []string // node keys, oldest birth first (may hold stale keys)
}

type nodeAliases struct {
	m     map[uint64]aliasEntry
	bytes int
}

const aliasEntryBytes = 64

func newAliasTable(maxBytes int) *aliasTable {
	return &aliasTable{maxBytes: maxBytes, nodes: map[string]*nodeAliases{}}
}

// reset starts node's table afresh (NBIRTH).
func (t *aliasTable) reset(node string) *nodeAliases {
	t.drop(node)
	na := &nodeAliases{m: map[uint64]aliasEntry{}}
	t.nodes[node] = na
	t.order = append(t.order, node)
	return na
}

// drop forgets node's table (NDEATH).
func (t *aliasTable) drop(node string) {
	if na, ok := t.nodes[node]; ok {
		t.bytes -= na.bytes
		delete(t.nodes, node)
	}
}

// define records an alias; false when the table would pass its budget
// even after dropping every other node's table.
func (t *aliasTable) define(node string, alias uint64, e aliasEntry) bool {
	na := t.nodes[node]
	if na == nil {
		na = t.reset(node)
	}
	cost := aliasEntryBytes + len(e.name)
	if old, ok := na.m[alias]; ok {
		cost -= aliasEntryBytes + len(old.name)
	}
	for t.bytes+cost > t.maxBytes && len(t.order) > 0 {
		oldest := t.order[0]
		if oldest == node {
			if len(t.order) == 1 {
				return false
			}
			t.order = append(t.order[1:], node) // keep this one
			continue
		}
		t.order = t.order[1:]
		t.drop(oldest)
	}
	if t.bytes+cost > t.maxBytes {
		return false
	}
	na.m[alias] = e
	na.bytes += cost
	t.bytes += cost
	t.compact()
	return true
}

// compact drops stale keys from order once they are most of it.
func (t *aliasTable) compact() {
	if len(t.order) <= 2*len(t.nodes)+16 {
		return
	}
	seen := map[string]bool{}
	kept := t.order[:0]
	for i := len(t.order) - 1; i >= 0; i-- {
		k := t.order[i]
		if t.nodes[k] != nil && !seen[k] {
			seen[k] = true
			kept = append(kept, k)
		}
	}
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	t.order = kept
}

func (t *aliasTable) lookup(node string, alias uint64) (aliasEntry, bool) {
	na := t.nodes[node]
	if na == nil {
		return aliasEntry{}, false
	}
	e, ok := na.m[alias]
	return e, ok
}

// sparkplugDecoder reads Sparkplug B messages: NBIRTH, DBIRTH, NDATA and
// DDATA become points; NDEATH drops the node's aliases; NCMD, DCMD,
// DDEATH and STATE are ignored.
type sparkplugDecoder struct {
	aliases *aliasTable
	own     []labels.Label // scratch
}

// spTopic is a parsed Sparkplug topic:
// spBv1.0/<group_id>/<message_type>/<edge_node_id>[/<device_id>].
type spTopic struct {
	group, msgType, edge, device string
}

func parseSparkplugTopic(topic string) (spTopic, bool) {
	parts := strings.Split(topic, "/")
	if len(parts) < 2 || parts[0] != "spBv1.0" {
		return spTopic{}, false
	}
	if len(parts) >= 3 && parts[1] == "STATE" {
		return spTopic{msgType: "STATE"}, true
	}
	if len(parts) < 4 || len(parts) > 5 || parts[1] == "" || parts[3] == "" {
		return spTopic{}, false
	}
	t := spTopic{group: parts[1], msgType: parts[2], edge: parts[3]}
	if len(parts) == 5 {
		if parts[4] == "" {
			return spTopic{}, false
		}
		t.device = parts[4]
	}
	device := strings.HasPrefix(t.msgType, "D")
	if device != (t.device != "") {
		return spTopic{}, false
	}
	return t, true
}

// ignored reports whether a message of this topic carries no points.
func (t spTopic) ignored() bool {
	switch t.msgType {
	case "NBIRTH", "DBIRTH", "NDATA", "DDATA", "NDEATH":
		return false
	}
	return true
}

func (d *sparkplugDecoder) decode(in *inbound, r *result) {
	t, ok := parseSparkplugTopic(in.topic)
	if !ok {
		r.refuseAll(reasonBadTopic, "topic %q is not spBv1.0/GROUP/TYPE/EDGE_NODE[/DEVICE]", in.topic)
		return
	}
	if t.ignored() {
		r.ignored = true
		return
	}
	node := t.group + "/" + t.edge
	if t.msgType == "NDEATH" {
		d.aliases.drop(node)
		return
	}
	if t.msgType == "NBIRTH" {
		d.aliases.reset(node)
	}
	d.own = append(d.own[:0], labels.Label{Name: labelGroup, Value: t.group}, labels.Label{Name: labelEdgeNode, Value: t.edge})
	if t.device != "" {
		d.own = append(d.own, labels.Label{Name: labelDevice, Value: t.device})
	}
	birth := strings.HasSuffix(t.msgType, "BIRTH")
	payloadTs := in.receivedMs
	b := in.payload
	// The payload timestamp may follow the metrics: find it first.
	if ts, ok := findPayloadTimestamp(b); ok {
		payloadTs = ts
	}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			r.refuseAll(reasonSyntax, "payload: %v", protowire.ParseError(n))
			return
		}
		b = b[n:]
		if num == spPayloadMetrics && typ == protowire.BytesType {
			m, n := protowire.ConsumeBytes(b)
			if n < 0 {
				r.refuseAll(reasonSyntax, "metric: %v", protowire.ParseError(n))
				return
			}
			b = b[n:]
			if !d.metric(m, node, birth, payloadTs, r) {
				return
			}
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			r.refuseAll(reasonSyntax, "payload field %d: %v", num, protowire.ParseError(n))
			return
		}
		b = b[n:]
	}
}

// findPayloadTimestamp returns the Payload's timestamp field, if any
// (the last one, as protobuf reads a repeated scalar).
func findPayloadTimestamp(b []byte) (int64, bool) {
	var ts uint64
	found := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num == spPayloadTimestamp && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return 0, false
			}
			ts, found, b = v, true, b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return 0, false
		}
		b = b[n:]
	}
	if !found || ts > math.MaxInt64 {
		return 0, false
	}
	return int64(ts), true
}

// spMetric is one decoded Metric.
type spMetric struct {
	name                 string
	alias                uint64
	hasAlias, hasTs      bool
	ts                   uint64
	datatype             uint32
	isNull               bool
	valueField           protowire.Number // 0: no value
	raw                  uint64           // varint or fixed value bits
	hasName, unsupported bool
}

// parseMetric reads the fields of one Metric.
func parseMetric(b []byte) (spMetric, error) {
	var m spMetric
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return m, protowire.ParseError(n)
		}
		b = b[n:]
		want, field := protowire.Type(-1), num
		switch num {
		case spMetricName:
			want = protowire.BytesType
		case spMetricAlias, spMetricTimestamp, spMetricDatatype, spMetricIsNull, spMetricInt, spMetricLong, spMetricBool:
			want = protowire.VarintType
		case spMetricFloat:
			want = protowire.Fixed32Type
		case spMetricDouble:
			want = protowire.Fixed64Type
		}
		if want >= 0 && typ != want {
			return m, fmt.Errorf("field %d has wire type %d, want %d", field, typ, want)
		}
		var v uint64
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(b)
			v = uint64(v32)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			var s []byte
			s, n = protowire.ConsumeBytes(b)
			if n >= 0 && num == spMetricName {
				if !utf8.Valid(s) {
					return m, fmt.Errorf("metric name is not valid UTF-8")
				}
				m.name, m.hasName = string(s), true
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return m, fmt.Errorf("field %d: %w", field, protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == spMetricAlias:
			m.alias, m.hasAlias = v, true
		case num == spMetricTimestamp:
			m.ts, m.hasTs = v, true
		case num == spMetricDatatype:
			m.datatype = uint32(v)
		case num == spMetricIsNull:
			m.isNull = v != 0
		case num >= spMetricInt && num <= spMetricBool:
			m.valueField, m.raw, m.unsupported = num, v, false
		case num >= spMetricFirstNon && num <= spMetricLastNon:
			m.valueField, m.unsupported = num, true
		}
	}
	return m, nil
}

// metric stores one Metric of a message; false when the message is
// refused whole.
func (d *sparkplugDecoder) metric(b []byte, node string, birth bool, payloadTs int64, r *result) bool {
	m, err := parseMetric(b)
	if err != nil {
		r.refuseAll(reasonSyntax, "metric: %v", err)
		return false
	}
	name, datatype := m.name, m.datatype
	switch {
	case birth && m.hasAlias && m.hasName:
		if !d.aliases.define(node, m.alias, aliasEntry{name: m.name, datatype: m.datatype}) {
			// The value is stored; later DATA with this alias will not be.
			r.refuseMany(reasonUnknownAlias, 1, 0, "alias table full: alias %d of %q on edge node %q not kept", m.alias, m.name, node)
		}
	case !m.hasName && m.hasAlias:
		e, ok := d.aliases.lookup(node, m.alias)
		if !ok {
			r.refuse(reasonUnknownAlias, 1, "edge node %q: alias %d was not declared by a BIRTH this process saw", node, m.alias)
			return true
		}
		name = e.name
		if datatype == 0 {
			datatype = e.datatype
		}
	case !m.hasName:
		r.refuse(reasonSyntax, 1, "a metric has neither a name nor an alias")
		return true
	case datatype == 0 && m.hasAlias:
		if e, ok := d.aliases.lookup(node, m.alias); ok {
			datatype = e.datatype
		}
	}
	if m.isNull || m.valueField == 0 {
		return true // no value: nothing to store
	}
	if m.unsupported || !storedType(datatype) {
		r.refuse(reasonUnsupportedType, 1, "metric %q: datatype %d is not stored (numbers and booleans are)", name, datatype)
		return true
	}
	v, ok := spValue(m, datatype)
	if !ok {
		r.refuse(reasonBadValue, 1, "metric %q: value does not match datatype %d", name, datatype)
		return true
	}
	ts := payloadTs
	if m.hasTs {
		if m.ts > math.MaxInt64 {
			r.refuse(reasonBadTimestamp, 1, "metric %q: timestamp %d is out of range", name, m.ts)
			return true
		}
		ts = int64(m.ts)
	}
	if name == "" {
		r.refuse(reasonInvalidSeries, 1, "a metric has an empty name")
		return true
	}
	return r.add(sanitizeName(name), d.own, ts, v)
}

// storedType reports whether values of a datatype are stored; 0 (no
// datatype known) is read from the value's field.
func storedType(dt uint32) bool {
	return dt == 0 || (dt >= spInt8 && dt <= spBoolean) || dt == spDateTime
}

// spValue reads a Metric's value as its datatype says. Int8, Int16 and
// Int32 are read from the low bits of int_value as two's complement, so
// both the 32-bit and the narrow encodings that Sparkplug implementations
// write are read right; without a datatype integers are unsigned.
func spValue(m spMetric, dt uint32) (float64, bool) {
	switch m.valueField {
	case spMetricInt:
		switch dt {
		case spInt8:
			return float64(int8(m.raw)), true
		case spInt16:
			return float64(int16(m.raw)), true
		case spInt32:
			return float64(int32(m.raw)), true
		case 0, spUInt8, spUInt16, spUInt32:
			return float64(uint32(m.raw)), true
		}
	case spMetricLong:
		switch dt {
		case spInt64:
			return float64(int64(m.raw)), true
		case 0, spUInt64, spDateTime, spUInt32:
			return float64(m.raw), true
		}
	case spMetricFloat:
		if dt == 0 || dt == spFloat {
			f := float64(math.Float32frombits(uint32(m.raw)))
			return f, !math.IsNaN(f) && !math.IsInf(f, 0)
		}
	case spMetricDouble:
		if dt == 0 || dt == spDouble || dt == spFloat {
			f := math.Float64frombits(m.raw)
			return f, !math.IsNaN(f) && !math.IsInf(f, 0)
		}
	case spMetricBool:
		if dt == 0 || dt == spBoolean {
			if m.raw != 0 {
				return 1, true
			}
			return 0, true
		}
	}
	return 0, false
}
