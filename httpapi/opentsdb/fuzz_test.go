package opentsdb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// checkBatches requires every accepted point to be storable: valid labels
// with a metric name, a positive timestamp, a finite value.
func checkBatches(t *testing.T, batches []model.Batch) {
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
func encodePut(t *testing.T, batches []model.Batch) []byte {
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

// fuzzPutLimits are the limits FuzzDecodePut decodes with.
var fuzzPutLimits = putLimits{maxPoints: 1000, maxSeries: 100, maxTags: 31}

func FuzzDecodePut(f *testing.F) {
	for _, s := range []string{
		`{"metric":"sys.cpu","timestamp":1709294400,"value":42,"tags":{"host":"a"}}`,
		`[{"metric":"m","timestamp":"1709294400.5","value":"1e3","tags":{"a/b":"x","é":"y"}},{"metric":"m","timestamp":1709294400123,"value":-0.5}]`,
		`[{"metric":"m","timestamp":0,"value":1},{"metric":7},42,null,{"tags":"x"}]`,
		"[{\"metric\":\"m\xff\",\"timestamp\":1,\"value\":1}]",
		`[{"metric":"m","timestamp":1.5e9,"value":1,"tags":{"h":1}}]`,
		`{"metric":"m","timestamp":1709294400,"value":1,"tags":{"a/b":"1","a_b":"2"}}`,
		`[`, `{}`, `[]`, `"x"`, ``,
		`{"METRIC":"m","Timestamp":1709294400,"vAlue":1,"tags":{"h":"a","h":"b"},"metric":"n"}`,
		`{"metric":"\u00e9\ud83d\ude00\ud800x\n\"\\\/","timestamp":1,"value":1,"tags":{"\u0068":"\u0061"}}`,
		`{"metric":"m","timestamp":1709294400,"value":1,"tags":` + manyTagsJSON(40) + `}`,
		`[{"metric":"m","timestamp":1709294400,"value":1,"tags":{"a":{"b":[1,"}"]}}} , {"x":[]} ]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		pb, err := decodePut(body, fuzzPutLimits)
		if err != nil {
			return
		}
		if !json.Valid(body) {
			t.Fatalf("decoded a body that is not valid JSON: %q", body)
		}
		checkDecodeOracle(t, body)
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
		again, err := decodePut(encodePut(t, batches), fuzzPutLimits)
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
		f, n := splitFields(line, nil, putFields+31)
		if len(f) == 0 || f[0] != "put" {
			return
		}
		metric, tags, tMs, v, err := parsePut(f[1:], n-1, 31, nil)
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
		f2, n2 := splitFields(strings.Join(out, " "), nil, -1)
		metric2, tags2, tMs2, v2, err := parsePut(f2[1:], n2-1, 31, nil)
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

// checkDecodeOracle compares putDatapoint.decode, datapoint by datapoint,
// with encoding/json decoding the same fields (for valid UTF-8, which
// encoding/json would otherwise repair).
func checkDecodeOracle(t *testing.T, body []byte) {
	t.Helper()
	if !utf8.Valid(body) {
		return
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(body, &elems); err != nil {
		elems = []json.RawMessage{body}
	}
	dp := &putDatapoint{}
	for i, raw := range elems {
		raw = bytes.TrimSpace(raw)
		var ref struct {
			Metric, Timestamp, Value *json.RawMessage
			Tags                     json.RawMessage
		}
		if raw[0] != '{' || json.Unmarshal(raw, &ref) != nil {
			continue
		}
		if err := dp.decode(raw); err != nil {
			var probe map[string]any
			if json.Unmarshal(ref.Tags, &probe) == nil || len(ref.Tags) == 0 || string(ref.Tags) == "null" {
				t.Fatalf("datapoint %d: decode: %v, encoding/json accepts its tags %s", i, err, ref.Tags)
			}
			continue
		}
		for _, f := range []struct {
			name string
			got  jsonScalar
			want *json.RawMessage
		}{{"metric", dp.Metric, ref.Metric}, {"timestamp", dp.Timestamp, ref.Timestamp}, {"value", dp.Value, ref.Value}} {
			if f.got.set != (f.want != nil) {
				t.Fatalf("datapoint %d: %s set %v, encoding/json: %v", i, f.name, f.got.set, f.want != nil)
			}
			if f.want != nil && f.got.kind == '"' {
				var s string
				if err := json.Unmarshal(*f.want, &s); err != nil || s != f.got.text {
					t.Fatalf("datapoint %d: %s %q, encoding/json %q (%v)", i, f.name, f.got.text, s, err)
				}
			}
		}
		var tags map[string]json.RawMessage
		if json.Unmarshal(ref.Tags, &tags) != nil || len(tags) > dp.Tags.max && dp.Tags.max > 0 {
			continue
		}
		if len(tags) != len(dp.Tags.kv) {
			t.Fatalf("datapoint %d: %d tags, encoding/json %d", i, len(dp.Tags.kv), len(tags))
		}
		for _, kv := range dp.Tags.kv {
			want, ok := tags[kv.key]
			var s string
			if !ok || kv.val.kind == '"' && (json.Unmarshal(want, &s) != nil || s != kv.val.text) {
				t.Fatalf("datapoint %d: tag %q=%q, encoding/json %s", i, kv.key, kv.val.text, want)
			}
		}
	}
}

// allocated returns the bytes f allocates on the heap, from the TotalAlloc
// counter of runtime.MemStats, read before and after f. The counter adds
// up every heap allocation; a garbage collection while f runs does not
// lower it, so the count does not depend on when the collector runs. It
// does count other goroutines' allocations too (the fuzzing engine's, a
// finalizer's): f runs twice and the smaller count is kept, so f must
// allocate the same each time (build fresh state inside it).
func allocated(f func()) uint64 {
	least := uint64(math.MaxUint64)
	var before, after runtime.MemStats
	for range 2 {
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	if after.HeapAlloc > 256<<20 {
		runtime.GC() // see steadyAllocations
	}
	return least
}

// steadyAllocations makes an allocation fuzz target see the same code
// paths for the same input: one P and no automatic garbage collection
// (allocated collects past 256 MiB), so that the sync.Pools the decoders
// reach (fmt's printers, encoding/json's scanners) are not emptied at
// random moments or missed on another P. Otherwise their refills come and
// go in the coverage, and the fuzzing engine spends its time minimizing
// inputs that are not new. The measured bytes do not depend on it.
func steadyAllocations(f *testing.F) {
	procs := runtime.GOMAXPROCS(1)
	gc := debug.SetGCPercent(-1)
	f.Cleanup(func() {
		debug.SetGCPercent(gc)
		runtime.GOMAXPROCS(procs)
	})
}

// The allocation bounds the OpenTSDB decoders are held to: bytes per
// input byte, and a constant (error messages of the first failures, the
// batcher's first slices).
const (
	putAllocPerByte    = 8
	telnetAllocPerByte = 32
	allocFixed         = 64 << 10
	// allocPerSeries is what a new series costs the batcher (its batch,
	// label copies and index entry); bounded by the series limit.
	allocPerSeries = 2 << 10
)

// allocPutLimits are small limits, so that the constant part of the bound
// stays small next to fuzz inputs.
var allocPutLimits = putLimits{maxPoints: 1 << 16, maxSeries: 16, maxTags: 31}

// putAllocSeeds are the worst cases known for memory per byte.
func putAllocSeeds() []string {
	dp := `{"metric":"m","timestamp":1709294400,"value":1,"tags":{"h":"a"}}`
	return []string{
		"[" + strings.Repeat("1,", 5000) + "1]",
		"[" + strings.Repeat("{},", 5000) + "{}]",
		"[" + strings.Repeat(`{"tags":"x"},`, 2000) + "{}]",
		"[" + strings.Repeat(dp+",", 2000) + dp + "]",
		`[{"metric":"m","timestamp":1709294400,"value":1,"tags":` + manyTagsJSON(5000) + `}]`,
		`[{"metric":"m","timestamp":1709294400,"value":1,"tags":` + manyTagsJSON(31) + `}]`,
		"[" + strings.Repeat(`{"metric":"\u00e9\n","timestamp":"x","value":1},`, 1000) + "{}]",
		"[" + strings.Repeat(`{"metric":"m","timestamp":1709294400,"value":1,"tags":{"h":"\u0041"}},`, 1000) + "{}]",
	}
}

// FuzzDecodePutAllocations holds decodePut to its memory bound: one body
// allocates at most putAllocPerByte bytes per byte, plus allocPerSeries
// per series (at most allocPutLimits.maxSeries), plus allocFixed.
func FuzzDecodePutAllocations(f *testing.F) {
	steadyAllocations(f)
	for _, s := range putAllocSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		alloc := allocated(func() { _, _ = decodePut(body, allocPutLimits) })
		if bound := uint64(putAllocPerByte*len(body) + allocPerSeries*allocPutLimits.maxSeries + allocFixed); alloc > bound {
			t.Fatalf("a %d-byte body allocated %d bytes, bound %d", len(body), alloc, bound)
		}
	})
}

// telnetLines runs the put lines of body through what a telnet
// connection does with them (split, parse, batch), as handle does.
func telnetLines(body []byte, maxTags int) {
	var b batcher
	b.maxSeries = 16
	var fields []string
	var tags []labels.Label
	for line := range bytes.SplitSeq(body, []byte("\n")) {
		var n int
		fields, n = splitFields(string(line), fields[:0], putFields+maxTags)
		if len(fields) == 0 || fields[0] != "put" {
			continue
		}
		metric, tg, tMs, v, err := parsePut(fields[1:], n-1, maxTags, tags[:0])
		tags = tg
		if err == nil {
			_ = b.add(metric, tg, tMs, v, 0)
		}
	}
}

// FuzzTelnetLinesAllocations holds the telnet line parser to its memory
// bound: telnetAllocPerByte bytes per byte of input (a line is copied to a
// string, and a bad line's error is formatted for its reply), plus
// allocPerSeries per series (the batcher here holds at most 16), plus
// allocFixed.
func FuzzTelnetLinesAllocations(f *testing.F) {
	steadyAllocations(f)
	for _, s := range []string{
		"put m 1709294400 1" + strings.Repeat(" t=v", 5000) + "\n",
		"put m 1709294400 1" + strings.Repeat(" t=v", 31) + "\n",
		strings.Repeat("put m 1709294400 1 h=a\n", 2000),
		strings.Repeat("put\n", 5000),
		strings.Repeat("put m x 1\n", 2000),
		strings.Repeat("x\n", 5000),
		strings.Repeat(" ", 10000) + "put m 1709294400 1 h=a\n",
		strings.Repeat("put m 1709294400 1 é/1=a 9=b\n", 1000),
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		alloc := allocated(func() { telnetLines(body, 31) })
		if bound := uint64(telnetAllocPerByte*len(body) + allocPerSeries*16 + allocFixed); alloc > bound {
			t.Fatalf("%d bytes of lines allocated %d bytes, bound %d", len(body), alloc, bound)
		}
	})
}
