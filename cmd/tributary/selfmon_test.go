package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/tributarydb/tributary/httpapi/prom"
	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
)

// promInstant runs a PromQL instant query over HTTP and returns the
// values of the result vector.
func promInstant(t *testing.T, httpAddr, q string) []float64 {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("%s: %v %s %s", q, err, body.Status, body.Error)
	}
	var out []float64
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%s: value %v", q, r.Value)
		}
		out = append(out, v)
	}
	return out
}

// TestSelfMonitor_NodeAnswersPromQLAboutItself runs a node with
// self-monitoring as tributary node wires it, writes to it, and asks its
// Prometheus API about its own ingest.
func TestSelfMonitor_NodeAnswersPromQLAboutItself(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tp, err := telemetry.Setup(context.Background(), telemetry.Config{Role: "node", Instance: "pi-1", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer tp.Shutdown(context.Background())
	n, err := node.Open(node.Options{DataDir: t.TempDir(), NodeID: "pi-1", MeterProvider: tp.MeterProvider(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	sf := serveFlags{grpcListen: "127.0.0.1:0", httpListen: "127.0.0.1:0",
		prom: prom.Options{MaxSamples: 1_000_000, QueryTimeout: 10 * time.Second, LookbackDelta: 5 * time.Minute, MaxConcurrentQueries: 2}}
	fe, err := sf.start(n, testNodeAPI(n, "test").Register, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.stop(time.Second)
	httpAddr := frontAddr(t, fe, "http")

	write := func(points int) {
		now := time.Now().UnixMilli()
		b := model.Batch{Labels: []labels.Label{{Name: "__name__", Value: "temp"}}}
		for i := range points {
			b.Ts, b.Vs = append(b.Ts, now-int64(points-i)), append(b.Vs, float64(i))
		}
		if res, err := n.Write(context.Background(), []model.Batch{b}); err != nil || res.Accepted != int64(points) {
			t.Fatalf("write: %+v %v", res, err)
		}
	}
	write(100)
	smf := selfMonitorFlags{every: 100 * time.Millisecond, maxSeries: 1000}
	mon := smf.start(n, tp, log)
	defer mon.stop()

	self := `tributary_points_accepted_total{instance="pi-1",job="tributary"}`
	deadline := time.Now().Add(20 * time.Second)
	for {
		write(100)
		time.Sleep(150 * time.Millisecond)
		v := promInstant(t, httpAddr, self)
		r := promInstant(t, httpAddr, "rate("+self+"[1m])")
		if len(v) == 1 && v[0] >= 200 && len(r) == 1 && r[0] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node does not answer about itself: %s = %v, rate = %v", self, v, r)
		}
	}
	// Histograms arrive as _bucket, _sum and _count.
	if v := promInstant(t, httpAddr, `tributary_wal_fsync_duration_seconds_count{job="tributary"}`); len(v) != 1 || v[0] <= 0 {
		t.Errorf("fsync histogram count: %v", v)
	}
	if v := promInstant(t, httpAddr, `tributary_wal_fsync_duration_seconds_bucket{le="+Inf",job="tributary"}`); len(v) != 1 || v[0] <= 0 {
		t.Errorf("fsync histogram +Inf bucket: %v", v)
	}
}

func TestSelfMonitorFlags_Refused(t *testing.T) {
	for _, f := range []selfMonitorFlags{{every: -time.Second, maxSeries: 1}, {every: time.Millisecond, maxSeries: 1}, {every: time.Second}} {
		if err := f.validate(); err == nil {
			t.Errorf("%+v accepted", f)
		}
	}
	if err := (&selfMonitorFlags{maxSeries: 1}).validate(); err != nil {
		t.Errorf("off refused: %v", err)
	}
}
