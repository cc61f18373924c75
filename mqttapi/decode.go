package mqttapi

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// reason is why a message, or part of one, was not turned into points:
// the reason attribute of tributary.mqtt.decode.errors.
type reason uint8

// The reasons.
const (
	reasonTooLarge        reason = iota // payload over MaxPayloadBytes
	reasonSyntax                        // the payload is not the subscription's format
	reasonBadLine                       // a line protocol line was refused
	reasonTooManyPoints                 // more than MaxPointsPerMessage points
	reasonTooManySeries                 // more series than the line protocol limit
	reasonInvalidSeries                 // labels break the series rules or limits
	reasonBadValue                      // a value that is not a number or boolean
	reasonBadTimestamp                  // a timestamp that cannot be read or converted
	reasonMissingField                  // a configured field is absent
	reasonUnknownAlias                  // a Sparkplug alias no BIRTH defined
	reasonUnsupportedType               // a Sparkplug metric of a type that is not stored
	reasonBadTopic                      // a topic the format cannot read (Sparkplug)
	numReasons
)

var reasonNames = [numReasons]string{
	"too_large", "syntax", "bad_line", "too_many_points", "too_many_series", "invalid_series",
	"bad_value", "bad_timestamp", "missing_field", "unknown_alias", "unsupported_type", "bad_topic",
}

func (r reason) String() string { return reasonNames[r] }

// inbound is what a decoder reads of one message.
type inbound struct {
	topic      string
	payload    []byte
	caps       []capture // the subscription's captured topic levels
	receivedMs int64     // the default timestamp
}

// decoder turns one message of a subscription into points. A decoder is
// used by the ingest goroutine only.
type decoder interface {
	decode(in *inbound, r *result)
}

// result is what a decoder made of one message: batches owned by the
// result (nothing in them aliases the payload or a decoder's buffers),
// and what it refused.
type result struct {
	lim       labels.Limits
	maxPoints int
	base      []labels.Label // static labels, then topic captures

	batches  []model.Batch
	index    map[string]int // series key -> batch
	points   int
	refused  int             // points (lines, metrics) refused
	errs     [numReasons]int // refusals by reason
	first    string          // the first refusal, for the log
	firstWhy reason          // and its reason
	full     bool            // maxPoints reached: the message is refused whole
	ignored  bool            // a message type that carries no data
}

// reset prepares r for a message of a subscription with the given base
// labels.
func (r *result) reset(lim labels.Limits, maxPoints int, base []labels.Label) {
	*r = result{lim: lim, maxPoints: maxPoints, base: base}
}

// refuse records n refused points (lines, metrics) for why, one event.
func (r *result) refuse(why reason, n int, format string, args ...any) {
	r.refuseMany(why, 1, n, format, args...)
}

// refuseMany records n refused points (lines, metrics) for why, counted
// as events decode errors.
func (r *result) refuseMany(why reason, events, n int, format string, args ...any) {
	r.refused += n
	r.errs[why] += events
	if r.first == "" {
		r.first, r.firstWhy = fmt.Sprintf(format, args...), why
	}
}

// refuseAll drops what r holds and refuses the message whole.
func (r *result) refuseAll(why reason, format string, args ...any) {
	r.refuseAllMore(why, 0, format, args...)
}

// refuseAllMore is refuseAll counting more points refused than r holds.
func (r *result) refuseAllMore(why reason, more int, format string, args ...any) {
	n := r.points + r.refused + more
	r.batches, r.index, r.points, r.refused = nil, nil, 0, 0
	r.refuse(why, max(n, 1), format, args...)
	r.full = true
}

// room reports whether n more points fit in the message; when they do
// not, the message is refused whole (too many points).
func (r *result) room(n int) bool {
	if r.full {
		return false
	}
	if r.points+n > r.maxPoints {
		r.refuseAllMore(reasonTooManyPoints, n, "more than %d points in one message", r.maxPoints)
		return false
	}
	return true
}

// add appends one point of the series made of r's base labels, own (the
// message's labels for this point, which win over the base) and the
// metric name. It returns false when the message is refused whole
// (too many points).
func (r *result) add(name string, own []labels.Label, ts int64, v float64) bool {
	if !r.room(1) {
		return false
	}
	if i := r.batchFor(name, own, 1); i >= 0 {
		b := &r.batches[i]
		b.Ts, b.Vs = append(b.Ts, ts), append(b.Vs, v)
		r.points++
	}
	return true
}

// addAll appends points of one series, as add does.
func (r *result) addAll(name string, own []labels.Label, ts []int64, vs []float64) bool {
	if !r.room(len(ts)) {
		return false
	}
	if i := r.batchFor(name, own, len(ts)); i >= 0 {
		b := &r.batches[i]
		b.Ts, b.Vs = append(b.Ts, ts...), append(b.Vs, vs...)
		r.points += len(ts)
	}
	return true
}

// batchFor returns the index of the batch of a series, made on first
// use, or -1 when the series is invalid (its n points are refused).
func (r *result) batchFor(name string, own []labels.Label, n int) int {
	key := seriesKey(name, r.base, own)
	if i, ok := r.index[key]; ok {
		return i
	}
	ls, err := r.series(name, own)
	if err != nil {
		r.refuse(reasonInvalidSeries, n, "%v", err)
		return -1
	}
	if r.index == nil {
		r.index = map[string]int{}
	}
	r.index[key] = len(r.batches)
	r.batches = append(r.batches, model.Batch{Labels: ls})
	return len(r.batches) - 1
}

// series builds and validates the label set of a point.
func (r *result) series(name string, own []labels.Label) (labels.Labels, error) {
	pairs := make([]labels.Label, 0, len(r.base)+len(own)+1)
	pairs = append(pairs, labels.Label{Name: labels.MetricName, Value: strings.Clone(name)})
	for _, l := range own {
		pairs = append(pairs, labels.Label{Name: strings.Clone(l.Name), Value: strings.Clone(l.Value)})
	}
	for _, l := range r.base {
		if !slices.ContainsFunc(pairs, func(p labels.Label) bool { return p.Name == l.Name }) {
			pairs = append(pairs, l)
		}
	}
	if lim := r.lim.MaxLabels; lim > 0 && len(pairs) > lim {
		return nil, fmt.Errorf("%w: %d labels, limit is %d", labels.ErrInvalid, len(pairs), lim)
	}
	for _, l := range pairs {
		if err := checkLabelValue(l.Name, l.Value); err != nil {
			return nil, err
		}
	}
	return labels.New(pairs, r.lim)
}

// seriesKey identifies a point's series within one message.
func seriesKey(name string, base, own []labels.Label) string {
	var b strings.Builder
	b.WriteString(name)
	for _, set := range [][]labels.Label{own, base} {
		b.WriteByte(0xff)
		for _, l := range set {
			b.WriteString(l.Name)
			b.WriteByte(0)
			b.WriteString(l.Value)
			b.WriteByte(0)
		}
	}
	return b.String()
}
