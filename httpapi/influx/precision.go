package influx

import (
	"fmt"
	"math"
)

// Precision is the unit of the timestamps in a body.
type Precision uint8

// The precisions line protocol timestamps may be written in.
const (
	Nanosecond Precision = iota
	Microsecond
	Millisecond
	Second
	Minute
	Hour
)

var precisionNames = [...]string{"ns", "us", "ms", "s", "m", "h"}

func (p Precision) String() string {
	if int(p) < len(precisionNames) {
		return precisionNames[p]
	}
	return fmt.Sprintf("Precision(%d)", uint8(p))
}

// ParsePrecision parses the precision query parameter. The v1 API (v2 =
// false) accepts n, ns, u, us, µ, ms, s, m and h; the v2 API accepts ns,
// us, ms and s. Both read an empty string as nanoseconds.
func ParsePrecision(s string, v2 bool) (Precision, error) {
	if v2 {
		switch s {
		case "", "ns":
			return Nanosecond, nil
		case "us":
			return Microsecond, nil
		case "ms":
			return Millisecond, nil
		case "s":
			return Second, nil
		}
		return 0, fmt.Errorf("invalid precision %q: the v2 API accepts ns, us, ms or s", s)
	}
	switch s {
	case "", "n", "ns":
		return Nanosecond, nil
	case "u", "us", "µ", "μ": // micro sign U+00B5 and Greek mu U+03BC
		return Microsecond, nil
	case "ms":
		return Millisecond, nil
	case "s":
		return Second, nil
	case "m":
		return Minute, nil
	case "h":
		return Hour, nil
	}
	return 0, fmt.Errorf("invalid precision %q: the v1 API accepts n, ns, u, us, µ, ms, s, m or h", s)
}

// ToMillis converts a timestamp in precision p to milliseconds since the
// epoch. Finer precisions are truncated towards the earlier millisecond
// (floor division, so -1ns becomes -1ms, not 0). Coarser precisions are
// multiplied; ok is false when the result does not fit an int64.
func (p Precision) ToMillis(v int64) (ms int64, ok bool) {
	switch p {
	case Nanosecond:
		return floorDiv(v, 1_000_000), true
	case Microsecond:
		return floorDiv(v, 1_000), true
	case Millisecond:
		return v, true
	case Second:
		return mulCheck(v, 1_000)
	case Minute:
		return mulCheck(v, 60_000)
	case Hour:
		return mulCheck(v, 3_600_000)
	}
	return 0, false
}

func floorDiv(v, d int64) int64 {
	q := v / d
	if v%d != 0 && v < 0 {
		q--
	}
	return q
}

func mulCheck(v, f int64) (int64, bool) {
	if v > math.MaxInt64/f || v < math.MinInt64/f {
		return 0, false
	}
	return v * f, true
}
