package prom

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	pmodel "github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// Time bounds of the API: the extremes Prometheus accepts for optional time
// ranges. They are far enough from the int64 millisecond limits that no
// arithmetic on them overflows.
var (
	minTime = time.Unix(math.MinInt64/1000+62135596801, 0).UTC()
	maxTime = time.Unix(math.MaxInt64/1000-62135596801, 999999999).UTC()

	minTimeText = minTime.Format(time.RFC3339Nano)
	maxTimeText = maxTime.Format(time.RFC3339Nano)
)

// parseTime accepts a Unix timestamp in seconds with an optional fraction
// (kept to the millisecond) or an RFC 3339 time, as the Prometheus API does.
func parseTime(s string) (time.Time, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if math.IsNaN(f) || f < float64(minTime.Unix()) || f > float64(maxTime.Unix()) {
			return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp: out of range", s)
		}
		sec, frac := math.Modf(f)
		ms := math.Round(frac * 1000)
		return time.Unix(int64(sec), int64(ms)*int64(time.Millisecond)).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		if t.Before(minTime) || t.After(maxTime) {
			return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp: out of range", s)
		}
		return t, nil
	}
	// time.Parse handles only four-digit years; the API's own bounds
	// have more.
	switch s {
	case minTimeText:
		return minTime, nil
	case maxTimeText:
		return maxTime, nil
	}
	return time.Time{}, fmt.Errorf("cannot parse %q to a valid timestamp (want Unix seconds or RFC 3339)", s)
}

// parseDuration accepts float seconds ("15", "0.5") or a Prometheus
// duration ("1m30s", "5m", "1d").
func parseDuration(s string) (time.Duration, error) {
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		ns := f * float64(time.Second)
		if math.IsNaN(ns) || ns >= math.MaxInt64 || ns <= math.MinInt64 {
			return 0, fmt.Errorf("cannot parse %q to a valid duration: it overflows int64 nanoseconds", s)
		}
		return time.Duration(ns), nil
	}
	if d, err := pmodel.ParseDuration(s); err == nil {
		return time.Duration(d), nil
	}
	return 0, fmt.Errorf("cannot parse %q to a valid duration (want seconds or a duration like 1m30s)", s)
}

// parseLimit reads an optional non-negative limit; 0 means none.
func parseLimit(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("cannot parse %q to a valid limit", s)
	}
	if n < 0 {
		return 0, errors.New("limit must be non-negative")
	}
	return n, nil
}

// parseMatchers parses match[] selectors; each set must have a matcher
// that does not match the empty string, so it cannot select every series.
func parseMatchers(sels []string) ([][]*labels.Matcher, error) {
	sets := make([][]*labels.Matcher, 0, len(sels))
	for _, s := range sels {
		ms, err := parser.ParseMetricSelector(s)
		if err != nil {
			return nil, err
		}
		ok := false
		for _, m := range ms {
			if !m.Matches("") {
				ok = true
				break
			}
		}
		if !ok {
			return nil, fmt.Errorf("match[] %q must contain at least one non-empty matcher", s)
		}
		sets = append(sets, ms)
	}
	return sets, nil
}
