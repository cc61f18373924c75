package mqttapi

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/node/labels"
)

// received is the receive time the decoders get in these tests.
const receivedMs = 1_700_000_000_000

// decodeOne decodes payload on topic with subscription s and returns the
// points as "series@ts=v" strings (sorted) and the result.
func decodeOne(t testing.TB, s Subscription, topic string, payload []byte) ([]string, *result) {
	t.Helper()
	o := Options{Broker: "tcp://x", ClientID: "c", Subscriptions: []Subscription{s}}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	c, err := compile(&o.Subscriptions[0], &o, nil)
	if err != nil {
		t.Fatal(err)
	}
	return decodeWith(t, c, &o, topic, payload)
}

func decodeWith(t testing.TB, c *subscription, o *Options, topic string, payload []byte) ([]string, *result) {
	t.Helper()
	caps, ok := c.filter.match(topic, nil)
	if !ok {
		t.Fatalf("topic %q does not match %q", topic, c.Topic)
	}
	skip := ""
	if c.JSON != nil {
		skip = c.JSON.MetricTopic
	}
	r := &result{}
	r.reset(o.Limits, o.MaxPointsPerMessage, c.baseLabels(caps, skip))
	c.dec.decode(&inbound{topic: topic, payload: payload, caps: caps, receivedMs: receivedMs}, r)
	var pts []string
	n := 0
	for _, b := range r.batches {
		if len(b.Ts) != len(b.Vs) {
			t.Fatalf("batch %v: %d timestamps, %d values", b.Labels, len(b.Ts), len(b.Vs))
		}
		if !slices.IsSortedFunc(b.Labels, func(x, y labels.Label) int { return strings.Compare(x.Name, y.Name) }) {
			t.Fatalf("labels not sorted: %v", b.Labels)
		}
		for i := range b.Ts {
			pts = append(pts, fmt.Sprintf("%s@%d=%v", strings.TrimSuffix(labels.Labels(b.Labels).String(), "{}"), b.Ts[i], b.Vs[i]))
			n++
		}
	}
	if n != r.points {
		t.Fatalf("result counts %d points, holds %d", r.points, n)
	}
	slices.Sort(pts)
	return pts, r
}

