package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// CANIntervalMs is the CAN-bus sampling interval: 10 Hz.
const CANIntervalMs = 100

// Channel describes one CAN-bus channel.
type Channel struct {
	// Name is the metric name of the channel's series.
	Name string
	// Unit is the physical unit of the values ("km/h", "°C", ...).
	Unit string
	// Scale is the number of quanta per unit: values are multiples of
	// 1/Scale. 10 means one fractional digit; 256 means steps of 1/256, as
	// raw CAN signals often have.
	Scale float64
}

// Indices of the channels in CANChannels.
const (
	chSpeed = iota
	chRPM
	chGear
	chThrottle
	chBrake
	chEngineTorque
	chWheelTorque
	chBoost
	chAccelLong
	chAccelLat
	chYawRate
	chSteering
	chHeading
	chLat
	chLon
	chAltitude
	chCoolant
	chOil
	chIntake
	chExternal
	chFuel
	chBattery
	numChannels
)

var canChannels = [numChannels]Channel{
	chSpeed:        {"speed", "km/h", 100},
	chRPM:          {"rpm", "rpm", 1},
	chGear:         {"gear", "", 1},
	chThrottle:     {"throttle", "%", 10},
	chBrake:        {"brake_pedal", "%", 10},
	chEngineTorque: {"engine_torque", "N·m", 1},
	chWheelTorque:  {"wheel_torque", "N·m", 1},
	chBoost:        {"boost_pressure", "bar", 100},
	chAccelLong:    {"accel_longitudinal", "g", 256},
	chAccelLat:     {"accel_lateral", "g", 256},
	chYawRate:      {"yaw_rate", "°/s", 100},
	chSteering:     {"steering_angle", "°", 10},
	chHeading:      {"heading", "°", 10},
	chLat:          {"gps_lat", "°", 1e6},
	chLon:          {"gps_lon", "°", 1e6},
	chAltitude:     {"gps_altitude", "m", 10},
	chCoolant:      {"coolant_temp", "°C", 1},
	chOil:          {"engine_oil_temp", "°C", 1},
	chIntake:       {"intake_air_temp", "°C", 1},
	chExternal:     {"external_temp", "°C", 2},
	chFuel:         {"fuel_level", "%", 10},
	chBattery:      {"battery_voltage", "V", 100},
}

// CANChannels returns the 22 channels of the CANBus workload, in the order
// their series appear for each vehicle.
func CANChannels() []Channel { return canChannels[:] }

// CANBusOptions configures the CANBus workload.
type CANBusOptions struct {
	// Vehicles is the number of vehicles; each has 22 series.
	Vehicles int
	// StartMs is the timestamp of the first sample of every series.
	StartMs int64
	// Seed selects the random streams; equal options give equal samples.
	Seed uint64
}

// Validate reports whether the options describe a workload.
func (o CANBusOptions) Validate() error {
	if o.Vehicles <= 0 {
		return errors.New("vehicles must be positive")
	}
	return nil
}

// VehicleID is the value of the "vehicle" label of vehicle i (0-based).
func VehicleID(i int) string { return fmt.Sprintf("car-%02d", i+1) }

// NewCANBus returns the CAN-bus workload of the Warp 10 Raspberry Pi
// benchmark: 22 channels of a car's CAN bus logged at 10 Hz (speed, rpm,
// throttle, coolant temperature, fuel level, GPS position, ...; see
// CANChannels), for opts.Vehicles vehicles, with labels
//
//	{__name__="speed", vehicle="car-01"}
//
// Each vehicle is a small driving model — it accelerates, brakes, shifts
// gears and turns — so the channels move together plausibly (rpm follows
// speed and gear, the GPS position follows speed and heading), and each
// channel is quantised to the resolution a real CAN signal has.
func NewCANBus(opts CANBusOptions) (*Generator, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("canbus workload: %w", err)
	}
	g := &Generator{
		name:          "canbus",
		startMs:       opts.StartMs,
		intervalMs:    CANIntervalMs,
		seriesPerUnit: numChannels,
		series:        make([]*tributaryv1.Series, 0, opts.Vehicles*numChannels),
	}
	for v := range opts.Vehicles {
		for _, ch := range canChannels {
			g.series = append(g.series, series(MetricName, ch.Name, "vehicle", VehicleID(v)))
		}
	}
	seed := opts.Seed
	g.newSource = func(unit int) source { return newVehicle(newRand(seed, unit)) }
	return g, nil
}

// Overall drive ratios and engine rpm per km/h for gears 0 (neutral) to 6.
var (
	gearDriveRatio = [...]float64{0, 14.5, 8.6, 5.9, 4.4, 3.6, 2.9}
	gearRPMPerKmh  = [...]float64{0, 120, 70, 48, 36, 29, 24}
)

// vehicle is the source of one vehicle's 22 channels: a simple driving
// model stepped at 10 Hz.
type vehicle struct {
	rng *rand.PCG

	accel, accelTarget float64 // m/s²
	speed              float64 // km/h
	yawRate            float64 // °/s, before scaling by speed
	heading            float64 // °
	lat, lon, alt      float64 // °, °, m
	coolant, oil, ext  float64 // °C
	fuel               float64 // %
	battery            float64 // V
}

