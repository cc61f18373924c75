package opentsdb

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
)

// checkBatches requires every accepted point to be storable: valid labels
// with a metric name, a positive timestamp, a finite value.
func checkBatches(t *testing.T, batches []node.Batch) {
	t.Helper()
	for _, b := range batches {
		ls, err := labels.New(b.Labels, labels.Limits{})
		if err != nil {
			t.Fatalf("accepted labels %v are invalid: %v", b.Labels, err)
		}
		if len(ls) != len(b.Labels) {
			t.Fatalf("accepted labels %v hold an empty value", b.Labels)
		}
		for i, ts := range b.Ts {
			if ts <= 0 || ts > maxMsTimestamp || math.IsNaN(b.Vs[i]) || math.IsInf(b.Vs[i], 0) {
				t.Fatalf("accepted point %d=%g", ts, b.Vs[i])
			}
		}
	}
}

// encodePut writes batches back as an /api/put body.
func encodePut(t *testing.T, batches []node.Batch) []byte {
	var out []map[string]any
	for _, b := range batches {
		tags := map[string]string{}
		metric := ""
		for _, l := range b.Labels {
			if l.Name == labels.MetricName {
				metric = l.Value
			} else {
				tags[l.Name] = l.Value
			}
		}
		for i, ts := range b.Ts {
			dp := map[string]any{"metric": metric, "value": b.Vs[i], "tags": tags, "timestamp": ts}
			if ts <= maxSecondsTimestamp {
				// Milliseconds that would read as seconds: seconds.millis.
				dp["timestamp"] = fmt.Sprintf("%d.%03d", ts/1000, ts%1000)
			}
			out = append(out, dp)
		}
	}
	body, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return body
}

func FuzzDecodePut(f *testing.F) {
	for _, s := range []string{
		`{"metric":"sys.cpu","timestamp":1709294400,"value":42,"tags":{"host":"a"}}`,
		`[{"metric":"m","timestamp":"1709294400.5","value":"1e3","tags":{"a/b":"x","é":"y"}},{"metric":"m","timestamp":1709294400123,"value":-0.5}]`,
		`[{"metric":"m","timestamp":0,"value":1},{"metric":7},42,null,{"tags":"x"}]`,
		"[{\"metric\":\"m\xff\",\"timestamp\":1,\"value\":1}]",
		`[{"metric":"m","timestamp":1.5e9,"value":1,"tags":{"h":1}}]`,
		`{"metric":"m","timestamp":1709294400,"value":1,"tags":{"a/b":"1","a_b":"2"}}`,
		`[`, `{}`, `[]`, `"x"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		pb, err := decodePut(body, 1000)
		if err != nil {
			return
		}
		batches, _ := pb.b.take()
		checkBatches(t, batches)
		n := 0
		for _, b := range batches {
			n += len(b.Ts)
		}
		if n+pb.failed != pb.total || len(pb.errs) > maxDetailErrors {
			t.Fatalf("%d accepted + %d failed != %d datapoints", n, pb.failed, pb.total)
		}
		if n == 0 {
			return
		}
		// Round trip: the accepted points, written back, decode to the
		// same batches.
		again, err := decodePut(encodePut(t, batches), 1000)
		if err != nil || again.failed != 0 {
			t.Fatalf("re-decoding accepted points: %v %+v", err, again)
		}
		batches2, _ := again.b.take()
		if !reflect.DeepEqual(batches, batches2) {
			t.Fatalf("round trip changed the points:\n%v\n%v", batches, batches2)
		}
	})
}

func FuzzTelnetLine(f *testing.F) {
	for _, s := range []string{
		"put sys.cpu 1709294400 42 host=a cpu=0",
		"put m 1709294400.5 -1.5e3 a/b=x=y",
		"put m 1709294400123 1",
		"put m 0 1 h=a", "put m 1 NaN h=a", "put", "version", "put m 1 1 h", "put m 1 1 =a",
		"put \xff 1 1 h=a", "put m 1 1 h=\x00",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		f := splitFields(line, nil)
		if len(f) == 0 || f[0] != "put" {
			return
		}
		metric, tags, tMs, v, err := parsePut(f[1:], nil)
		if err != nil {
			return
		}
		var b batcher
		if err := b.add(metric, tags, tMs, v, 1); err != nil {
			return
		}
		batches, _ := b.take()
		checkBatches(t, batches)
		// Round trip: the point written back as a line parses the same.
		ts := strconv.FormatInt(tMs, 10)
		if tMs <= maxSecondsTimestamp*1000 {
			ts = fmt.Sprintf("%d.%03d", tMs/1000, tMs%1000)
		}
		out := []string{"put", metric, ts, strconv.FormatFloat(v, 'g', -1, 64)}
		for _, l := range tags {
			out = append(out, l.Name+"="+l.Value)
		}
		metric2, tags2, tMs2, v2, err := parsePut(splitFields(strings.Join(out, " "), nil)[1:], nil)
		if err != nil || metric2 != metric || tMs2 != tMs || v2 != v || fmt.Sprint(tags2) != fmt.Sprint(tags) {
			t.Fatalf("round trip of %q: %q %v %d %g %v", strings.Join(out, " "), metric2, tags2, tMs2, v2, err)
		}
	})
}

func FuzzParseM(f *testing.F) {
	for _, s := range []string{
		"avg:1h-avg:sys.cpu{host=web01}",
		"sum:rate{counter,1000,5}:explicit_tags:m{host=*}{dc=regexp(l:a{1,2})}",
		"max:1m-max-zero:rate:m{}{h=a|b,k=not_key()}",
		"sum:0all-count:m{h=iwildcard(*x*)}", "sum:m{h=wildcard()}", "none:m{a/b=not_iliteral_or(x|)}",
		"sum:{", "sum:m}{", ":", "2024/03/01-12:00:00", "1h-ago",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, m string) {
		if ts, err := parseTime(m, now, time.UTC); err == nil && ts < 0 {
			t.Fatalf("parseTime(%q) = %d", m, ts)
		}
		sq, err := parseM(m)
		if err != nil {
			return
		}
		p, err := compile(sq)
		if err != nil {
			return
		}
		if len(p.matchers) == 0 || p.matchers[0].Name != labels.MetricName || p.matchers[0].MatchesEmpty() {
			t.Fatalf("plan of %q does not select by metric: %v", m, p.matchers)
		}
		for _, n := range append(p.groupBy, p.explicit...) {
			if _, err := labels.New([]labels.Label{{Name: labels.MetricName, Value: "m"}, {Name: n, Value: "v"}}, labels.Limits{}); err != nil {
				t.Fatalf("plan of %q uses label name %q: %v", m, n, err)
			}
		}
		if p.ds != nil && !p.ds.all && p.ds.stepMs < 1 {
			t.Fatalf("plan of %q has step %d", m, p.ds.stepMs)
		}
	})
}
