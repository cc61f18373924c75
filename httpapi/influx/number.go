package influx

import (
	"math"
	"strconv"
	"unsafe"
)

// Reasons a field value is refused; the parser adds the field and token.
const (
	reasonEmptyValue = "has no value"
	reasonBadInt     = "is not a valid integer (want [-]digits followed by i)"
	reasonIntRange   = "is out of the int64 range"
	reasonBadUint    = "is not a valid unsigned integer (want digits followed by u)"
	reasonUintRange  = "is out of the uint64 range"
	reasonNaNInf     = "is NaN or Inf, which line protocol does not allow"
	reasonFloatRange = "is out of the float64 range"
	reasonBadValue   = "is not a number, an integer (suffix i), an unsigned integer (suffix u) or a boolean; string values must be double-quoted"
)

// parseValue parses an unquoted field value: a float, an integer (suffix
// i), an unsigned integer (suffix u) or a boolean. reason is "" on success.
func parseValue(tok []byte) (v float64, reason string) {
	if len(tok) == 0 {
		return 0, reasonEmptyValue
	}
	c := tok[0]
	if c == '-' || c == '.' || (c >= '0' && c <= '9') {
		switch tok[len(tok)-1] {
		case 'i':
			n, st := parseInt(tok[:len(tok)-1])
			return intValue(n, st, reasonIntRange, reasonBadInt)
		case 'u':
			n, st := parseUint(tok[:len(tok)-1])
			return intValue(n, st, reasonUintRange, reasonBadUint)
		}
		v, reason := parseFloat(tok)
		if reason == reasonBadValue && isNaNInf(tok) {
			reason = reasonNaNInf
		}
		return v, reason
	}
	switch string(tok) {
	case "t", "T", "true", "True", "TRUE":
		return 1, ""
	case "f", "F", "false", "False", "FALSE":
		return 0, ""
	}
	if isNaNInf(tok) {
		return 0, reasonNaNInf
	}
	return 0, reasonBadValue
}

// isNaNInf reports whether tok spells NaN or an infinity in any of the
// ways strconv.ParseFloat would accept.
func isNaNInf(tok []byte) bool {
	if len(tok) > 0 && (tok[0] == '+' || tok[0] == '-') {
		tok = tok[1:]
	}
	switch len(tok) {
	case 3, 8:
	default:
		return false
	}
	var low [8]byte
	for i, c := range tok {
		low[i] = c | 0x20
	}
	s := string(low[:len(tok)])
	return s == "nan" || s == "inf" || s == "infinity"
}

type numStatus uint8

const (
	numOK numStatus = iota
	numSyntax
	numRange
)

// intValue is the field value of an integer parsed with status st, or the
// reason it is refused: out of range, or not an integer (bad).
func intValue[T int64 | uint64](n T, st numStatus, outOfRange, bad string) (float64, string) {
	switch st {
	case numOK:
		return float64(n), ""
	case numRange:
		return 0, outOfRange
	}
	return 0, bad
}

// parseInt parses [-]digits into an int64.
func parseInt(b []byte) (int64, numStatus) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg = true
		b = b[1:]
	}
	u, st := parseUint(b)
	if st != numOK {
		return 0, st
	}
	if neg {
		if u > 1<<63 {
			return 0, numRange
		}
		return -int64(u), numOK // -(1<<63) wraps to MinInt64, as intended
	}
	if u > math.MaxInt64 {
		return 0, numRange
	}
	return int64(u), numOK
}

// parseUint parses digits into a uint64.
func parseUint(b []byte) (uint64, numStatus) {
	if len(b) == 0 {
		return 0, numSyntax
	}
	var u uint64
	for i, c := range b {
		d := c - '0'
		if d > 9 {
			return 0, numSyntax
		}
		if i >= 19 { // 19 digits always fit; past that check before growing
			if u > (math.MaxUint64-uint64(d))/10 {
				// keep scanning so "1x" style garbage is a syntax error
				for _, c := range b[i:] {
					if c-'0' > 9 {
						return 0, numSyntax
					}
				}
				return 0, numRange
			}
		}
		u = u*10 + uint64(d)
	}
	return u, numOK
}

// pow10 holds the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseFloat parses [-]digits[.digits][(e|E)[+-]digits] (at least one
// digit before or after the point). Plain decimals of up to 15 significant
// digits take an exact fast path (the mantissa and the power of ten are
// both exact, so one division rounds correctly); the rest go to
// strconv.ParseFloat.
func parseFloat(tok []byte) (float64, string) {
	i := 0
	neg := false
	if tok[0] == '-' {
		neg = true
		i = 1
	}
	var mant uint64
	digits, fracDigits := 0, 0
	sawDot, sawExp := false, false
	for ; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c >= '0' && c <= '9':
			if digits < 19 {
				mant = mant*10 + uint64(c-'0')
			}
			digits++
			if sawDot {
				fracDigits++
			}
		case c == '.' && !sawDot:
			sawDot = true
		case c == 'e' || c == 'E':
			if digits == 0 {
				return 0, reasonBadValue
			}
			sawExp = true
			j := i + 1
			if j < len(tok) && (tok[j] == '+' || tok[j] == '-') {
				j++
			}
			if j == len(tok) {
				return 0, reasonBadValue
			}
			for ; j < len(tok); j++ {
				if tok[j] < '0' || tok[j] > '9' {
					return 0, reasonBadValue
				}
			}
			i = len(tok)
		default:
			return 0, reasonBadValue
		}
	}
	if digits == 0 {
		return 0, reasonBadValue
	}
	if !sawExp && digits <= 15 {
		v := float64(mant) / pow10[fracDigits]
		if neg {
			v = -v
		}
		return v, ""
	}
	v, err := strconv.ParseFloat(unsafe.String(&tok[0], len(tok)), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, reasonFloatRange
	}
	return v, ""
}
