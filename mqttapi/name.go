package mqttapi

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// sanitizeName makes a metric or label name out of s the way line
// protocol names are made (httpapi/influx; TestSanitizeName_AgreesWithLineProtocol
// holds the two together): every character outside [a-zA-Z0-9_.:-]
// becomes '_' (one per character, invalid UTF-8 bytes included), and a
// name starting with a digit, '.', ':' or '-' gets a leading '_'.
func sanitizeName(s string) string {
	ok := s != "" && nameStart(s[0])
	for i := 0; ok && i < len(s); i++ {
		ok = nameChar(s[i])
	}
	if ok {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 1)
	if s != "" && nameChar(s[0]) && !nameStart(s[0]) {
		b.WriteByte('_')
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !nameChar(c) {
				c = '_'
			}
			b.WriteByte(c)
			i++
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		b.WriteByte('_')
		i += size
	}
	return b.String()
}

func nameChar(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		(c >= '0' && c <= '9') || c == '.' || c == ':' || c == '-'
}

func nameStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// checkLabelValue refuses what the line protocol parser refuses in a tag
// value: invalid UTF-8 and control characters (C0, DEL, C1).
func checkLabelValue(name, v string) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("label %s: value is not valid UTF-8", name)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("label %s: value holds control character %U", name, r)
		}
	}
	return nil
}
