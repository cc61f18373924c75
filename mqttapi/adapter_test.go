package mqttapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		runChild(dir, os.Getenv(childBrokerEnv))
		return
	}
	goleak.VerifyTestMain(m)
}

func openNode(t testing.TB, dir string) *node.Node {
	t.Helper()
	n, err := node.Open(node.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// running is an Adapter running in the test.
type running struct {
	a          *Adapter
	cancel     context.CancelFunc
	done       chan error
	subscribed chan struct{}
}

// startAdapter runs an adapter over b and waits until it has subscribed.
func startAdapter(t testing.TB, b backend.Backend, o Options) *running {
	t.Helper()
	subscribed := make(chan struct{}, 16)
	o.onSubscribed = func() {
		select {
		case subscribed <- struct{}{}:
		default:
		}
	}
	if o.RetryMax == 0 {
		o.RetryMax = 500 * time.Millisecond
	}
	a, err := New(b, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{a: a, cancel: cancel, done: make(chan error, 1), subscribed: subscribed}
	go func() { r.done <- a.Run(ctx) }()
	select {
	case <-subscribed:
	case <-time.After(15 * time.Second):
		cancel()
		<-r.done
		t.Fatal("the adapter did not subscribe within 15s")
	}
	return r
}

func (r *running) stop(t testing.TB) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the adapter did not stop within 30s")
	}
}

// points returns every point of the series matching selector, as
// "series@ts" -> value.
func points(t testing.TB, b backend.Backend, selector string) map[string]float64 {
	t.Helper()
	ms, err := labels.ParseSelector(selector)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	_, err = b.Query(context.Background(), model.Query{Matchers: ms, Start: 0, End: time.Now().Add(time.Hour).UnixMilli(), Mode: model.ModeRaw},
		func(s model.Series) error {
			for i, ts := range s.Ts {
				out[fmt.Sprintf("%s@%d", strings.TrimSuffix(s.Labels.String(), "{}"), ts)] = s.Vs[i]
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitPoints polls until selector has n points and returns them.
func waitPoints(t testing.TB, b backend.Backend, selector string, n int) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := points(t, b, selector)
		if len(got) >= n || time.Now().After(deadline) {
			if len(got) != n {
				t.Fatalf("%s: %d points, want %d", selector, len(got), n)
			}
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func baseOptions(brokerURL, clientID string, subs ...Subscription) Options {
	return Options{Broker: brokerURL, ClientID: clientID, Subscriptions: subs, RetryInitial: 20 * time.Millisecond}
}

func TestAdapter_StoresEachFormatEndToEnd(t *testing.T) {
	br := startBroker(t)
	n := openNode(t, t.TempDir())
	defer n.Close()
	now := time.Now().Truncate(time.Second)
	nowMs := now.UnixMilli()
	r := startAdapter(t, n, baseOptions(br.url(), "e2e-formats",
		Subscription{Topic: "lp/+host", Format: FormatLineProtocol, Precision: "ms"},
		Subscription{Topic: "sensors/+site/+device", Format: FormatJSON, JSON: &JSONMapping{
			Metric: "temperature", ValueFields: []string{"t"}, TimeField: "ts", TimeUnit: "ms"}},
		Subscription{Topic: "spBv1.0/#", Format: FormatSparkplugB},
	))
	defer r.stop(t)
	pub := newPublisher(t, br.url(), "e2e-formats-pub")
	pub.publish("lp/pi-1", fmt.Appendf(nil, "cpu,core=0 usage=12.5 %d\ncpu,core=1 usage=7 %d", nowMs, nowMs))
	pub.publish("sensors/north/t1", fmt.Appendf(nil, `{"t": 21.25, "ts": %d}`, nowMs))
	pub.publish("sensors/south/t2", fmt.Appendf(nil, `[{"t": 18, "ts": %d}, {"t": 18.5, "ts": %d}]`, nowMs, nowMs+1000))
	pub.publish("spBv1.0/plant/NBIRTH/gw1", spPayload(uint64(nowMs), spM{name: "Inputs/Temp", alias: 1, hasAlias: true, dt: spDouble, dbl: ptr(20.5)}))
	pub.publish("spBv1.0/plant/NDATA/gw1", spPayload(uint64(nowMs+1000), spM{alias: 1, hasAlias: true, dbl: ptr(21.0)}))

	want := map[string]float64{
		fmt.Sprintf(`cpu_usage{core="0",host="pi-1"}@%d`, nowMs): 12.5,
		fmt.Sprintf(`cpu_usage{core="1",host="pi-1"}@%d`, nowMs): 7,
	}
	assertPoints(t, waitPoints(t, n, `{__name__="cpu_usage"}`, 2), want)
	want = map[string]float64{
		fmt.Sprintf(`temperature{device="t1",site="north"}@%d`, nowMs):      21.25,
		fmt.Sprintf(`temperature{device="t2",site="south"}@%d`, nowMs):      18,
		fmt.Sprintf(`temperature{device="t2",site="south"}@%d`, nowMs+1000): 18.5,
	}
	assertPoints(t, waitPoints(t, n, `{__name__="temperature"}`, 3), want)
	want = map[string]float64{
		fmt.Sprintf(`Inputs_Temp{edge_node_id="gw1",group_id="plant"}@%d`, nowMs):      20.5,
		fmt.Sprintf(`Inputs_Temp{edge_node_id="gw1",group_id="plant"}@%d`, nowMs+1000): 21,
	}
	assertPoints(t, waitPoints(t, n, `{__name__="Inputs_Temp"}`, 2), want)
}

func assertPoints(t testing.TB, got, want map[string]float64) {
	t.Helper()
	for k, v := range want {
		if gv, ok := got[k]; !ok || gv != v {
			t.Errorf("%s = %v (present %v), want %v", k, gv, ok, v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected point %s", k)
		}
	}
}

func TestAdapter_SessionKeepsMessagesWhileTheAdapterIsStopped(t *testing.T) {
	br := startBroker(t)
	n := openNode(t, t.TempDir())
	defer n.Close()
	o := baseOptions(br.url(), "e2e-session", Subscription{Topic: "lp/#", Format: FormatLineProtocol, Precision: "ms"})
	r := startAdapter(t, n, o)
	pub := newPublisher(t, br.url(), "e2e-session-pub")
	base := time.Now().Add(-time.Minute).UnixMilli()
	pub.publish("lp/a", fmt.Appendf(nil, "m v=0 %d", base))
	waitPoints(t, n, `{__name__="m_v"}`, 1)
	r.stop(t)
	if r.a.Connected() {
		t.Error("Connected after Run returned")
	}
	// Published while nobody is connected: the broker queues them in the
	// session.
	for i := 1; i <= 50; i++ {
		pub.publish("lp/a", fmt.Appendf(nil, "m v=%d %d", i, base+int64(i)))
	}
	r = startAdapter(t, n, o)
	defer r.stop(t)
	got := waitPoints(t, n, `{__name__="m_v"}`, 51)
	for i := 0; i <= 50; i++ {
		if v := got[fmt.Sprintf(`m_v@%d`, base+int64(i))]; v != float64(i) {
			t.Errorf("point %d = %v", i, v)
		}
	}
}

func TestAdapter_ReconnectsAfterABrokerRestart(t *testing.T) {
	br := startBroker(t)
	n := openNode(t, t.TempDir())
	defer n.Close()
	o := baseOptions(br.url(), "e2e-broker-restart", Subscription{Topic: "lp/#", Format: FormatLineProtocol, Precision: "ms"})
	r := startAdapter(t, n, o)
	base := time.Now().Add(-time.Minute).UnixMilli()
	pub := newPublisher(t, br.url(), "e2e-restart-pub")
	pub.publish("lp/a", fmt.Appendf(nil, "m v=1 %d", base))
	waitPoints(t, n, `{__name__="m_v"}`, 1)

	// The adapter stops; messages are queued in its session; the broker
	// restarts (keeping its state on disk); the adapter comes back.
	r.stop(t)
	pub.publish("lp/a", fmt.Appendf(nil, "m v=2 %d", base+1))
	br.stop()
	br.start()
	r = startAdapter(t, n, o)
	waitPoints(t, n, `{__name__="m_v"}`, 2)

	// The broker restarts under a running adapter, which reconnects.
	br.stop()
	deadline := time.Now().Add(10 * time.Second)
	for r.a.Connected() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r.a.Connected() {
		t.Fatal("still connected 10s after the broker stopped")
	}
	br.start()
	select {
	case <-r.subscribed:
	case <-time.After(20 * time.Second):
		t.Fatal("no resubscription within 20s of the broker's restart")
	}
	pub.publish("lp/a", fmt.Appendf(nil, "m v=3 %d", base+2))
	got := waitPoints(t, n, `{__name__="m_v"}`, 3)
	for i := int64(0); i < 3; i++ {
		if got[fmt.Sprintf("m_v@%d", base+i)] != float64(i+1) {
			t.Errorf("point %d: %v", i, got)
		}
	}
	r.stop(t)
}

func TestAdapter_BadPayloadsDoNotBlockGoodOnes(t *testing.T) {
	br := startBroker(t)
	n := openNode(t, t.TempDir())
	defer n.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	o := baseOptions(br.url(), "e2e-bad",
		Subscription{Topic: "j/+dev", Format: FormatJSON, JSON: &JSONMapping{Metric: "reading", ValueFields: []string{"v"}}},
		Subscription{Topic: "lp/#", Format: FormatLineProtocol},
		Subscription{Topic: "spBv1.0/#", Format: FormatSparkplugB},
	)
	o.MeterProvider = mp
	o.MaxPayloadBytes = 1024
	r := startAdapter(t, n, o)
	defer r.stop(t)
	pub := newPublisher(t, br.url(), "e2e-bad-pub")
	bad := []struct{ topic, payload string }{
		{"j/d1", `{"v": "not a number"}`},
		{"j/d1", `not json at all`},
		{"j/d1", `{"v": 1` + strings.Repeat(" ", 2000) + `}`}, // too large
		{"lp/x", "cpu usage=\n"},
		{"spBv1.0/g/NDATA/e", "\x12\x05\x01"},
		{"spBv1.0/g/NDATA/e", string(spPayload(1, spM{alias: 7, hasAlias: true, dbl: ptr(1.0)}))}, // unknown alias
	}
	for i := range 10 {
		b := bad[i%len(bad)]
		pub.publish(b.topic, []byte(b.payload))
		pub.publish(fmt.Sprintf("j/d%d", i), fmt.Appendf(nil, `{"v": %d}`, i))
	}
	got := waitPoints(t, n, `{__name__="reading"}`, 10)
	if len(got) != 10 {
		t.Fatalf("good points: %v", got)
	}
	// Every message was acknowledged and counted.
	deadline := time.Now().Add(10 * time.Second)
	for r.a.Pending() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if p := r.a.Pending(); p != 0 {
		t.Errorf("%d messages still pending", p)
	}
	counts := collectCounters(t, reader)
	if got := counts["tributary.mqtt.messages{outcome=stored}"]; got != 10 {
		t.Errorf("stored messages %d, want 10 (%v)", got, counts)
	}
	if got := counts["tributary.mqtt.messages{outcome=refused}"]; got != 10 {
		t.Errorf("refused messages %d, want 10 (%v)", got, counts)
	}
	for _, k := range []string{
		"tributary.mqtt.decode.errors{format=json,reason=bad_value}",
		"tributary.mqtt.decode.errors{format=json,reason=syntax}",
		"tributary.mqtt.decode.errors{format=json,reason=too_large}",
		"tributary.mqtt.decode.errors{format=influx,reason=bad_line}",
		"tributary.mqtt.decode.errors{format=sparkplugb,reason=syntax}",
		"tributary.mqtt.decode.errors{format=sparkplugb,reason=unknown_alias}",
	} {
		if counts[k] == 0 {
			t.Errorf("%s not counted (%v)", k, counts)
		}
	}
	if counts["tributary.mqtt.points{outcome=stored}"] != 10 {
		t.Errorf("stored points: %v", counts)
	}
	if counts["tributary.mqtt.connected"] != 1 {
		t.Errorf("connected gauge: %v", counts)
	}
}

// collectCounters reads every int64 sum and gauge as "name{k=v,...}".
func collectCounters(t testing.TB, reader sdkmetric.Reader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	key := func(name string, set attribute.Set) string {
		var kv []string
		for _, a := range set.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		if len(kv) == 0 {
			return name
		}
		return name + "{" + strings.Join(kv, ",") + "}"
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] += p.Value
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[key(m.Name, p.Attributes)] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					out[key(m.Name+".count", p.Attributes)] += int64(p.Count)
				}
			}
		}
	}
	return out
}

// refusingBackend refuses writes with err while refusing is set, and
// counts the calls.
type refusingBackend struct {
	backend.Backend
	refusing atomic.Bool
	err      error
	calls    atomic.Int64
}

func (b *refusingBackend) Write(ctx context.Context, batches []model.Batch) (model.WriteResult, error) {
	b.calls.Add(1)
	if b.refusing.Load() {
		return model.WriteResult{}, b.err
	}
	return b.Backend.Write(ctx, batches)
}

func TestAdapter_DoesNotAcknowledgeWhatTheNodeRefusedForNow(t *testing.T) {
	br := startBroker(t)
	n := openNode(t, t.TempDir())
	defer n.Close()
	rb := &refusingBackend{Backend: n, err: fmt.Errorf("write: %w", model.ErrOverloaded)}
	rb.refusing.Store(true)
	o := baseOptions(br.url(), "e2e-refuse", Subscription{Topic: "lp/#", Format: FormatLineProtocol, Precision: "ms"})
	r := startAdapter(t, rb, o)
	pub := newPublisher(t, br.url(), "e2e-refuse-pub")
	base := time.Now().Add(-time.Minute).UnixMilli()
	for i := range 20 {
		pub.publish("lp/a", fmt.Appendf(nil, "m v=%d %d", i, base+int64(i)))
	}
	deadline := time.Now().Add(10 * time.Second)
	for rb.calls.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if rb.calls.Load() < 3 {
		t.Fatalf("%d write attempts; the adapter does not retry", rb.calls.Load())
	}
	if p := r.a.Pending(); p == 0 {
		t.Error("nothing pending while the node refuses")
	}
	// Stopped while still refused: nothing was acknowledged, so a new
	// adapter on the same session gets every message again.
	r.stop(t)
	if len(points(t, n, `{__name__="m_v"}`)) != 0 {
		t.Fatal("points stored through a refusing backend")
	}
	r = startAdapter(t, n, o)
	defer r.stop(t)
	got := waitPoints(t, n, `{__name__="m_v"}`, 20)
	for i := range 20 {
		if got[fmt.Sprintf("m_v@%d", base+int64(i))] != float64(i) {
			t.Fatalf("point %d missing: %v", i, got)
		}
	}
}

func TestAdapter_RetriesUntilTheNodeTakesTheWrite(t *testing.T) {
	br := startBroker(t)
	n := openNode(t, t.TempDir())
	defer n.Close()
	rb := &refusingBackend{Backend: n, err: errors.New("store unavailable")}
	rb.refusing.Store(true)
	r := startAdapter(t, rb, baseOptions(br.url(), "e2e-retry", Subscription{Topic: "lp/#", Format: FormatLineProtocol, Precision: "ms"}))
	defer r.stop(t)
	pub := newPublisher(t, br.url(), "e2e-retry-pub")
	base := time.Now().Add(-time.Minute).UnixMilli()
	pub.publish("lp/a", fmt.Appendf(nil, "m v=1 %d", base))
	deadline := time.Now().Add(10 * time.Second)
	for rb.calls.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	rb.refusing.Store(false)
	waitPoints(t, n, `{__name__="m_v"}`, 1)
	if c := rb.calls.Load(); c < 3 {
		t.Errorf("%d write calls, want refusals then a success", c)
	}
}

func TestDecideOutcome(t *testing.T) {
	cases := []struct {
		name                    string
		decoded, decoderRefused int
		backendRefused          int64
		want                    outcome
	}{
		{"all stored", 5, 0, 0, outcomeStored},
		{"decoder refused some", 5, 1, 0, outcomePartial},
		{"node refused some", 5, 0, 2, outcomePartial},
		{"node refused all", 5, 0, 5, outcomeRefused},
		{"decoder refused all", 0, 3, 0, outcomeRefused},
		{"nothing at all", 0, 0, 0, outcomeEmpty},
	}
	for _, c := range cases {
		if got := decideOutcome(c.decoded, c.decoderRefused, c.backendRefused); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, outcomeNames[got], outcomeNames[c.want])
		}
	}
}

func TestBackoff_GrowsJitteredUpToTheMaximum(t *testing.T) {
	a := &Adapter{o: Options{RetryInitial: 100 * time.Millisecond, RetryMax: time.Second}}
	if d := a.backoff(0); d != 0 {
		t.Fatalf("first attempt waits %s", d)
	}
	for attempt, ceiling := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second} {
		for range 50 {
			if d := a.backoff(attempt); d > ceiling || d < ceiling/2 {
				t.Fatalf("attempt %d waits %s, want within [%s, %s]", attempt, d, ceiling/2, ceiling)
			}
		}
	}
}