func TestJSON_MappingsMakeTheDocumentedSeries(t *testing.T) {
	cases := []struct {
		name    string
		sub     Subscription
		topic   string
		payload string
		want    []string
		refused int
		why     string
	}{
		{
			name:    "all numbers named by field, topic captures as labels",
			sub:     Subscription{Topic: "sensors/+site/+device", Format: FormatJSON},
			topic:   "sensors/north/t1",
			payload: `{"temp": 21.5, "hum": 40, "ok": true, "note": "x", "nothing": null}`,
			want: []string{
				`hum{device="t1",site="north"}@1700000000000=40`,
				`ok{device="t1",site="north"}@1700000000000=1`,
				`temp{device="t1",site="north"}@1700000000000=21.5`,
			},
		},
		{
			name:    "fixed metric with one value field names the series by the metric",
			sub:     Subscription{Topic: "s/+room", Format: FormatJSON, JSON: &JSONMapping{Metric: "temperature", ValueFields: []string{"v"}, TimeField: "ts", TimeUnit: "s"}},
			topic:   "s/kitchen",
			payload: `{"v": 19.25, "ts": 1700000001.5}`,
			want:    []string{`temperature{room="kitchen"}@1700000001500=19.25`},
		},
		{
			name:    "fixed metric with several value fields prefixes them",
			sub:     Subscription{Topic: "s", Format: FormatJSON, JSON: &JSONMapping{Metric: "env", ValueFields: []string{"t", "deep.h"}}},
			topic:   "s",
			payload: `{"t": 1, "deep": {"h": 2}}`,
			want:    []string{`env_deep_h@1700000000000=2`, `env_t@1700000000000=1`},
		},
		{
			name: "metric from a field, labels from fields, rfc3339 time, array of records",
			sub: Subscription{Topic: "m", Format: FormatJSON, Labels: map[string]string{"src": "mqtt"}, JSON: &JSONMapping{
				MetricField: "name", ValueFields: []string{"value"}, LabelFields: []string{"host", "loc.room"}, TimeField: "time", TimeUnit: "rfc3339"}},
			topic: "m",
			payload: `[{"name":"cpu load","value":0.5,"host":"pi-1","loc":{"room":"attic"},"time":"2023-11-14T22:13:20.250Z"},
			           {"name":"mem","value":3,"host":7,"time":"2023-11-14T22:13:21Z"}]`,
			want: []string{
				`cpu_load{host="pi-1",loc_room="attic",src="mqtt"}@1700000000250=0.5`,
				`mem{host="7",src="mqtt"}@1700000001000=3`,
			},
		},
		{
			name:    "metric from the topic is not a label",
			sub:     Subscription{Topic: "tele/+device/+kind", Format: FormatJSON, JSON: &JSONMapping{MetricTopic: "kind", ValueFields: []string{"v"}, TimeField: "t", TimeUnit: "ms"}},
			topic:   "tele/d7/power",
			payload: `{"v": 230, "t": "1700000000123"}`,
			want:    []string{`power{device="d7"}@1700000000123=230`},
		},
		{
			name:    "nested objects flatten into names with underscores",
			sub:     Subscription{Topic: "tasmota/+dev/SENSOR", Format: FormatJSON, JSON: &JSONMapping{TimeField: "Time", TimeUnit: "rfc3339"}},
			topic:   "tasmota/plug1/SENSOR",
			payload: `{"Time":"2023-11-14T22:13:20Z","ENERGY":{"Power":50,"Voltage":231.5,"Unit":"W"}}`,
			want: []string{
				`ENERGY_Power{dev="plug1"}@1700000000000=50`,
				`ENERGY_Voltage{dev="plug1"}@1700000000000=231.5`,
			},
		},
		{
			name:    "ns timestamps floor to the millisecond",
			sub:     Subscription{Topic: "x", Format: FormatJSON, JSON: &JSONMapping{Metric: "m", ValueFields: []string{"v"}, TimeField: "t", TimeUnit: "ns"}},
			topic:   "x",
			payload: `{"v": 1, "t": 1700000000123999999}`,
			want:    []string{`m@1700000000123=1`},
		},
		{
			name:    "a string value is refused, the others kept",
			sub:     Subscription{Topic: "x", Format: FormatJSON, JSON: &JSONMapping{ValueFields: []string{"a", "b", "c"}}},
			topic:   "x",
			payload: `{"a": 1, "b": "high", "c": 3}`,
			want:    []string{`a@1700000000000=1`, `c@1700000000000=3`},
			refused: 1, why: "bad_value",
		},
		{
			name:    "a missing time refuses the record",
			sub:     Subscription{Topic: "x", Format: FormatJSON, JSON: &JSONMapping{TimeField: "t", TimeUnit: "s"}},
			topic:   "x",
			payload: `[{"a": 1}, {"a": 2, "t": 5}]`,
			want:    []string{`a@5000=2`},
			refused: 1, why: "missing_field",
		},
		{
			name:    "not JSON",
			sub:     Subscription{Topic: "x", Format: FormatJSON},
			topic:   "x",
			payload: `temp=21`,
			refused: 1, why: "syntax",
		},
		{
			name:    "trailing garbage",
			sub:     Subscription{Topic: "x", Format: FormatJSON},
			topic:   "x",
			payload: `{"a":1} {"a":2}`,
			refused: 1, why: "syntax",
		},
		{
			name:    "a label value with a control character refuses the series",
			sub:     Subscription{Topic: "x", Format: FormatJSON, JSON: &JSONMapping{LabelFields: []string{"h"}}},
			topic:   "x",
			payload: `{"h": "a\u0007b", "v": 1}`,
			refused: 1, why: "invalid_series",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, r := decodeOne(t, c.sub, c.topic, []byte(c.payload))
			if !slices.Equal(got, c.want) {
				t.Errorf("points\n got %q\nwant %q", got, c.want)
			}
			if r.refused != c.refused {
				t.Errorf("refused %d, want %d (%s)", r.refused, c.refused, r.first)
			}
			if c.why != "" && r.firstWhy.String() != c.why {
				t.Errorf("reason %s, want %s (%s)", r.firstWhy, c.why, r.first)
			}
		})
	}
}

func TestJSON_TooManyPointsRefusesTheMessageWhole(t *testing.T) {
	s := Subscription{Topic: "x", Format: FormatJSON}
	o := Options{Broker: "tcp://x", ClientID: "c", Subscriptions: []Subscription{s}, MaxPointsPerMessage: 3}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	c, _ := compile(&o.Subscriptions[0], &o, nil)
	got, r := decodeWith(t, c, &o, "x", []byte(`{"a":1,"b":2,"c":3,"d":4}`))
	if len(got) != 0 || r.firstWhy != reasonTooManyPoints || r.refused != 4 {
		t.Fatalf("got %q, refused %d (%s)", got, r.refused, r.first)
	}
}

