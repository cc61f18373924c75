// Package labels holds series identity: sorted label sets, their canonical
// byte encoding, and label matchers.
//
// A series is identified by its labels, one of which is the metric name under
// the name "__name__" (as in Prometheus). Labels are kept sorted by name with
// no duplicate names and no empty values; a label with an empty value is the
// same as no label.
//
// Canonical encoding (used as the series dictionary key and in WAL records):
//
//	uvarint(count) { uvarint(len(name)) name uvarint(len(value)) value }*count
//
// with labels sorted by name. Two equal label sets always encode to the same
// bytes.
//
// Everything here is safe for concurrent use once built; nothing is mutated
// after construction.
package labels

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/tributarydb/tributary/internal/enum"
)

// MetricName is the label that carries the metric name.
const MetricName = "__name__"

// Label is one name=value pair.
type Label struct {
	Name, Value string
}

// Labels is a set of labels sorted by name.
type Labels []Label

// Limits bound what a series may look like.
type Limits struct {
	MaxLabels     int // labels per series, including __name__
	MaxNameBytes  int // bytes in a label name
	MaxValueBytes int // bytes in a label value
}

// DefaultLimits are safe for a small edge node.
var DefaultLimits = Limits{MaxLabels: 32, MaxNameBytes: 128, MaxValueBytes: 1024}

// ErrInvalid is wrapped by every validation error of this package.
var ErrInvalid = errors.New("invalid series")

// New builds a sorted label set from pairs. It drops labels with empty
// values and validates the result against lim.
func New(pairs []Label, lim Limits) (Labels, error) {
	ls := make(Labels, 0, len(pairs))
	for _, p := range pairs {
		if p.Value == "" {
			continue
		}
		ls = append(ls, p)
	}
	slices.SortFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	if err := ls.validate(lim); err != nil {
		return nil, err
	}
	return ls, nil
}

// FromStrings builds labels from name, value, name, value, ... without
// limits; it panics on an odd count (a programmer error).
func FromStrings(nv ...string) Labels {
	if len(nv)%2 != 0 {
		panic("BUG: labels.FromStrings needs name/value pairs")
	}
	pairs := make([]Label, 0, len(nv)/2)
	for i := 0; i < len(nv); i += 2 {
		pairs = append(pairs, Label{nv[i], nv[i+1]})
	}
	ls, err := New(pairs, Limits{})
	if err != nil {
		panic("BUG: labels.FromStrings: " + err.Error())
	}
	return ls
}

func (ls Labels) validate(lim Limits) error {
	if len(ls) == 0 || ls.Get(MetricName) == "" {
		return fmt.Errorf("%w: missing metric name (label %q)", ErrInvalid, MetricName)
	}
	if lim.MaxLabels > 0 && len(ls) > lim.MaxLabels {
		return fmt.Errorf("%w: %d labels, limit is %d", ErrInvalid, len(ls), lim.MaxLabels)
	}
	for i, l := range ls {
		if i > 0 && ls[i-1].Name == l.Name {
			return fmt.Errorf("%w: duplicate label name %q", ErrInvalid, l.Name)
		}
		if err := validName(l.Name); err != nil {
			return err
		}
		if !utf8.ValidString(l.Value) {
			return fmt.Errorf("%w: label %q: value is not valid UTF-8", ErrInvalid, l.Name)
		}
		if lim.MaxNameBytes > 0 && len(l.Name) > lim.MaxNameBytes {
			return fmt.Errorf("%w: label name %.32q... is %d bytes, limit is %d", ErrInvalid, l.Name, len(l.Name), lim.MaxNameBytes)
		}
		if lim.MaxValueBytes > 0 && len(l.Value) > lim.MaxValueBytes {
			return fmt.Errorf("%w: label %q: value is %d bytes, limit is %d", ErrInvalid, l.Name, len(l.Value), lim.MaxValueBytes)
		}
	}
	return nil
}

// validName accepts Prometheus-style names: [a-zA-Z_][a-zA-Z0-9_]*, plus
// '.', '-' and ':' after the first character, which sensor metric names
// from InfluxDB and OpenTSDB commonly use.
func validName(n string) error {
	if n == "" {
		return fmt.Errorf("%w: empty label name", ErrInvalid)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		ok := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			(i > 0 && ((c >= '0' && c <= '9') || c == '.' || c == '-' || c == ':'))
		if !ok {
			return fmt.Errorf("%w: label name %q: character %q at %d is not allowed", ErrInvalid, n, c, i)
		}
	}
	return nil
}

// Get returns the value of name, or "" when absent.
func (ls Labels) Get(name string) string {
	for _, l := range ls {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

// String renders the series as metric{a="b",...}.
func (ls Labels) String() string {
	var b strings.Builder
	b.WriteString(ls.Get(MetricName))
	b.WriteByte('{')
	first := true
	for _, l := range ls {
		if l.Name == MetricName {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&b, "%s=%q", l.Name, l.Value)
	}
	b.WriteByte('}')
	return b.String()
}

// Equal reports whether two label sets are identical.
func Equal(a, b Labels) bool { return slices.Equal(a, b) }

// Compare orders label sets by their labels in turn (name, then value),
// a shorter set first when one is a prefix of the other: the order in
// which queries emit series.
func Compare(a, b Labels) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if c := strings.Compare(a[i].Name, b[i].Name); c != 0 {
			return c
		}
		if c := strings.Compare(a[i].Value, b[i].Value); c != 0 {
			return c
		}
	}
	return len(a) - len(b)
}

