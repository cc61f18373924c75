package workload

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

func mustSensor(t testing.TB, opts SensorOptions) *Generator {
	t.Helper()
	g, err := NewSensor(opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustCANBus(t testing.TB, opts CANBusOptions) *Generator {
	t.Helper()
	g, err := NewCANBus(opts)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// collect fills every request rounds times with n points and returns each
// series' samples, keyed by its label string.
func collect(t *testing.T, g *Generator, seriesPerRequest, n, rounds int) map[string][][2]float64 {
	t.Helper()
	out := map[string][][2]float64{}
	reqs := g.Requests(seriesPerRequest, n)
	for range rounds {
		for _, r := range reqs {
			r.Next(n)
			for _, b := range r.Msg.Batches {
				key := seriesKey(b.Series)
				for i, ts := range b.TimestampsMs {
					out[key] = append(out[key], [2]float64{float64(ts), b.Values[i]})
				}
			}
		}
	}
	return out
}

func seriesKey(s *tributaryv1.Series) string {
	var sb strings.Builder
	for _, l := range s.Labels {
		sb.WriteString(l.Name + "=" + l.Value + ",")
	}
	return sb.String()
}

func generators(t *testing.T, seed uint64) map[string]*Generator {
	return map[string]*Generator{
		"sensor-1s":    mustSensor(t, SensorOptions{Series: 50, StartMs: 1_700_000_000_000, IntervalMs: 1000, Seed: seed}),
		"sensor-100ms": mustSensor(t, SensorOptions{Series: 7, StartMs: 1_700_000_000_000, IntervalMs: 100, Seed: seed}),
		"canbus":       mustCANBus(t, CANBusOptions{Vehicles: 3, StartMs: 1_700_000_000_000, Seed: seed}),
	}
}

func TestGenerator_SameSeedSameRequests(t *testing.T) {
	for name, g := range generators(t, 42) {
		t.Run(name, func(t *testing.T) {
			g2 := generators(t, 42)[name]
			a, b := g.Requests(22, 30), g2.Requests(22, 30)
			if len(a) != len(b) {
				t.Fatalf("%d vs %d requests", len(a), len(b))
			}
			for round := range 3 {
				for i := range a {
					a[i].Next(30)
					b[i].Next(30)
					if !proto.Equal(a[i].Msg, b[i].Msg) {
						t.Fatalf("round %d request %d differs between two generators with seed 42", round, i)
					}
				}
			}
		})
	}
}

func TestGenerator_DifferentSeedDifferentValues(t *testing.T) {
	for name, g := range generators(t, 1) {
		t.Run(name, func(t *testing.T) {
			a := g.Requests(1000, 50)[0]
			b := generators(t, 2)[name].Requests(1000, 50)[0]
			a.Next(50)
			b.Next(50)
			if proto.Equal(a.Msg, b.Msg) {
				t.Fatal("seeds 1 and 2 gave identical requests")
			}
		})
	}
}

// The samples of a series must not depend on how series are grouped into
// requests, or on how many points each request carries, so that any number
// of clients sends the same data.
func TestGenerator_SamplesIndependentOfGrouping(t *testing.T) {
	for name, g := range generators(t, 7) {
		t.Run(name, func(t *testing.T) {
			want := collect(t, g, 1000, 60, 1)
			got := collect(t, g, 1, 20, 3)
			if len(got) != g.NumSeries() || len(want) != g.NumSeries() {
				t.Fatalf("got %d and %d series, want %d", len(got), len(want), g.NumSeries())
			}
			for key, w := range want {
				gs := got[key]
				if len(gs) != len(w) {
					t.Fatalf("%s: %d samples, want %d", key, len(gs), len(w))
				}
				for i := range w {
					if gs[i] != w[i] {
						t.Fatalf("%s sample %d: got %v, want %v", key, i, gs[i], w[i])
					}
				}
			}
		})
	}
}

func TestRequest_Shape(t *testing.T) {
	tests := []struct {
		name                  string
		gen                   *Generator
		seriesPerReq, points  int
		wantRequests          int
		wantSeriesPerRequest  []int
		wantPointsPerRequest0 int
	}{
		{"sensor 100x100", mustSensor(t, SensorOptions{Series: 10000, StartMs: 0, IntervalMs: 1000}), 100, 100, 100, nil, 10000},
		{"sensor uneven tail", mustSensor(t, SensorOptions{Series: 250, StartMs: 0, IntervalMs: 1000}), 100, 10, 3, []int{100, 100, 50}, 1000},
		{"canbus whole vehicles", mustCANBus(t, CANBusOptions{Vehicles: 10}), 100, 100, 3, []int{88, 88, 44}, 8800},
		{"canbus at least one vehicle", mustCANBus(t, CANBusOptions{Vehicles: 2}), 5, 10, 2, []int{22, 22}, 220},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reqs := tc.gen.Requests(tc.seriesPerReq, tc.points)
			if len(reqs) != tc.wantRequests {
				t.Fatalf("%d requests, want %d", len(reqs), tc.wantRequests)
			}
			total := 0
			for i, r := range reqs {
				r.Next(tc.points)
				if tc.wantSeriesPerRequest != nil && r.NumSeries() != tc.wantSeriesPerRequest[i] {
					t.Errorf("request %d: %d series, want %d", i, r.NumSeries(), tc.wantSeriesPerRequest[i])
				}
				if r.Points() != r.NumSeries()*tc.points {
					t.Errorf("request %d: Points() = %d, want %d", i, r.Points(), r.NumSeries()*tc.points)
				}
				for _, b := range r.Msg.Batches {
					if len(b.TimestampsMs) != tc.points || len(b.Values) != tc.points {
						t.Fatalf("batch has %d timestamps and %d values, want %d", len(b.TimestampsMs), len(b.Values), tc.points)
					}
					if Label(b.Series, MetricName) == "" {
						t.Fatalf("series %v has no metric name", b.Series)
					}
				}
				total += r.NumSeries()
			}
			if total != tc.gen.NumSeries() {
				t.Errorf("requests cover %d series, want %d", total, tc.gen.NumSeries())
			}
			if reqs[0].Points() != tc.wantPointsPerRequest0 {
				t.Errorf("first request has %d points, want %d", reqs[0].Points(), tc.wantPointsPerRequest0)
			}
		})
	}
}

func TestRequest_TimestampsAreRegularAndContinue(t *testing.T) {
	const startMs = 1_700_000_000_000
	g := mustSensor(t, SensorOptions{Series: 3, StartMs: startMs, IntervalMs: 100})
	r := g.Requests(3, 10)[0]
	want := int64(startMs)
	for _, n := range []int{10, 4, 10} {
		r.Next(n)
		for _, b := range r.Msg.Batches {
			for i, ts := range b.TimestampsMs {
				if ts != want+int64(i)*100 {
					t.Fatalf("timestamp %d is %d, want %d", i, ts, want+int64(i)*100)
				}
			}
		}
		want += int64(n) * 100
		if r.NextMs() != want || r.LastMs() != want-100 {
			t.Fatalf("NextMs %d LastMs %d, want %d and %d", r.NextMs(), r.LastMs(), want, want-100)
		}
	}
}

func TestRequest_WireSizeAmortisesLabels(t *testing.T) {
	g := mustSensor(t, SensorOptions{Series: 100, StartMs: 1_700_000_000_000, IntervalMs: 1000})
	r := g.Requests(100, 100)[0]
	r.Next(100)
	perPoint := float64(proto.Size(r.Msg)) / float64(r.Points())
	// 8 bytes of value plus a 6-byte varint timestamp; labels add well under
	// one byte per point.
	if perPoint > 15.5 {
		t.Errorf("%.2f wire bytes per point, want at most 15.5", perPoint)
	}
}

func TestSensor_LabelsAndValuePrecision(t *testing.T) {
	g := mustSensor(t, SensorOptions{Series: 1000, StartMs: 0, IntervalMs: 1000, Seed: 3})
	seen := map[string]bool{}
	for _, s := range g.Series() {
		key := seriesKey(s)
		if seen[key] {
			t.Fatalf("duplicate series %s", key)
		}
		seen[key] = true
		for _, name := range []string{MetricName, "site", "device", "sensor"} {
			if Label(s, name) == "" {
				t.Fatalf("series %s has no %q label", key, name)
			}
		}
	}
	kinds := map[string]sensorKind{}
	for _, k := range sensorKinds {
		kinds[k.metric] = k
	}
	for _, r := range g.Requests(100, 500) {
		r.Next(500)
		for _, b := range r.Msg.Batches {
			k := kinds[Label(b.Series, MetricName)]
			changes := 0
			for i, v := range b.Values {
				if v < k.lo || v > k.hi {
					t.Fatalf("%s value %v outside [%v, %v]", k.metric, v, k.lo, k.hi)
				}
				if d := fractionalDigits(v); d > k.decimals {
					t.Fatalf("%s value %v has %d fractional digits, want at most %d", k.metric, v, d, k.decimals)
				}
				if i > 0 {
					step := math.Abs(v - b.Values[i-1])
					if step > float64(k.maxStep)/math.Pow10(k.decimals)+1e-9 {
						t.Fatalf("%s jumped by %v, more than %d quanta", k.metric, step, k.maxStep)
					}
					if step != 0 {
						changes++
					}
				}
			}
			if changes == 0 {
				t.Fatalf("%s never changed in %d samples", seriesKey(b.Series), len(b.Values))
			}
		}
	}
}

func fractionalDigits(v float64) int {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if i := strings.IndexByte(s, '.'); i >= 0 {
		return len(s) - i - 1
	}
	return 0
}

func TestCANBus_ChannelsLabelsAndPrecision(t *testing.T) {
	if n := len(CANChannels()); n != 22 {
		t.Fatalf("%d channels, want the article's 22", n)
	}
	g := mustCANBus(t, CANBusOptions{Vehicles: 4, Seed: 9})
	if g.NumSeries() != 4*22 || g.IntervalMs() != 100 {
		t.Fatalf("%d series every %d ms, want 88 every 100 ms", g.NumSeries(), g.IntervalMs())
	}
	for i, s := range g.Series() {
		if got, want := Label(s, MetricName), CANChannels()[i%22].Name; got != want {
			t.Fatalf("series %d is %q, want %q", i, got, want)
		}
		if got, want := Label(s, "vehicle"), VehicleID(i/22); got != want {
			t.Fatalf("series %d vehicle %q, want %q", i, got, want)
		}
	}
	plausible := map[string][2]float64{
		"speed": {0, 130}, "rpm": {650, 6500}, "gear": {0, 6}, "throttle": {0, 100},
		"brake_pedal": {0, 100}, "coolant_temp": {80, 104}, "fuel_level": {0, 100},
		"gps_lat": {46, 49}, "gps_lon": {3, 7}, "heading": {0, 360}, "battery_voltage": {13.6, 14.6},
	}
	// 10 minutes of driving.
	for _, r := range g.Requests(22, 600) {
		for range 10 {
			r.Next(600)
			for c, b := range r.Msg.Batches {
				ch := CANChannels()[c]
				for _, v := range b.Values {
					if q := v * ch.Scale; q != math.Round(q) && math.Abs(q-math.Round(q)) > 1e-6 {
						t.Fatalf("%s value %v is not a multiple of 1/%v", ch.Name, v, ch.Scale)
					}
					if ch.Scale != 256 {
						if d, want := fractionalDigits(v), int(math.Round(math.Log10(ch.Scale))); d > max(want, 1) {
							t.Fatalf("%s value %v has %d fractional digits, want at most %d", ch.Name, v, d, want)
						}
					}
					if rng, ok := plausible[ch.Name]; ok && (v < rng[0] || v > rng[1]) {
						t.Fatalf("%s value %v outside plausible range %v", ch.Name, v, rng)
					}
				}
			}
		}
	}
}

func TestCANBus_ChannelsMoveTogether(t *testing.T) {
	g := mustCANBus(t, CANBusOptions{Vehicles: 1, Seed: 5})
	r := g.Requests(22, 3000)[0]
	r.Next(3000)
	vals := func(name string) []float64 {
		for c, ch := range CANChannels() {
			if ch.Name == name {
				return r.Msg.Batches[c].Values
			}
		}
		t.Fatalf("no channel %q", name)
		return nil
	}
	speed, rpm, gear := vals("speed"), vals("rpm"), vals("gear")
	for i := range speed {
		if gear[i] == 0 && rpm[i] > 1000 {
			t.Fatalf("sample %d: %v rpm in neutral", i, rpm[i])
		}
		if gear[i] > 0 && math.Abs(rpm[i]-speed[i]*gearRPMPerKmh[int(gear[i])]) > 200 && rpm[i] > 950 {
			t.Fatalf("sample %d: %v rpm does not follow %v km/h in gear %v", i, rpm[i], speed[i], gear[i])
		}
	}
}

func TestOptions_Validate(t *testing.T) {
	if _, err := NewSensor(SensorOptions{Series: 0, IntervalMs: 1000}); err == nil {
		t.Error("NewSensor accepted 0 series")
	}
	if _, err := NewSensor(SensorOptions{Series: 1, IntervalMs: 0}); err == nil {
		t.Error("NewSensor accepted a 0 interval")
	}
	if _, err := NewCANBus(CANBusOptions{Vehicles: 0}); err == nil {
		t.Error("NewCANBus accepted 0 vehicles")
	}
}

// BenchmarkRequest_Next measures how fast requests are refilled, the part
// of the load generator's work that is not gRPC.
func BenchmarkRequest_Next(b *testing.B) {
	cases := []struct {
		name string
		gen  *Generator
	}{
		{"workload=sensor", mustSensor(b, SensorOptions{Series: 100, StartMs: 1_700_000_000_000, IntervalMs: 1000})},
		{"workload=canbus", mustCANBus(b, CANBusOptions{Vehicles: 5, StartMs: 1_700_000_000_000})},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r := c.gen.Requests(100, 100)[0]
			r.Next(100)
			b.ReportAllocs()
			b.SetBytes(int64(proto.Size(r.Msg)))
			for b.Loop() {
				r.Next(100)
			}
			b.ReportMetric(float64(r.Points())*float64(b.N)/b.Elapsed().Seconds(), "points/s")
		})
	}
}