func TestLineProtocol_UsesTheWriteAPIsParserAndLimits(t *testing.T) {
	sub := Subscription{Topic: "telegraf/+host/#", Format: FormatLineProtocol, DB: "tg", Precision: "s", Labels: map[string]string{"via": "mqtt"}}
	got, r := decodeOne(t, sub, "telegraf/pi-3/cpu", []byte("cpu,core=0 usage=12.5,idle=80i 1700000000\nbad line\ncpu,core=1 usage=3 1700000001\n"))
	want := []string{
		`cpu_idle{core="0",db="tg",host="pi-3",via="mqtt"}@1700000000000=80`,
		`cpu_usage{core="0",db="tg",host="pi-3",via="mqtt"}@1700000000000=12.5`,
		`cpu_usage{core="1",db="tg",host="pi-3",via="mqtt"}@1700000001000=3`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("points\n got %q\nwant %q", got, want)
	}
	if r.refused != 1 || r.errs[reasonBadLine] != 1 {
		t.Errorf("refused %d, errs %v (%s)", r.refused, r.errs, r.first)
	}
	// A tag of the line wins over a topic capture of the same name.
	got, _ = decodeOne(t, sub, "telegraf/topic-host/cpu", []byte("cpu,host=line-host v=1 1700000000"))
	if want := []string{`cpu_v{db="tg",host="line-host",via="mqtt"}@1700000000000=1`}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSanitizeName_AgreesWithLineProtocol(t *testing.T) {
	p := influx.NewParser(influx.Options{})
	for _, name := range []string{"temp", "cpu load", "9lives", ".dot", "a/b", "ü-ber", "x:y.z-w", "\xff\xfe", "tab\tx", "__x"} {
		line := strings.NewReplacer(" ", `\ `, ",", `\,`).Replace(name) + " f=1 1"
		res, err := p.Parse([]byte(line), "", influx.Nanosecond, 0)
		if err != nil || len(res.Batches) != 1 {
			if res != nil && res.RejectedLines > 0 {
				continue // the parser refuses it outright
			}
			t.Fatalf("%q: %v", name, err)
		}
		want := labels.Labels(res.Batches[0].Labels).Get(labels.MetricName)
		if got := sanitizeName(name) + "_f"; got != want {
			t.Errorf("sanitizeName(%q)+\"_f\" = %q, line protocol names it %q", name, got, want)
		}
	}
}

// Sparkplug B test payloads, encoded by hand from the field numbers.

type spM struct {
	name     string
	alias    uint64
	hasAlias bool
	ts       uint64
	dt       uint32
	int32v   *uint32
	long     *uint64
	dbl      *float64
	flt      *float32
	boolean  *bool
	str      *string
	isNull   bool
}

func spPayload(ts uint64, ms ...spM) []byte {
	var b []byte
	for _, m := range ms {
		var mb []byte
		if m.name != "" {
			mb = protowire.AppendTag(mb, spMetricName, protowire.BytesType)
			mb = protowire.AppendString(mb, m.name)
		}
		if m.hasAlias {
			mb = protowire.AppendTag(mb, spMetricAlias, protowire.VarintType)
			mb = protowire.AppendVarint(mb, m.alias)
		}
		if m.ts != 0 {
			mb = protowire.AppendTag(mb, spMetricTimestamp, protowire.VarintType)
			mb = protowire.AppendVarint(mb, m.ts)
		}
		if m.dt != 0 {
			mb = protowire.AppendTag(mb, spMetricDatatype, protowire.VarintType)
			mb = protowire.AppendVarint(mb, uint64(m.dt))
		}
		if m.isNull {
			mb = protowire.AppendTag(mb, spMetricIsNull, protowire.VarintType)
			mb = protowire.AppendVarint(mb, 1)
		}
		switch {
		case m.int32v != nil:
			mb = protowire.AppendTag(mb, spMetricInt, protowire.VarintType)
			mb = protowire.AppendVarint(mb, uint64(*m.int32v))
		case m.long != nil:
			mb = protowire.AppendTag(mb, spMetricLong, protowire.VarintType)
			mb = protowire.AppendVarint(mb, *m.long)
		case m.dbl != nil:
			mb = protowire.AppendTag(mb, spMetricDouble, protowire.Fixed64Type)
			mb = protowire.AppendFixed64(mb, math.Float64bits(*m.dbl))
		case m.flt != nil:
			mb = protowire.AppendTag(mb, spMetricFloat, protowire.Fixed32Type)
			mb = protowire.AppendFixed32(mb, math.Float32bits(*m.flt))
		case m.boolean != nil:
			mb = protowire.AppendTag(mb, spMetricBool, protowire.VarintType)
			mb = protowire.AppendVarint(mb, protowire.EncodeBool(*m.boolean))
		case m.str != nil:
			mb = protowire.AppendTag(mb, spMetricFirstNon, protowire.BytesType)
			mb = protowire.AppendString(mb, *m.str)
		}
		b = protowire.AppendTag(b, spPayloadMetrics, protowire.BytesType)
		b = protowire.AppendBytes(b, mb)
	}
	if ts != 0 { // after the metrics, as a writer may put it
		b = protowire.AppendTag(b, spPayloadTimestamp, protowire.VarintType)
		b = protowire.AppendVarint(b, ts)
	}
	// seq, as every Sparkplug payload has it
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	return protowire.AppendVarint(b, 7)
}

func ptr[T any](v T) *T { return &v }

func TestSparkplug_BirthAliasesResolveData(t *testing.T) {
	sub := Subscription{Topic: "spBv1.0/#", Format: FormatSparkplugB}
	o := Options{Broker: "tcp://x", ClientID: "c", Subscriptions: []Subscription{sub}}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	c, err := compile(&o.Subscriptions[0], &o, nil)
	if err != nil {
		t.Fatal(err)
	}
	dec := func(topic string, p []byte) ([]string, *result) { return decodeWith(t, c, &o, topic, p) }

	// DATA before any BIRTH: the alias is unknown.
	got, r := dec("spBv1.0/plant/NDATA/gw1", spPayload(1700000000000, spM{alias: 1, hasAlias: true, dbl: ptr(1.0)}))
	if len(got) != 0 || r.errs[reasonUnknownAlias] != 1 {
		t.Fatalf("data before birth: %q, %v", got, r.errs)
	}
	got, r = dec("spBv1.0/plant/NBIRTH/gw1", spPayload(1700000000000,
		spM{name: "bdSeq", dt: spInt64, long: ptr(uint64(0))},
		spM{name: "Inputs/Temp", alias: 1, hasAlias: true, dt: spDouble, dbl: ptr(20.5)},
		spM{name: "Inputs/Level", alias: 2, hasAlias: true, dt: spInt16, int32v: ptr(uint32(0xFFFF))}, // -1, narrow encoding
		spM{name: "Inputs/Delta", alias: 3, hasAlias: true, dt: spInt32, int32v: ptr(uint32(0xFFFFFFFE))},
		spM{name: "Properties/Make", alias: 4, hasAlias: true, dt: 12, str: ptr("acme")},
		spM{name: "Inputs/Empty", alias: 5, hasAlias: true, dt: spFloat, isNull: true},
	))
	want := []string{
		`Inputs_Delta{edge_node_id="gw1",group_id="plant"}@1700000000000=-2`,
		`Inputs_Level{edge_node_id="gw1",group_id="plant"}@1700000000000=-1`,
		`Inputs_Temp{edge_node_id="gw1",group_id="plant"}@1700000000000=20.5`,
		`bdSeq{edge_node_id="gw1",group_id="plant"}@1700000000000=0`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("birth\n got %q\nwant %q", got, want)
	}
	if r.errs[reasonUnsupportedType] != 1 || r.refused != 1 {
		t.Errorf("birth: errs %v refused %d", r.errs, r.refused)
	}
	got, _ = dec("spBv1.0/plant/DBIRTH/gw1/pump", spPayload(1700000000500,
		spM{name: "Running", alias: 10, hasAlias: true, dt: spBoolean, boolean: ptr(true)},
		spM{name: "Rpm", alias: 11, hasAlias: true, dt: spFloat, flt: ptr(float32(1500.5))},
	))
	if want := []string{
		`Rpm{device_id="pump",edge_node_id="gw1",group_id="plant"}@1700000000500=1500.5`,
		`Running{device_id="pump",edge_node_id="gw1",group_id="plant"}@1700000000500=1`,
	}; !slices.Equal(got, want) {
		t.Fatalf("dbirth\n got %q\nwant %q", got, want)
	}
	// DATA by alias, a metric timestamp overriding the payload's.
	got, r = dec("spBv1.0/plant/DDATA/gw1/pump", spPayload(1700000001000,
		spM{alias: 11, hasAlias: true, flt: ptr(float32(1499)), ts: 1700000000900},
		spM{alias: 10, hasAlias: true, boolean: ptr(false)},
		spM{alias: 99, hasAlias: true, dbl: ptr(1.0)},
	))
	if want := []string{
		`Rpm{device_id="pump",edge_node_id="gw1",group_id="plant"}@1700000000900=1499`,
		`Running{device_id="pump",edge_node_id="gw1",group_id="plant"}@1700000001000=0`,
	}; !slices.Equal(got, want) {
		t.Fatalf("ddata\n got %q\nwant %q", got, want)
	}
	if r.errs[reasonUnknownAlias] != 1 {
		t.Errorf("ddata: errs %v", r.errs)
	}
	// Aliases belong to an edge node: another node's alias 1 is unknown.
	if got, _ := dec("spBv1.0/plant/NDATA/gw2", spPayload(1, spM{alias: 1, hasAlias: true, dbl: ptr(1.0)})); len(got) != 0 {
		t.Errorf("gw2 used gw1's alias: %q", got)
	}
	// NDEATH forgets the node's aliases; commands and STATE are ignored.
	_, r = dec("spBv1.0/plant/NDEATH/gw1", spPayload(0, spM{name: "bdSeq", dt: spInt64, long: ptr(uint64(0))}))
	if r.points != 0 || r.refused != 0 {
		t.Errorf("ndeath made points: %+v", r)
	}
	if got, _ := dec("spBv1.0/plant/NDATA/gw1", spPayload(1, spM{alias: 1, hasAlias: true, dbl: ptr(1.0)})); len(got) != 0 {
		t.Errorf("alias survived NDEATH: %q", got)
	}
	if _, r := dec("spBv1.0/plant/NCMD/gw1", spPayload(1, spM{name: "Node Control/Rebirth", dt: spBoolean, boolean: ptr(true)})); !r.ignored || r.points != 0 {
		t.Errorf("NCMD not ignored: %+v", r)
	}
	if _, r := dec("spBv1.0/STATE/host1", []byte(`{"online":true}`)); !r.ignored {
		t.Errorf("STATE not ignored: %+v", r)
	}
	if _, r := dec("spBv1.0/plant/DDATA/gw1", spPayload(1)); r.firstWhy != reasonBadTopic {
		t.Errorf("DDATA without device: %+v", r)
	}
	if _, r := dec("spBv1.0/plant/NDATA/gw1", []byte{0x12, 0x05, 0x01}); r.firstWhy != reasonSyntax {
		t.Errorf("truncated payload: %+v", r)
	}
}

func TestAliasTable_StaysWithinItsBudget(t *testing.T) {
	tab := newAliasTable(10 * (aliasEntryBytes + 4))
	for n := range 5 {
		node := fmt.Sprintf("g/n%d", n)
		tab.reset(node)
		for a := range 4 {
			tab.define(node, uint64(a), aliasEntry{name: "name"})
		}
		if tab.bytes > tab.maxBytes {
			t.Fatalf("%d bytes over a budget of %d", tab.bytes, tab.maxBytes)
		}
	}
	if _, ok := tab.lookup("g/n4", 3); !ok {
		t.Error("the newest node's aliases were dropped")
	}
	if _, ok := tab.lookup("g/n0", 0); ok {
		t.Error("the oldest node's aliases were kept past the budget")
	}
	if tab.define("g/big", 1, aliasEntry{name: strings.Repeat("x", 11*(aliasEntryBytes+4))}) {
		t.Error("an alias larger than the whole budget was kept")
	}
}

func TestLimitConn_RefusesOversizedPacketsBeforeTheyAreRead(t *testing.T) {
	c := &limitConn{max: 100}
	// CONNACK (4 bytes), then a PUBLISH header claiming 200 bytes.
	if err := c.scan([]byte{0x20, 0x02, 0x00, 0x00}); err != nil {
		t.Fatal(err)
	}
	if err := c.scan([]byte{0x30, 0xC8}); err != nil {
		t.Fatalf("a length not read whole yet was judged: %v", err)
	}
	if err := c.scan([]byte{0x01}); err == nil {
		t.Fatal("a 200-byte packet passed a limit of 100")
	}
	c = &limitConn{max: 100}
	pkt := append([]byte{0x30, 10}, make([]byte, 10)...)
	for i := range pkt { // byte by byte, as reads may split it
		if err := c.scan(pkt[i : i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if c.state != 0 {
		t.Fatalf("state %d after a whole packet", c.state)
	}
}