// AppendKey appends the canonical encoding of ls to dst.
func (ls Labels) AppendKey(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(ls)))
	for _, l := range ls {
		dst = binary.AppendUvarint(dst, uint64(len(l.Name)))
		dst = append(dst, l.Name...)
		dst = binary.AppendUvarint(dst, uint64(len(l.Value)))
		dst = append(dst, l.Value...)
	}
	return dst
}

// DecodeKey parses a canonical encoding. It returns an error, never panics,
// on malformed input.
func DecodeKey(b []byte) (Labels, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("decode labels: bad count")
	}
	b = b[k:]
	ls := make(Labels, 0, n)
	for i := uint64(0); i < n; i++ {
		var name, value string
		var err error
		if name, b, err = readString(b); err != nil {
			return nil, fmt.Errorf("decode labels: label %d name: %w", i, err)
		}
		if value, b, err = readString(b); err != nil {
			return nil, fmt.Errorf("decode labels: label %d value: %w", i, err)
		}
		ls = append(ls, Label{name, value})
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("decode labels: %d trailing bytes", len(b))
	}
	return ls, nil
}

func readString(b []byte) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, errors.New("truncated")
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
}

var seed = maphash.MakeSeed()

// Hash returns a process-local hash of the canonical key (not stable across
// processes; never persist it).
func Hash(key []byte) uint64 { return maphash.Bytes(seed, key) }

// MatchType is the kind of a Matcher.
type MatchType int

// The matcher kinds, as in PromQL.
const (
	MatchEqual MatchType = iota
	MatchNotEqual
	MatchRegexp
	MatchNotRegexp
)

var matchTypeNames = []string{MatchEqual: "=", MatchNotEqual: "!=", MatchRegexp: "=~", MatchNotRegexp: "!~"}

// String returns the PromQL operator of t.
func (t MatchType) String() string { return enum.Name(matchTypeNames, t, "MatchType") }

// Matcher selects series by one label. A missing label matches as "".
type Matcher struct {
	Type  MatchType
	Name  string
	Value string
	re    *regexp.Regexp // nil when set is not
	// set, for a regexp matching a small finite set of strings, is that
	// set (sorted): the series can be found by equality lookups instead
	// of testing every value of the label, and a value matches when it
	// is in the set, without compiling the regexp (a query naming 8 hosts
	// of 1,000 by `host_a|host_b|…` is a new regexp each time).
	set []string
}

// NewMatcher compiles a matcher; regexps are fully anchored RE2.
func NewMatcher(t MatchType, name, value string) (*Matcher, error) {
	if t < MatchEqual || t > MatchNotRegexp {
		return nil, fmt.Errorf("matcher on %q: unknown type %d", name, t)
	}
	if name == "" {
		return nil, fmt.Errorf("matcher: empty label name")
	}
	m := &Matcher{Type: t, Name: name, Value: value}
	if t == MatchRegexp || t == MatchNotRegexp {
		if set, ok := literalSet(value); ok {
			m.set = set // literalSet parsed value: it is a valid regexp
			return m, nil
		}
		re, err := regexp.Compile("^(?:" + value + ")$")
		if err != nil {
			return nil, fmt.Errorf("matcher %s%s%q: %w", name, t, value, err)
		}
		m.re = re
	}
	return m, nil
}

// LiteralSet returns, for a =~ matcher whose expression matches a
// small finite set of strings (an alternation of literals such as
// `host_1|host_7`), that set, sorted and unique, and true; otherwise nil
// and false. A value matches the regexp if and only if it is in the set.
func (m *Matcher) LiteralSet() ([]string, bool) {
	if m.Type != MatchRegexp || m.set == nil {
		return nil, false
	}
	return m.set, true
}

// Matches reports whether the label value v satisfies the matcher.
func (m *Matcher) Matches(v string) bool {
	switch m.Type {
	case MatchEqual:
		return v == m.Value
	case MatchNotEqual:
		return v != m.Value
	case MatchRegexp:
		return m.matchesRegexp(v)
	default:
		return !m.matchesRegexp(v)
	}
}

// matchesRegexp reports whether v matches a =~ or !~ matcher's regexp.
func (m *Matcher) matchesRegexp(v string) bool {
	if m.set != nil {
		_, in := slices.BinarySearch(m.set, v)
		return in
	}
	return m.re.MatchString(v)
}

// MatchesEmpty reports whether a series without the label matches.
func (m *Matcher) MatchesEmpty() bool { return m.Matches("") }

func (m *Matcher) String() string { return fmt.Sprintf("%s%s%q", m.Name, m.Type, m.Value) }
