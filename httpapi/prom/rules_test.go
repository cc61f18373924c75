package prom

import (
	"encoding/json"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"

	"github.com/tributarydb/tributary/httpapi"
)

func TestAlertsFromSeries_ListsPendingAndFiringWithTheirActiveTime(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	at := testNow.Add(-10 * time.Second).UnixMilli()
	stale := math.Float64frombits(value.StaleNaN)
	ts := func(v float64, kv ...string) prompb.TimeSeries {
		var ls []prompb.Label
		for i := 0; i+1 < len(kv); i += 2 {
			ls = append(ls, prompb.Label{Name: kv[i], Value: kv[i+1]})
		}
		return prompb.TimeSeries{Labels: ls, Samples: []prompb.Sample{{Timestamp: at - 1000, Value: 1}, {Timestamp: at, Value: v}}}
	}
	activeSince := float64(testNow.Add(-5 * time.Minute).Unix())
	e.write(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		ts(1, "__name__", "ALERTS", "alertname", "CoolantOverheat", "alertstate", "firing", "edge", "pi-7", "vehicle", "truck-1"),
		ts(activeSince, "__name__", "ALERTS_FOR_STATE", "alertname", "CoolantOverheat", "edge", "pi-7", "vehicle", "truck-1"),
		ts(1, "__name__", "ALERTS", "alertname", "RoomTooWarm", "alertstate", "pending", "edge", "pi-9", "room", "lab"),
		// Resolved: ends with a staleness marker.
		ts(stale, "__name__", "ALERTS", "alertname", "CoolantOverheat", "alertstate", "firing", "edge", "pi-8", "vehicle", "truck-2"),
	}})

	// Without rules or the series view, no alerts.
	if _, r, _ := e.call(http.MethodGet, "/api/v1/alerts", nil); string(r.Data) != `{"alerts":[]}` {
		t.Fatalf("alerts without a source: %s", r.Data)
	}
	e.api.ServeAlertsFromSeries()
	st, r, raw := e.call(http.MethodGet, "/api/v1/alerts", nil)
	if st != http.StatusOK {
		t.Fatalf("%d %s", st, raw)
	}
	var got struct{ Alerts []alertJSON }
	if err := json.Unmarshal(r.Data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Alerts) != 2 {
		t.Fatalf("alerts %s", r.Data)
	}
	byName := map[string]alertJSON{}
	for _, a := range got.Alerts {
		byName[a.Labels["alertname"]] = a
	}
	hot, warm := byName["CoolantOverheat"], byName["RoomTooWarm"]
	if hot.State != "firing" || hot.Labels["edge"] != "pi-7" || hot.Labels["alertstate"] != "" || hot.Labels["__name__"] != "" ||
		hot.ActiveAt == nil || !hot.ActiveAt.Equal(testNow.Add(-5*time.Minute)) || hot.Value != "NaN" {
		t.Errorf("firing alert %+v", hot)
	}
	if warm.State != "pending" || warm.Labels["room"] != "lab" || warm.ActiveAt != nil {
		t.Errorf("pending alert without ALERTS_FOR_STATE %+v", warm)
	}
}
