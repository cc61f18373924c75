package opentsdb

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// OpenTSDB tells seconds from milliseconds in a put by magnitude: a value
// that fits in 32 unsigned bits is seconds, anything larger milliseconds,
// up to 13 digits.
const (
	maxSecondsTimestamp = 1<<32 - 1
	maxMsTimestamp      = 9_999_999_999_999
)

// putTimestampMs converts an integer put timestamp to milliseconds.
func putTimestampMs(v int64) (int64, error) {
	switch {
	case v <= 0:
		return 0, fmt.Errorf("timestamp %d must be positive (seconds or milliseconds since the epoch)", v)
	case v <= maxSecondsTimestamp:
		return v * 1000, nil
	case v <= maxMsTimestamp:
		return v, nil
	}
	return 0, fmt.Errorf("timestamp %d is too large: use seconds (up to 10 digits) or milliseconds (13 digits) since the epoch", v)
}

// parseTimestamp parses a put timestamp written as decimal text:
// "1700000000" (seconds), "1700000000123" (milliseconds) or
// "1700000000.123" (seconds with up to three decimals).
func parseTimestamp(s string) (int64, error) {
	if s == "" {
		return 0, errors.New("timestamp is empty")
	}
	whole, frac, dot := strings.Cut(s, ".")
	if !httpapi.IsDigits(whole) || dot && (len(frac) == 0 || !httpapi.IsDigits(frac)) {
		if len(s) > 0 && s[0] == '-' {
			return 0, fmt.Errorf("timestamp %.32q must be positive (seconds or milliseconds since the epoch)", s)
		}
		return 0, fmt.Errorf("timestamp %.32q is not a number of seconds or milliseconds", s)
	}
	if len(whole) > 13 {
		return 0, fmt.Errorf("timestamp %.32q is too large: use seconds (up to 10 digits) or milliseconds (13 digits) since the epoch", s)
	}
	v, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("timestamp %.32q: %v", s, err)
	}
	if !dot {
		return putTimestampMs(v)
	}
	if len(frac) > 3 {
		return 0, fmt.Errorf("timestamp %.32q: at most 3 decimals (milliseconds) are allowed", s)
	}
	if v > maxSecondsTimestamp {
		return 0, fmt.Errorf("timestamp %.32q: a timestamp with decimals must be in seconds", s)
	}
	ms, _ := strconv.ParseInt(frac+"00"[:3-len(frac)], 10, 64)
	if v == 0 && ms == 0 {
		return 0, fmt.Errorf("timestamp %.32q must be positive (seconds or milliseconds since the epoch)", s)
	}
	return v*1000 + ms, nil
}

// parseValue parses a put value: a decimal integer or floating-point
// number ("42", "-1.5", "2e-3"). NaN and infinities are refused, as
// OpenTSDB does, and so are numbers beyond the float64 range.
func parseValue(s string) (float64, error) {
	if !isDecimal(s) {
		return 0, fmt.Errorf("value %.32q is not a number", s)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, fmt.Errorf("value %.32q is out of range", s)
	}
	return v, nil
}

// isDecimal reports whether s is [+-]?(digits[.digits?]|.digits)([eE][+-]?digits)?.
func isDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(s)
}

// batcher groups validated points into one model.Batch per series and
// remembers where each point came from (a datapoint index or a line
// number), so that rejections can be reported against the input. It is
// not safe for concurrent use.
type batcher struct {
	// maxSeries bounds the batches; add refuses a new series past it with
	// errTooManySeries (0: no limit).
	maxSeries int
	index     map[string]int
	batches   []model.Batch
	origin    [][]int64
	points    int
	// labelBytes counts the bytes of the label strings the batches hold.
	labelBytes int
	key        []byte
	ls         labels.Labels
}

// errTooManySeries is returned by batcher.add past its maxSeries.
var errTooManySeries = errors.New("too many series")

