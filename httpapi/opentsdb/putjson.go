package opentsdb

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// The /api/put datapoint decoder. A body is checked once with json.Valid
// (which allocates nothing); its datapoints are then decoded here in
// place, so that a datapoint costs no allocation beyond the strings of
// escaped JSON strings: the decoded strings alias the body. encoding/json
// would allocate a decoder state per datapoint, a map per tags object and
// every string, which for bodies of tiny or failing datapoints costs
// hundreds of bytes per byte of body.

// jsonScalar is a JSON value kept as text: the content of a string or the
// literal of a number, bool or null. Decoding it never fails, so that a
// wrong type is reported per datapoint with the field's name.
type jsonScalar struct {
	set  bool
	kind byte // '"' string, '0' number, 'b' bool, 'n' null, '{' object, '[' array
	text string
}

func (s *jsonScalar) typeName() string {
	switch s.kind {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 'b':
		return "a boolean"
	case 'n':
		return "null"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "unknown"
}

// putDatapoint is one element of a /api/put body. Fields are matched by
// name ignoring case, as encoding/json does; a later duplicate wins.
type putDatapoint struct {
	Metric, Timestamp, Value jsonScalar
	Tags                     putTags
}

// putTags is the tags object of a datapoint. Its members are counted
// before any is decoded: with more than max (0: no limit) none is, so a
// datapoint of a million tags costs nothing for them.
type putTags struct {
	max  int
	n    int      // members of the object
	kind byte     // of the value: 0 absent or null, '{' an object, else as jsonScalar
	kv   []putTag // in order; a later duplicate key replaces an earlier one
}

type putTag struct {
	key string
	val jsonScalar
}

// errNotObject are the errors of datapoints that are not objects, by the
// first byte of the value.
var errNotObject = map[byte]error{
	'"': errors.New("datapoint must be a JSON object, not a JSON string"),
	'0': errors.New("datapoint must be a JSON object, not a JSON number"),
	'b': errors.New("datapoint must be a JSON object, not a JSON bool"),
	'[': errors.New("datapoint must be a JSON object, not a JSON array"),
}

// errTagsKind are the errors of a tags field that is not an object.
var errTagsKind = map[byte]error{
	'"': errors.New("field tags must not be a JSON string"),
	'0': errors.New("field tags must not be a JSON number"),
	'b': errors.New("field tags must not be a JSON bool"),
	'[': errors.New("field tags must not be a JSON array"),
}

// decode fills dp from raw, one datapoint of a body that is valid JSON,
// keeping dp's tag limit and buffers. The strings of dp alias raw.
func (dp *putDatapoint) decode(raw []byte) error {
	*dp = putDatapoint{Tags: putTags{max: dp.Tags.max, kv: dp.Tags.kv[:0]}}
	switch k := scalarKind(raw[0]); k {
	case '{':
	case 'n':
		return nil // null: a datapoint without fields
	default:
		return errNotObject[k]
	}
	eachMember(raw, func(key, val []byte) {
		switch {
		case keyIs(key, "metric"):
			dp.Metric = scalarOf(val)
		case keyIs(key, "timestamp"):
			dp.Timestamp = scalarOf(val)
		case keyIs(key, "value"):
			dp.Value = scalarOf(val)
		case keyIs(key, "tags"):
			dp.Tags.decode(val)
		}
	})
	if k := dp.Tags.kind; k != 0 && k != '{' {
		return errTagsKind[k]
	}
	return nil
}

func (t *putTags) decode(val []byte) {
	t.n, t.kv = 0, t.kv[:0]
	if t.kind = scalarKind(val[0]); t.kind != '{' {
		if t.kind == 'n' {
			t.kind = 0
		}
		return
	}
	t.n = countMembers(val)
	if t.max > 0 && t.n > t.max {
		return
	}
	eachMember(val, func(key, v []byte) {
		tag := putTag{key: jsonString(key), val: scalarOf(v)}
		for i := range t.kv {
			if t.kv[i].key == tag.key {
				t.kv[i] = tag
				return
			}
		}
		t.kv = append(t.kv, tag)
	})
}

// scalarKind maps the first byte of a JSON value to a jsonScalar kind.
func scalarKind(c byte) byte {
	switch {
	case c == '-' || c >= '0' && c <= '9':
		return '0'
	case c == 't' || c == 'f':
		return 'b'
	}
	return c
}

// scalarOf keeps the JSON value val as a jsonScalar.
func scalarOf(val []byte) jsonScalar {
	s := jsonScalar{set: true, kind: scalarKind(val[0])}
	switch s.kind {
	case '"':
		s.text = jsonString(val)
	case '0':
		s.text = aliasString(val)
	case 'b':
		s.text = "false"
		if val[0] == 't' {
			s.text = "true"
		}
	}
	return s
}

// aliasString returns b as a string without copying; b must not change
// while the string is in use (the body of a request does not).
func aliasString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// keyIs reports whether the JSON string key (with its quotes) is name,
// ignoring case as encoding/json does.
func keyIs(key []byte, name string) bool {
	return strings.EqualFold(jsonString(key), name)
}

// jsonString returns the content of the valid JSON string s (with its
// quotes): s itself when it has no escapes, else a new string with them
// decoded (a lone UTF-16 surrogate becomes U+FFFD, as encoding/json has
// it). Other bytes are kept as they are, invalid UTF-8 included, so that
// validation can name the field that holds it.
func jsonString(s []byte) string {
	s = s[1 : len(s)-1]
	if bytes.IndexByte(s, '\\') < 0 {
		return aliasString(s)
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		switch s[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(s[i+1 : i+5])
			i += 4
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
					r2 = hex4(s[i+3 : i+7])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r = dec
					i += 6
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\', '/'
			out = append(out, s[i])
		}
	}
	return string(out)
}

// hex4 decodes four hex digits (valid JSON guarantees them).
func hex4(b []byte) rune {
	v, _ := strconv.ParseUint(aliasString(b), 16, 32)
	return rune(v)
}

// eachMember calls fn with the key (a JSON string with its quotes) and
// the value of each member of the valid JSON object obj, in order.
func eachMember(obj []byte, fn func(key, val []byte)) {
	i := skipJSONSpace(obj, 1)
	for obj[i] != '}' {
		kEnd := jsonValueEnd(obj, i)
		key := obj[i:kEnd]
		i = skipJSONSpace(obj, skipJSONSpace(obj, kEnd)+1) // past ':'
		vEnd := jsonValueEnd(obj, i)
		fn(key, obj[i:vEnd])
		if i = skipJSONSpace(obj, vEnd); obj[i] == ',' {
			i = skipJSONSpace(obj, i+1)
		}
	}
}

// countMembers counts the members of a valid JSON object. It allocates
// nothing.
func countMembers(obj []byte) int {
	n := 0
	eachMember(obj, func(_, _ []byte) { n++ })
	return n
}

// skipJSONSpace returns the index of the first byte of b at or after i
// that is not JSON whitespace, or len(b).
func skipJSONSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// jsonStringEnd returns the index just past the JSON string whose opening
// quote is b[i], or -1 when the string does not end.
func jsonStringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// jsonValueEnd returns the index just past the JSON value that starts at
// b[i], found by matching brackets outside strings, or -1 when the value
// does not end. It does not validate the value (json.Valid does): a
// scalar ends at the first ',', ']', '}', ':' or whitespace.
func jsonValueEnd(b []byte, i int) int {
	switch b[i] {
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end := jsonStringEnd(b, i)
				if end < 0 {
					return -1
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return -1
	case '"':
		return jsonStringEnd(b, i)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', ']', '}', ':', ' ', '\t', '\r', '\n':
			return i
		}
	}
	return i
}
