package opentsdb

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tributarydb/tributary/node/labels"
)

// isNameByte reports whether c is an ASCII character OpenTSDB allows in
// metric names and tag keys: letters, digits, '-', '_', '.', '/'.
func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '_' || c == '.' || c == '/'
}

// checkName validates a metric name or tag key against OpenTSDB's
// character set: ASCII letters and digits, '-', '_', '.', '/' and Unicode
// letters. what names the field in the error ("metric name", "tag key").
func checkName(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if !isNameByte(c) {
				return fmt.Errorf("%s %.64q: character %q at byte %d is not allowed (use letters, digits, '-', '_', '.', '/')", what, s, c, i)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n <= 1 {
			return fmt.Errorf("%s %.64q is not valid UTF-8 (at byte %d)", what, s, i)
		}
		if !unicode.IsLetter(r) {
			return fmt.Errorf("%s %.64q: character %q at byte %d is not allowed (use letters, digits, '-', '_', '.', '/')", what, s, r, i)
		}
		i += n
	}
	return nil
}

// checkTagValue accepts any non-empty valid UTF-8 without control
// characters (a superset of OpenTSDB's tag value character set).
func checkTagValue(key, v string) error {
	if v == "" {
		return fmt.Errorf("tag %.64q has an empty value", key)
	}
	for i, r := range v {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(v[i:]); n <= 1 {
				return fmt.Errorf("tag %.64q: value is not valid UTF-8 (at byte %d)", key, i)
			}
		}
		if unicode.IsControl(r) {
			return fmt.Errorf("tag %.64q: value contains control character %U at byte %d", key, r, i)
		}
	}
	return nil
}

// labelName maps a valid OpenTSDB tag key onto a node label name
// ([a-zA-Z_][a-zA-Z0-9_.:-]*): '/' and each non-ASCII letter become '_',
// and a key starting with a digit, '-' or '.' gets a leading '_'. The
// key must have passed checkName. "__name__" is refused: it is the label
// holding the metric name.
func labelName(key string) (string, error) {
	clean := true
	for i := 0; i < len(key); i++ {
		if c := key[i]; c >= utf8.RuneSelf || c == '/' {
			clean = false
			break
		}
	}
	lead := key[0] >= '0' && key[0] <= '9' || key[0] == '-' || key[0] == '.'
	name := key
	if !clean || lead {
		var b strings.Builder
		b.Grow(len(key) + 1)
		if lead {
			b.WriteByte('_')
		}
		for _, r := range key {
			if r >= utf8.RuneSelf || r == '/' {
				b.WriteByte('_')
			} else {
				b.WriteRune(r)
			}
		}
		name = b.String()
	}
	if name == labels.MetricName {
		return "", fmt.Errorf("tag key %q is reserved: it is the label that holds the metric name", key)
	}
	return name, nil
}

// tagLabel validates one tag and returns it as a node label.
func tagLabel(key, value string) (labels.Label, error) {
	if err := checkName("tag key", key); err != nil {
		return labels.Label{}, err
	}
	name, err := labelName(key)
	if err != nil {
		return labels.Label{}, err
	}
	if err := checkTagValue(key, value); err != nil {
		return labels.Label{}, err
	}
	return labels.Label{Name: name, Value: value}, nil
}

// queryLabelName validates and maps a tag key used in a query.
func queryLabelName(key string) (string, error) {
	if err := checkName("tag key", key); err != nil {
		return "", err
	}
	return labelName(key)
}

// maxTags is the most tags a point may have under lim: the labels of a
// series less the metric name. 0 means no limit.
func maxTags(lim labels.Limits) int {
	if lim.MaxLabels <= 0 {
		return 0
	}
	return max(lim.MaxLabels-1, 1)
}

// tooManyTags is the error of a point with n tags, more than maxTags.
func tooManyTags(n, maxTags int) error {
	return fmt.Errorf("%d tags, at most %d tags are allowed (a series holds at most %d labels, the metric name included)", n, maxTags, maxTags+1)
}