// add appends one point. tags are node labels (already mapped and
// validated one by one); add refuses two tags that map to the same label
// name. The batch of a new series gets its own copy of the label
// strings, so that it never keeps the input they were cut from (a whole
// telnet line) alive.
func (b *batcher) add(metric string, tags []labels.Label, tMs int64, v float64, origin int64) error {
	ls := append(b.ls[:0], labels.Label{Name: labels.MetricName, Value: metric})
	ls = append(ls, tags...)
	slices.SortFunc(ls, func(x, y labels.Label) int { return strings.Compare(x.Name, y.Name) })
	for i := 1; i < len(ls); i++ {
		if ls[i].Name == ls[i-1].Name {
			b.ls = ls
			return fmt.Errorf("duplicate tag key: two tags map to the label name %q ('/' and non-ASCII letters in tag keys become '_')", ls[i].Name)
		}
	}
	b.ls = ls
	b.key = ls.AppendKey(b.key[:0])
	i, ok := b.index[string(b.key)]
	if !ok {
		if b.maxSeries > 0 && len(b.batches) >= b.maxSeries {
			return errTooManySeries
		}
		if b.index == nil {
			b.index = map[string]int{}
		}
		i = len(b.batches)
		b.index[string(b.key)] = i
		own, n := ownLabels(ls)
		b.batches = append(b.batches, model.Batch{Labels: own})
		b.origin = append(b.origin, nil)
		b.labelBytes += n
	}
	bt := &b.batches[i]
	bt.Ts = append(bt.Ts, tMs)
	bt.Vs = append(bt.Vs, v)
	b.origin[i] = append(b.origin[i], origin)
	b.points++
	return nil
}

// ownLabels copies ls and its strings, these into one allocation; it
// returns the copy and the bytes of its strings.
func ownLabels(ls labels.Labels) ([]labels.Label, int) {
	n := 0
	for _, l := range ls {
		n += len(l.Name) + len(l.Value)
	}
	var sb strings.Builder
	sb.Grow(n)
	for _, l := range ls {
		sb.WriteString(l.Name)
		sb.WriteString(l.Value)
	}
	all := sb.String()
	out := make([]labels.Label, len(ls))
	off := 0
	for i, l := range ls {
		out[i].Name = all[off : off+len(l.Name)]
		off += len(l.Name)
		out[i].Value = all[off : off+len(l.Value)]
		off += len(l.Value)
	}
	return out, n
}

// take returns the batches and origins collected so far and empties b.
func (b *batcher) take() ([]model.Batch, [][]int64) {
	batches, origin := b.batches, b.origin
	b.batches, b.origin, b.points, b.labelBytes = nil, nil, 0, 0
	clear(b.index)
	return batches, origin
}

// rejected is one point (or a whole series batch) the node refused,
// mapped back to the input.
type rejected struct {
	origins []int64 // the input positions concerned
	msg     string
}

// mapRejections maps the node's rejections onto input positions. The node
// details at most model.MaxRejectionDetails rejections; the counts in the
// WriteResult stay exact.
func mapRejections(res model.WriteResult, origin [][]int64) []rejected {
	out := make([]rejected, 0, len(res.Rejections))
	for _, r := range res.Rejections {
		if r.BatchIndex < 0 || r.BatchIndex >= len(origin) {
			continue
		}
		o := origin[r.BatchIndex]
		rj := rejected{msg: stripBatchPrefix(r.Message)}
		switch {
		case r.PointIndex < 0:
			rj.origins = o
		case r.PointIndex < len(o):
			rj.origins = o[r.PointIndex : r.PointIndex+1]
		}
		out = append(out, rj)
	}
	return out
}

// stripBatchPrefix removes the node's "batch N point M: " prefix, which
// refers to the internal batching rather than to the client's input.
func stripBatchPrefix(msg string) string {
	if !strings.HasPrefix(msg, "batch ") {
		return msg
	}
	if _, rest, ok := strings.Cut(msg, ": "); ok {
		return rest
	}
	return msg
}
