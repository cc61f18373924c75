package telemetry

import "go.opentelemetry.io/otel/metric"

// Instruments creates a component's instruments on one meter, each with a
// unit and a description, so that the component checks one error (Err,
// the first one) after creating them all. It keeps the observable ones
// for the registration of the callback that observes them (Observables).
//
// An Instruments is not safe for concurrent use; a component fills one
// while it starts.
type Instruments struct {
	meter       metric.Meter
	err         error
	observables []metric.Observable
}

// NewInstruments returns an Instruments creating on meter.
func NewInstruments(meter metric.Meter) *Instruments { return &Instruments{meter: meter} }

// Meter is the meter the instruments are created on.
func (in *Instruments) Meter() metric.Meter { return in.meter }

// Err returns the first error of a creation, or nil.
func (in *Instruments) Err() error { return in.err }

// Observables returns the observable instruments created.
func (in *Instruments) Observables() []metric.Observable { return in.observables }

// Int64Gauge creates an observable int64 gauge.
func (in *Instruments) Int64Gauge(name, unit, desc string) metric.Int64ObservableGauge {
	g, err := in.meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return observable(in, g, err)
}

// Int64Counter creates an observable int64 counter.
func (in *Instruments) Int64Counter(name, unit, desc string) metric.Int64ObservableCounter {
	c, err := in.meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return observable(in, c, err)
}

// Float64Gauge creates an observable float64 gauge.
func (in *Instruments) Float64Gauge(name, unit, desc string) metric.Float64ObservableGauge {
	g, err := in.meter.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return observable(in, g, err)
}

// Counter creates a synchronous int64 counter.
func (in *Instruments) Counter(name, unit, desc string) metric.Int64Counter {
	c, err := in.meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	in.keep(err)
	return c
}

// Histogram creates a synchronous float64 histogram.
func (in *Instruments) Histogram(name, unit, desc string) metric.Float64Histogram {
	h, err := in.meter.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc))
	in.keep(err)
	return h
}

// keep keeps err if it is the first error.
func (in *Instruments) keep(err error) {
	if in.err == nil {
		in.err = err
	}
}

// observable keeps err and, when it is nil, o for the registration.
func observable[T metric.Observable](in *Instruments, o T, err error) T {
	in.keep(err)
	if err == nil {
		in.observables = append(in.observables, o)
	}
	return o
}
