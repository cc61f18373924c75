package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"

	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// SensorOptions configures the Sensor workload.
type SensorOptions struct {
	// Series is the number of series (sensors).
	Series int
	// StartMs is the timestamp of the first sample of every series.
	StartMs int64
	// IntervalMs is the sampling interval: 1000 (1 s) or 100 (100 ms) are
	// typical; any positive value works.
	IntervalMs int64
	// Seed selects the random streams; equal options give equal samples.
	Seed uint64
}

// Validate reports whether the options describe a workload.
func (o SensorOptions) Validate() error {
	return errors.Join(positive("series", o.Series, ""), positive("interval", o.IntervalMs, " ms"))
}

// positive is nil when v is positive, else an error saying the named
// option (its value followed by unit) must be.
func positive[T int | int64](name string, v T, unit string) error {
	if v > 0 {
		return nil
	}
	return fmt.Errorf("%s must be positive, got %d%s", name, v, unit)
}

// sensorKind is one kind of reading, with its plausible range and
// resolution.
type sensorKind struct {
	metric   string
	lo, hi   float64
	decimals int
	maxStep  int     // largest change per sample, in quanta
	moveP    float64 // probability that a sample differs from the previous one
}

// sensorKinds are cycled through the sensors of a device.
var sensorKinds = [...]sensorKind{
	{metric: "temperature", lo: 15, hi: 35, decimals: 2, maxStep: 3, moveP: 0.3}, // °C
	{metric: "humidity", lo: 20, hi: 90, decimals: 1, maxStep: 2, moveP: 0.2},    // %RH
	{metric: "pressure", lo: 980, hi: 1040, decimals: 1, maxStep: 1, moveP: 0.1}, // hPa
	{metric: "voltage", lo: 3.1, hi: 3.6, decimals: 2, maxStep: 1, moveP: 0.05},  // V
}

const (
	sensorsPerDevice = 8
	devicesPerSite   = 50
)

// NewSensor returns the Sensor workload: opts.Series sensors on devices of
// eight sensors each, fifty devices to a site, with labels
//
//	{__name__="temperature", site="site-03", device="dev-0142", sensor="s4"}
//
// (metric names cycle through temperature, humidity, pressure and voltage).
// Every series is sampled at the same regular instants, and its values are a
// slow random walk bounded to a plausible range with one or two fractional
// digits — smooth, like real sensor readings, and as compressible.
func NewSensor(opts SensorOptions) (*Generator, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("sensor workload: %w", err)
	}
	g := &Generator{
		name:          "sensor",
		startMs:       opts.StartMs,
		intervalMs:    opts.IntervalMs,
		seriesPerUnit: 1,
		series:        make([]*tributaryv1.Series, opts.Series),
	}
	for i := range g.series {
		device := i / sensorsPerDevice
		k := sensorKinds[i%sensorsPerDevice%len(sensorKinds)]
		g.series[i] = series(
			MetricName, k.metric,
			"site", fmt.Sprintf("site-%02d", device/devicesPerSite),
			"device", fmt.Sprintf("dev-%04d", device),
			"sensor", fmt.Sprintf("s%d", i%sensorsPerDevice),
		)
	}
	seed := opts.Seed
	g.newSource = func(unit int) source {
		k := sensorKinds[unit%sensorsPerDevice%len(sensorKinds)]
		r := newRand(seed, unit)
		return &sensor{rng: r, walk: newWalk(r, k.lo, k.hi, k.decimals, k.maxStep, k.moveP)}
	}
	return g, nil
}

// sensor is the source of one Sensor series.
type sensor struct {
	rng  *rand.PCG
	walk walk
}

func (s *sensor) fill(vals [][]float64, n int) {
	v := vals[0][:n]
	for i := range v {
		v[i] = s.walk.next(s.rng)
	}
}
