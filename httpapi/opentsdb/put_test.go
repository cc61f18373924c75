package opentsdb

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
)

type putAnswer struct {
	Success int64 `json:"success"`
	Failed  int64 `json:"failed"`
	Errors  []struct {
		Datapoint map[string]any `json:"datapoint"`
		Error     string         `json:"error"`
	} `json:"errors"`
}

func TestPut_SingleObjectIsStoredAndAnswered204(t *testing.T) {
	e := newEnv(t)
	e.put("", fmt.Sprintf(`{"metric":"sys.cpu.user","timestamp":%d,"value":42.5,"tags":{"host":"web01","cpu":"0"}}`, nowSec()-10), http.StatusNoContent)
	got := e.raw(`sys.cpu.user{host="web01",cpu="0"}`)
	want := [][2]float64{{float64(nowMs() - 10_000), 42.5}}
	if s := got[`sys.cpu.user{cpu="0",host="web01"}`]; fmt.Sprint(s) != fmt.Sprint(want) {
		t.Fatalf("stored %v, want %v", got, want)
	}
	if e.cfg.Stats.Get("opentsdb_points_accepted") != 1 {
		t.Fatalf("accepted counter %d, want 1", e.cfg.Stats.Get("opentsdb_points_accepted"))
	}
}

func TestPut_ArrayWithSummaryAndDetails(t *testing.T) {
	e := newEnv(t)
	body := fmt.Sprintf(`[
		{"metric":"m","timestamp":%d,"value":1,"tags":{"host":"a"}},
		{"metric":"m","timestamp":%d,"value":"2","tags":{"host":"a"}},
		{"metric":"m","timestamp":%d,"value":3,"tags":{"host":"b"}}]`, nowSec()-30, nowMs()-20_000, nowSec()-10)
	var sum putAnswer
	if err := json.Unmarshal(e.put("?summary", body, http.StatusOK), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Success != 3 || sum.Failed != 0 || sum.Errors != nil {
		t.Fatalf("summary %+v, want 3 successes", sum)
	}
	// One bad point among good ones: 400, the good ones are kept, the
	// error names the datapoint.
	body = fmt.Sprintf(`[
		{"metric":"m","timestamp":%d,"value":4,"tags":{"host":"c"}},
		{"metric":"m","timestamp":%d,"value":"abc","tags":{"host":"c"}},
		{"metric":"m","timestamp":%d,"value":5,"tags":{"host":"c"}}]`, nowSec()-30, nowSec()-20, nowSec()-10)
	var det putAnswer
	if err := json.Unmarshal(e.put("?details", body, http.StatusBadRequest), &det); err != nil {
		t.Fatal(err)
	}
	if det.Success != 2 || det.Failed != 1 || len(det.Errors) != 1 {
		t.Fatalf("details %+v, want 2 successes and 1 error", det)
	}
	if er := det.Errors[0]; !strings.Contains(er.Error, `value "abc" is not a number`) || er.Datapoint["metric"] != "m" || er.Datapoint["value"] != "abc" {
		t.Fatalf("error %+v does not describe the bad datapoint", er)
	}
	if n := e.count(`m{host="c"}`); n != 2 {
		t.Fatalf("%d points of host c stored, want 2", n)
	}
	// Without details or summary: 400 in OpenTSDB's error shape.
	b := e.put("", fmt.Sprintf(`[{"metric":"m","timestamp":%d,"value":1,"tags":{"host":"d"}},{"metric":"m","timestamp":0,"value":1,"tags":{"host":"d"}}]`, nowSec()), http.StatusBadRequest)
	var eb errorBody
	if err := json.Unmarshal(b, &eb); err != nil || eb.Error.Code != 400 || !strings.Contains(eb.Error.Message, "1 of 2 data points failed, 1 were stored") ||
		!strings.Contains(eb.Error.Message, "must be positive") {
		t.Fatalf("error body %s (%v)", b, err)
	}
	// All good with details: 200 and an empty errors list.
	b = e.put("?details", fmt.Sprintf(`{"metric":"m","timestamp":%d,"value":1,"tags":{"host":"e"}}`, nowSec()), http.StatusOK)
	if compact(t, string(b)) != `{"success":1,"failed":0,"errors":[]}` {
		t.Fatalf("details answer %s", b)
	}
}

func TestPut_NodeRejectionsAreMappedToTheirDatapoints(t *testing.T) {
	e := newEnv(t)
	future := nowSec() + 365*86400
	body := fmt.Sprintf(`[
		{"metric":"m","timestamp":%d,"value":1,"tags":{"host":"a"}},
		{"metric":"m","timestamp":%d,"value":2,"tags":{"host":"a"}},
		{"metric":"m","timestamp":1,"value":3,"tags":{"host":"b"}}]`, nowSec(), future)
	var det putAnswer
	if err := json.Unmarshal(e.put("?details", body, http.StatusBadRequest), &det); err != nil {
		t.Fatal(err)
	}
	if det.Success != 1 || det.Failed != 2 || len(det.Errors) != 2 {
		t.Fatalf("details %+v", det)
	}
	for _, er := range det.Errors {
		ts, _ := er.Datapoint["timestamp"].(float64)
		switch {
		case int64(ts) == future && strings.Contains(er.Error, "ahead of the node clock"):
		case ts == 1 && strings.Contains(er.Error, "older than the raw retention"):
		default:
			t.Errorf("unexpected error %+v", er)
		}
		if strings.HasPrefix(er.Error, "batch ") {
			t.Errorf("error %q leaks the internal batch numbering", er.Error)
		}
	}
}

func TestPut_GzipBody(t *testing.T) {
	e := newEnv(t)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	fmt.Fprintf(zw, `{"metric":"gz","timestamp":%d,"value":1,"tags":{"host":"a"}}`, nowSec())
	zw.Close()
	st, b, _ := e.do("POST", "/api/put", buf.String(), "Content-Encoding", "gzip")
	if st != http.StatusNoContent || e.count(`gz`) != 1 {
		t.Fatalf("status %d %s, %d stored", st, b, e.count("gz"))
	}
}

func TestPut_DuplicateAndOutOfOrderPoints(t *testing.T) {
	e := newEnv(t)
	t0 := nowSec() - 60
	// A duplicate timestamp is last-write-wins; both writes count as stored.
	var det putAnswer
	body := fmt.Sprintf(`[{"metric":"d","timestamp":%d,"value":1,"tags":{"k":"v"}},{"metric":"d","timestamp":%d,"value":2,"tags":{"k":"v"}}]`, t0, t0)
	if err := json.Unmarshal(e.put("?details", body, http.StatusOK), &det); err != nil || det.Success != 2 {
		t.Fatalf("duplicates: %+v %v", det, err)
	}
	if got := e.raw(`d`)[`d{k="v"}`]; len(got) != 1 || got[0][1] != 2 {
		t.Fatalf("after a duplicate timestamp: %v, want one point with the last value", got)
	}
	// Out of order within the node's window (1h) is stored; older is refused.
	body = fmt.Sprintf(`[{"metric":"d","timestamp":%d,"value":3,"tags":{"k":"v"}},{"metric":"d","timestamp":%d,"value":4,"tags":{"k":"v"}}]`, t0-1800, t0-3*3600)
	if err := json.Unmarshal(e.put("?details", body, http.StatusBadRequest), &det); err != nil {
		t.Fatal(err)
	}
	if det.Success != 1 || det.Failed != 1 || !strings.Contains(det.Errors[0].Error, "out-of-order window") {
		t.Fatalf("out of order: %+v", det)
	}
	if n := e.count(`d`); n != 2 {
		t.Fatalf("%d points stored, want 2", n)
	}
}

// TestPut_BadInput sends each bad datapoint next to a good one: the bad
// one fails with its documented error, the good one is stored, and the
// server keeps serving.
func TestPut_BadInput(t *testing.T) {
	e := newEnv(t)
	ts := nowSec() - 5
	manyTags := make(map[string]string, 10_000)
	for i := range 10_000 {
		manyTags[fmt.Sprintf("t%d", i)] = "v"
	}
	cases := []struct {
		name    string
		bad     string // one datapoint, raw JSON
		stored  bool   // the bad datapoint is in fact stored
		wantErr string
	}{
		{"NaN value as string", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":"NaN","tags":{"h":"a"}}`, ts), false, `value "NaN" is not a number`},
		{"Infinity as string", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":"-Infinity","tags":{"h":"a"}}`, ts), false, "is not a number"},
		{"value beyond float64", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1e999,"tags":{"h":"a"}}`, ts), false, "out of range"},
		{"timestamp zero", `{"metric":"x","timestamp":0,"value":1,"tags":{"h":"a"}}`, false, "must be positive"},
		{"negative timestamp", `{"metric":"x","timestamp":-5,"value":1,"tags":{"h":"a"}}`, false, "must be positive"},
		{"huge timestamp", `{"metric":"x","timestamp":99999999999999,"value":1,"tags":{"h":"a"}}`, false, "too large"},
		{"far future", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1,"tags":{"h":"a"}}`, ts+365*86400), false, "ahead of the node clock"},
		{"1970 in milliseconds", `{"metric":"x","timestamp":4294967296,"value":1,"tags":{"h":"a"}}`, false, "older than the raw retention"},
		{"milliseconds", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1,"tags":{"h":"a"}}`, nowMs()-1234), true, ""},
		{"timestamp as string", fmt.Sprintf(`{"metric":"x","timestamp":"%d","value":1,"tags":{"h":"a"}}`, ts), true, ""},
		{"timestamp with millis", fmt.Sprintf(`{"metric":"x","timestamp":"%d.25","value":1,"tags":{"h":"a"}}`, ts), true, ""},
		{"timestamp not a number", `{"metric":"x","timestamp":"yesterday","value":1,"tags":{"h":"a"}}`, false, "not a number of seconds"},
		{"value as numeric string", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":"-12.5e1","tags":{"h":"a"}}`, ts), true, ""},
		{"10,000 tags", mustJSON(t, map[string]any{"metric": "x", "timestamp": ts, "value": 1, "tags": manyTags}), false, "10000 tags, at most 31 tags are allowed"},
		{"1 MiB tag value", mustJSON(t, map[string]any{"metric": "x", "timestamp": ts, "value": 1, "tags": map[string]string{"h": strings.Repeat("v", 1<<20)}}), false, "limit is 1024"},
		{"invalid UTF-8 in tag value", fmt.Sprintf("{\"metric\":\"x\",\"timestamp\":%d,\"value\":1,\"tags\":{\"h\":\"a\xff\"}}", ts), false, `tag "h": value is not valid UTF-8 (at byte 1)`},
		{"invalid UTF-8 in metric", fmt.Sprintf("{\"metric\":\"x\xc3\",\"timestamp\":%d,\"value\":1,\"tags\":{\"h\":\"a\"}}", ts), false, "is not valid UTF-8 (at byte 1)"},
		{"invalid UTF-8 in tag key", fmt.Sprintf("{\"metric\":\"x\",\"timestamp\":%d,\"value\":1,\"tags\":{\"h\xff\":\"a\"}}", ts), false, `tag key "h\xff" is not valid UTF-8 (at byte 1)`},
		{"invalid UTF-8 in an escaped value", fmt.Sprintf("{\"metric\":\"x\",\"timestamp\":%d,\"value\":1,\"tags\":{\"h\":\"\\u00e9\xff\"}}", ts), false, `tag "h": value is not valid UTF-8 (at byte 2)`},
		{"NUL in tag value", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1,"tags":{"h":"a\u0000b"}}`, ts), false, "control character U+0000"},
		{"newline in tag value", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1,"tags":{"h":"a\nb"}}`, ts), false, "control character U+000A"},
		{"NUL in tag key", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1,"tags":{"h\u0000":"a"}}`, ts), false, "is not allowed"},
		{"space in metric", fmt.Sprintf(`{"metric":"cpu load","timestamp":%d,"value":1,"tags":{"h":"a"}}`, ts), false, "character ' ' at byte 3 is not allowed"},
		{"empty tag value", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1,"tags":{"h":""}}`, ts), false, "empty value"},
		{"reserved tag key", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1,"tags":{"__name__":"y"}}`, ts), false, "reserved"},
		{"tag keys mapping to one label", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1,"tags":{"a/b":"1","a_b":"2"}}`, ts), false, "duplicate tag key"},
		{"tag key with slash and unicode", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1,"tags":{"rack/slot":"1","température":"2","9lives":"3"}}`, ts), true, ""},
		{"no tags", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1}`, ts), true, ""},
		{"tag value number", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1,"tags":{"cpu":3}}`, ts), true, ""},
		{"metric is a number", fmt.Sprintf(`{"metric":7,"timestamp":%d,"value":1,"tags":{"h":"a"}}`, ts), false, "metric must be a string, not a number"},
		{"metric missing", fmt.Sprintf(`{"timestamp":%d,"value":1,"tags":{"h":"a"}}`, ts), false, "metric is missing"},
		{"value is a boolean", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":true,"tags":{"h":"a"}}`, ts), false, "value must be a number, not a boolean"},
		{"value is null", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":null,"tags":{"h":"a"}}`, ts), false, "value is missing"},
		{"tags is a string", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1,"tags":"h=a"}`, ts), false, "field tags must not be a JSON string"},
		{"tag value is an object", fmt.Sprintf(`{"metric":"x","timestamp":%d,"value":1,"tags":{"h":{}}}`, ts), false, "value must be a string, not an object"},
		{"datapoint is a number", `42`, false, "datapoint must be a JSON object"},
		{"datapoint is null", `null`, false, "metric is missing"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			good := fmt.Sprintf(`{"metric":"good","timestamp":%d,"value":%d,"tags":{"case":"c%d"}}`, ts, i, i)
			var det putAnswer
			want := http.StatusBadRequest
			if c.stored {
				want = http.StatusOK
			}
			b := e.put("?details", "["+good+","+c.bad+"]", want)
			if err := json.Unmarshal(b, &det); err != nil {
				t.Fatalf("%v: %.300s", err, b)
			}
			if c.stored {
				if det.Success != 2 || det.Failed != 0 {
					t.Fatalf("answer %.500s, want both points stored", b)
				}
			} else if det.Success != 1 || det.Failed != 1 || len(det.Errors) != 1 || !strings.Contains(det.Errors[0].Error, c.wantErr) {
				t.Fatalf("answer %.500s, want 1 stored and an error containing %q", b, c.wantErr)
			}
			if len(b) > 64<<10 {
				t.Fatalf("answer is %d bytes: the echo of a bad datapoint must be bounded", len(b))
			}
			if n := e.count(fmt.Sprintf(`good{case="c%d"}`, i)); n != 1 {
				t.Fatalf("the good point next to the bad one: %d stored, want 1", n)
			}
		})
	}
	// Tag keys are mapped onto label names.
	if got := e.raw(`x{rack_slot="1",temp_rature="2",_9lives="3"}`); len(got) != 1 {
		t.Fatalf("mapped tag keys: %v", got)
	}
	e.put("", fmt.Sprintf(`{"metric":"still.serving","timestamp":%d,"value":1,"tags":{"h":"a"}}`, ts), http.StatusNoContent)
}

// TestPut_BadRequests are requests refused as a whole: nothing of them is
// stored.
func TestPut_BadRequests(t *testing.T) {
	e := newEnv(t, httpapi.Limits{MaxBodyBytes: 4096, MaxPointsPerRequest: 3})
	good := fmt.Sprintf(`{"metric":"whole","timestamp":%d,"value":1,"tags":{"h":"a"}}`, nowSec())
	cases := []struct {
		name, method, body string
		status             int
		wantMsg            string
	}{
		{"truncated JSON", "POST", "[" + good + `,{"metric":"x"`, 400, "malformed JSON"},
		{"syntax error", "POST", "[" + good + `,{"metric":x}]`, 400, "malformed JSON at byte"},
		{"NaN literal", "POST", "[" + good + `,{"metric":"x","timestamp":1,"value":NaN}]`, 400, "malformed JSON"},
		{"trailing garbage", "POST", good + ` {}`, 400, "unexpected data after"},
		{"empty body", "POST", "", 400, "empty"},
		{"empty array", "POST", "[]", 400, "no datapoints"},
		{"a string", "POST", `"put"`, 400, "must be a JSON datapoint object or an array"},
		{"over the body limit", "POST", "[" + good + strings.Repeat(","+good, 80) + "]", 413, "4096"},
		{"too many points", "POST", "[" + good + strings.Repeat(","+good, 3) + "]", 413, "more than 3 datapoints"},
		{"GET", "GET", "", 405, "method GET is not allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, b, hdr := e.do(c.method, "/api/put?details", c.body)
			var eb errorBody
			if st != c.status || json.Unmarshal(b, &eb) != nil || eb.Error.Code != c.status || !strings.Contains(eb.Error.Message, c.wantMsg) {
				t.Fatalf("status %d body %.300s, want %d with %q", st, b, c.status, c.wantMsg)
			}
			if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("Content-Type %q", ct)
			}
			if n := e.count("whole"); n != 0 {
				t.Fatalf("%d points stored from a refused request", n)
			}
		})
	}
	if e.cfg.Stats.Get(httpapi.ViolationBodyTooLarge) != 1 || e.cfg.Stats.Get(httpapi.ViolationTooManyPoints) != 1 {
		t.Fatalf("violations not counted: %v", e.cfg.Stats.Snapshot())
	}
	e.put("", good, http.StatusNoContent)
}

// TestPut_BackendErrorsMapToRetryableStatuses checks that a write the
// backend refuses as a whole gets 429 or 503 with Retry-After, in
// OpenTSDB's error shape.
func TestPut_BackendErrorsMapToRetryableStatuses(t *testing.T) {
	fb := &fakeBackend{}
	cfg := &httpapi.Config{}
	mux := http.NewServeMux()
	Register(mux, fb, cfg)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	body := fmt.Sprintf(`{"metric":"m","timestamp":%d,"value":1,"tags":{"h":"a"}}`, nowSec())
	for _, c := range []struct {
		err    error
		status int
	}{
		{model.ErrOverloaded, http.StatusTooManyRequests},
		{model.ErrClosed, http.StatusServiceUnavailable},
		{context.DeadlineExceeded, http.StatusServiceUnavailable},
	} {
		fb.mu.Lock()
		fb.fail = []error{c.err}
		fb.mu.Unlock()
		resp, err := http.Post(srv.URL+"/api/put?details", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var eb errorBody
		if resp.StatusCode != c.status || resp.Header.Get("Retry-After") == "" || json.Unmarshal(b, &eb) != nil || eb.Error.Code != c.status {
			t.Errorf("%v: %d %q %s, want %d with Retry-After", c.err, resp.StatusCode, resp.Header.Get("Retry-After"), b, c.status)
		}
	}
	if cfg.Stats.Get(httpapi.ViolationOverloaded) != 1 || cfg.Stats.Get(httpapi.ViolationTimeout) != 1 {
		t.Errorf("violations %v", cfg.Stats.Snapshot())
	}
}
