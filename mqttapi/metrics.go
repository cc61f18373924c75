package mqttapi

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tributarydb/tributary/backend"
)

// meterName is the instrumentation scope of the adapter's instruments.
const meterName = "github.com/tributarydb/tributary/mqttapi"

// outcome is what became of a message: the outcome attribute of
// tributary.mqtt.messages.
type outcome uint8

// The outcomes.
const (
	outcomeStored    outcome = iota // every point stored
	outcomePartial                  // some points stored, some refused
	outcomeRefused                  // nothing stored: every point (or the payload) refused
	outcomeEmpty                    // a message without points (Sparkplug NDEATH, a null value)
	outcomeIgnored                  // a message type that carries no data (Sparkplug NCMD, STATE, ...)
	outcomeUnmatched                // a topic no subscription matches (a stale subscription of the session)
	outcomeDropped                  // a QoS 0 message that found the queue full
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"stored", "partial", "refused", "empty", "ignored", "unmatched", "dropped"}

// metrics are the adapter's instruments and the attribute sets they are
// recorded with, built once.
type metrics struct {
	messages  metric.Int64Counter
	points    metric.Int64Counter
	decode    metric.Int64Counter
	retries   metric.Int64Counter
	connects  metric.Int64Counter
	ackDelay  metric.Float64Histogram
	reg       metric.Registration
	msgAttr   [numOutcomes]metric.AddOption
	stored    metric.AddOption
	refused   metric.AddOption
	reasons   [numFormats][numReasons]metric.AddOption
	kinds     map[backend.Kind]metric.AddOption
	connOK    metric.AddOption
	connFail  metric.AddOption
	connected atomic.Bool
	pending   atomic.Int64 // messages received, not yet acknowledged or given up
}

// formatIndex numbers the formats for the attribute tables.
const (
	fmtLine = iota
	fmtJSON
	fmtSparkplug
	numFormats
)

func formatIndex(f Format) int {
	switch f {
	case FormatJSON:
		return fmtJSON
	case FormatSparkplugB:
		return fmtSparkplug
	}
	return fmtLine
}

func newMetrics(mp metric.MeterProvider) (*metrics, error) {
	meter := mp.Meter(meterName)
	m := &metrics{}
	var errs []error
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	m.messages = counter("tributary.mqtt.messages", "{message}", "MQTT messages received, by outcome (stored, partial, refused, empty, ignored, unmatched, dropped).")
	m.points = counter("tributary.mqtt.points", "{point}", "Points of MQTT messages, by outcome: stored, or refused (by the decoder or the node).")
	m.decode = counter("tributary.mqtt.decode.errors", "{error}", "Parts of MQTT messages the decoders refused, by format and reason.")
	m.retries = counter("tributary.mqtt.write.retries", "{retry}", "Writes of MQTT messages retried because the node refused them for now, by kind (overloaded, unavailable, timeout).")
	m.connects = counter("tributary.mqtt.connections", "{attempt}", "Connection attempts to the MQTT broker, by result (ok, failed).")
	var err error
	m.ackDelay, err = meter.Float64Histogram("tributary.mqtt.ack.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from receiving an MQTT message to acknowledging it to the broker (decode, write, fsync)."))
	errs = append(errs, err)
	connected, err := meter.Int64ObservableGauge("tributary.mqtt.connected", metric.WithDescription("1 while connected to the MQTT broker, else 0."))
	errs = append(errs, err)
	pending, err := meter.Int64ObservableGauge("tributary.mqtt.pending", metric.WithUnit("{message}"),
		metric.WithDescription("MQTT messages received and not yet acknowledged to the broker."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("mqtt metrics: %w", err)
	}
	m.reg, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		v := int64(0)
		if m.connected.Load() {
			v = 1
		}
		o.ObserveInt64(connected, v)
		o.ObserveInt64(pending, m.pending.Load())
		return nil
	}, connected, pending)
	if err != nil {
		return nil, fmt.Errorf("mqtt metrics: %w", err)
	}
	attr := func(kv ...attribute.KeyValue) metric.AddOption {
		return metric.WithAttributeSet(attribute.NewSet(kv...))
	}
	for i, n := range outcomeNames {
		m.msgAttr[i] = attr(attribute.String("outcome", n))
	}
	m.stored, m.refused = attr(attribute.String("outcome", "stored")), attr(attribute.String("outcome", "refused"))
	for f, fn := range []Format{FormatLineProtocol, FormatJSON, FormatSparkplugB} {
		for r, rn := range reasonNames {
			m.reasons[f][r] = attr(attribute.String("format", string(fn)), attribute.String("reason", rn))
		}
	}
	m.kinds = map[backend.Kind]metric.AddOption{
		backend.KindOverloaded:  attr(attribute.String("kind", "overloaded")),
		backend.KindUnavailable: attr(attribute.String("kind", "unavailable")),
		backend.KindTimeout:     attr(attribute.String("kind", "timeout")),
	}
	m.connOK, m.connFail = attr(attribute.String("result", "ok")), attr(attribute.String("result", "failed"))
	return m, nil
}

func (m *metrics) close() {
	if m.reg != nil {
		_ = m.reg.Unregister()
	}
}

func (m *metrics) message(o outcome) { m.messages.Add(context.Background(), 1, m.msgAttr[o]) }

func (m *metrics) ack(received time.Time, now time.Time) {
	m.ackDelay.Record(context.Background(), now.Sub(received).Seconds())
}

func (m *metrics) retry(k backend.Kind) {
	opt, ok := m.kinds[k]
	if !ok {
		opt = m.kinds[backend.KindUnavailable]
	}
	m.retries.Add(context.Background(), 1, opt)
}

func (m *metrics) decoded(f Format, r *result) {
	for why, n := range r.errs {
		if n > 0 {
			m.decode.Add(context.Background(), int64(n), m.reasons[formatIndex(f)][why])
		}
	}
}
