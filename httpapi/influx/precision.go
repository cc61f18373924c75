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
		if p, ok := v2Precisions[s]; ok {
			return p, nil
		}
		return 0, fmt.Errorf("invalid precision %q: the v2 API accepts ns, us, ms or s", s)
	}
	if p, ok := v1Precisions[s]; ok {
		return p, nil
	}
	return 0, fmt.Errorf("invalid precision %q: the v1 API accepts n, ns, u, us, µ, ms, s, m or h", s)
}

// The precision names of each API.
var (
	v1Precisions = map[string]Precision{
		"": Nanosecond, "n": Nanosecond, "ns": Nanosecond,
		"u": Microsecond, "us": Microsecond, "µ": Microsecond, "μ": Microsecond, // micro sign U+00B5 and Greek mu U+03BC
		"ms": Millisecond, "s": Second, "m": Minute, "h": Hour,
	}
	v2Precisions = map[string]Precision{"": Nanosecond, "ns": Nanosecond, "us": Microsecond, "ms": Millisecond, "s": Second}
)

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