func newVehicle(r *rand.PCG) *vehicle {
	return &vehicle{
		rng:     r,
		speed:   90 * uniform(r),
		heading: 360 * uniform(r),
		// Around Dijon, where the Warp 10 article's car was logged.
		lat:     47.30 + 0.15*uniform(r),
		lon:     4.85 + 0.20*uniform(r),
		alt:     220 + 80*uniform(r),
		coolant: 86 + 6*uniform(r),
		oil:     88 + 8*uniform(r),
		ext:     5 + 20*uniform(r),
		fuel:    30 + 65*uniform(r),
		battery: 14.1,
	}
}

func (v *vehicle) fill(vals [][]float64, n int) {
	const dt = CANIntervalMs / 1000.0
	r := v.rng
	for i := 0; i < n; i++ {
		// Driver: pick a new acceleration every few seconds and ease
		// towards it; keep to 25..110 km/h mostly, and pull away again
		// some seconds after stopping.
		if uniform(r) < 0.02 {
			v.accelTarget = -1.2 + 2.4*uniform(r)
			switch {
			case v.speed > 110:
				v.accelTarget = -0.6
			case v.speed < 25:
				v.accelTarget += 0.6
			}
		}
		if v.speed == 0 && v.accelTarget <= 0 && uniform(r) < 0.01 {
			v.accelTarget = 0.5 + 1.3*uniform(r)
		}
		v.accel += 0.1*(v.accelTarget-v.accel) + 0.05*noise(r)
		v.speed += v.accel * dt * 3.6
		if v.speed <= 0 {
			v.speed, v.accel = 0, max(v.accel, 0)
		}
		if v.speed >= 130 {
			v.speed, v.accel, v.accelTarget = 130, min(v.accel, 0), -0.6
		}

		// Steering: a mean-reverting yaw rate, damped at low speed.
		v.yawRate = clamp(v.yawRate-0.05*v.yawRate+noise(r), -20, 20)
		yaw := v.yawRate * min(1, v.speed/20)
		v.heading = math.Mod(v.heading+yaw*dt+360, 360)
		metres := v.speed / 3.6 * dt
		rad := v.heading * math.Pi / 180
		v.lat += metres * math.Cos(rad) / 111320
		v.lon += metres * math.Sin(rad) / (111320 * math.Cos(v.lat*math.Pi/180))
		v.alt = clamp(v.alt+0.02*noise(r)*v.speed/10, 100, 600)

		gear := gearFor(v.speed)
		rpm := 800 + 20*noise(r)
		if gear > 0 {
			rpm = max(v.speed*gearRPMPerKmh[gear]+30*noise(r), 900)
		}
		throttle := clamp(0.18*v.speed+28*v.accel+noise(r), 0, 100)
		brake := 0.0
		if v.accel < -0.6 {
			brake = clamp(35*(-v.accel-0.6), 0, 100)
		}
		torque := clamp(3.4*throttle-15+2*noise(r), -40, 340)

		// Slow thermal and electrical state.
		v.coolant = clamp(v.coolant+0.01*(90-v.coolant)+0.05*noise(r), 80, 104)
		v.oil = clamp(v.oil+0.005*(92+rpm/1000-v.oil)+0.05*noise(r), 80, 120)
		v.ext = clamp(v.ext+0.002*noise(r), -20, 40)
		v.battery = clamp(v.battery+0.02*(14.1-v.battery)+0.01*noise(r), 13.6, 14.6)
		litresPerHour := 0.8 + 0.12*throttle
		v.fuel -= litresPerHour / 3600 * dt / 55 * 100 // 55 l tank
		if v.fuel < 5 {
			v.fuel = 95 // refuelled
		}

		out := [numChannels]float64{
			chSpeed:        v.speed,
			chRPM:          rpm,
			chGear:         float64(gear),
			chThrottle:     throttle,
			chBrake:        brake,
			chEngineTorque: torque,
			chWheelTorque:  torque * gearDriveRatio[gear],
			chBoost:        clamp((throttle-20)/80*1.3, 0, 1.4),
			chAccelLong:    v.accel / 9.81,
			chAccelLat:     v.speed / 3.6 * (yaw * math.Pi / 180) / 9.81,
			chYawRate:      yaw,
			chSteering:     clamp(yaw*300/(v.speed+10), -540, 540),
			chHeading:      v.heading,
			chLat:          v.lat,
			chLon:          v.lon,
			chAltitude:     v.alt,
			chCoolant:      v.coolant,
			chOil:          v.oil,
			chIntake:       v.ext + 8 - 0.03*v.speed + noise(r),
			chExternal:     v.ext,
			chFuel:         v.fuel,
			chBattery:      v.battery,
		}
		for c := range out {
			vals[c][i] = quantize(out[c], canChannels[c].Scale)
		}
	}
}

func gearFor(kmh float64) int {
	switch {
	case kmh < 1:
		return 0
	case kmh < 15:
		return 1
	case kmh < 30:
		return 2
	case kmh < 50:
		return 3
	case kmh < 70:
		return 4
	case kmh < 95:
		return 5
	default:
		return 6
	}
}

func clamp(x, lo, hi float64) float64 { return max(lo, min(x, hi)) }
