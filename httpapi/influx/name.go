package influx

import (
	"unicode"
	"unicode/utf8"
)

// Which characters a backslash escapes in each element. A backslash before
// any other character is literal.
const (
	escMeasurement = ", \\"
	escKey         = ",= \\" // tag keys, tag values and field keys
)

// unescape appends raw to dst with the escape sequences of set (a
// backslash followed by one of the characters of set) replaced by the
// escaped character.
func unescape(dst, raw []byte, set string) []byte {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c == '\\' && i+1 < len(raw) && inSet(raw[i+1], set) {
			i++
			c = raw[i]
		}
		dst = append(dst, c)
	}
	return dst
}

func inSet(c byte, set string) bool {
	for i := 0; i < len(set); i++ {
		if set[i] == c {
			return true
		}
	}
	return false
}

// nameChar reports whether c may appear in a label name after its first
// character ([a-zA-Z0-9_.:-]).
func nameChar(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		(c >= '0' && c <= '9') || c == '.' || c == ':' || c == '-'
}

// nameStart reports whether c may start a label name ([a-zA-Z_]).
func nameStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// appendSanitized appends s (valid UTF-8) to dst with every character that
// is not allowed in a label name replaced by '_' (one '_' per character,
// whatever its UTF-8 length). When first is set and s starts with a
// character allowed only after the first position (a digit, '.', ':' or
// '-'), a '_' is put in front of it.
func appendSanitized(dst, s []byte, first bool) []byte {
	if first && len(s) > 0 && nameChar(s[0]) && !nameStart(s[0]) {
		dst = append(dst, '_')
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !nameChar(c) {
				c = '_'
			}
			dst = append(dst, c)
			i++
			continue
		}
		_, size := utf8.DecodeRune(s[i:])
		dst = append(dst, '_')
		i += size
	}
	return dst
}

// badValueChar returns the first control character in s (valid UTF-8)
// and true, or false when there is none. Control characters are C0
// (including NUL, tab, CR and LF), DEL and C1.
func badValueChar(s []byte) (rune, bool) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return rune(c), true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if unicode.IsControl(r) {
			return r, true
		}
		i += size
	}
	return 0, false
}

// validDatabase reports why db (the v1 db or v2 bucket parameter) cannot
// be a label value, or "" when it can: it must be valid UTF-8 without
// control characters and at most maxBytes long.
func validDatabase(db string, maxBytes int) string {
	switch {
	case !utf8.ValidString(db):
		return "is not valid UTF-8"
	case maxBytes > 0 && len(db) > maxBytes:
		return "is too long"
	}
	if _, bad := badValueChar([]byte(db)); bad {
		return "contains a control character"
	}
	return ""
}
