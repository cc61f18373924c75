package tributary

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tributarydb/tributary/internal/enum"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// MetricName is the label that carries a series' metric name.
const MetricName = "__name__"

// Label is one name=value pair of a series.
type Label struct {
	Name, Value string
}

// Labels identifies a series: its metric name (label MetricName) and its
// other labels. Labels returned by this package are sorted by name; Labels
// given to it need not be.
type Labels []Label

// NewLabels builds sorted Labels from name, value, name, value, ... An odd
// number of arguments is a programmer error and panics.
func NewLabels(nameValues ...string) Labels {
	if len(nameValues)%2 != 0 {
		panic("BUG: tributary.NewLabels needs name/value pairs")
	}
	ls := make(Labels, 0, len(nameValues)/2)
	for i := 0; i < len(nameValues); i += 2 {
		ls = append(ls, Label{nameValues[i], nameValues[i+1]})
	}
	sortLabels(ls)
	return ls
}

// Metric builds the sorted Labels of metric name with the given label
// name, value pairs: Metric("cpu", "host", "pi-7").
func Metric(name string, nameValues ...string) Labels {
	return NewLabels(append([]string{MetricName, name}, nameValues...)...)
}

// LabelsFromMap builds sorted Labels from a map.
func LabelsFromMap(m map[string]string) Labels {
	ls := make(Labels, 0, len(m))
	for n, v := range m {
		ls = append(ls, Label{n, v})
	}
	sortLabels(ls)
	return ls
}

func sortLabels(ls Labels) {
	sort.Slice(ls, func(i, j int) bool { return ls[i].Name < ls[j].Name })
}

// Get returns the value of the label name, or "" when there is none.
func (ls Labels) Get(name string) string {
	for _, l := range ls {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

// Metric returns the metric name ("" for a group of an aggregated query).
func (ls Labels) Metric() string { return ls.Get(MetricName) }

// Map returns the labels as a map.
func (ls Labels) Map() map[string]string {
	m := make(map[string]string, len(ls))
	for _, l := range ls {
		m[l.Name] = l.Value
	}
	return m
}

// String renders the labels as a selector would: metric{a="b",c="d"}, or
// {a="b"} without a metric name.
func (ls Labels) String() string { return ls.node().String() }

// normalized returns ls sorted by name without empty values (a label with
// an empty value is the same as no label), copying only when ls is not
// already in that form. The result may alias ls.
func (ls Labels) normalized() Labels {
	ok := true
	for i, l := range ls {
		if l.Value == "" || (i > 0 && ls[i-1].Name >= l.Name) {
			ok = false
			break
		}
	}
	if ok {
		return ls
	}
	out := make(Labels, 0, len(ls))
	for _, l := range ls {
		if l.Value != "" {
			out = append(out, l)
		}
	}
	slices.SortStableFunc(out, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// validate checks what every server checks regardless of its limits: a
// metric name, label names of the allowed characters, no duplicate name,
// valid UTF-8. REQUIRES: ls normalized.
func (ls Labels) validate() error {
	_, err := labels.New(ls.node(), labels.Limits{})
	return err
}

// node returns a copy of ls as the server's label type, whose rules
// (validation, rendering) the client shares.
func (ls Labels) node() labels.Labels {
	out := make(labels.Labels, len(ls))
	for i, l := range ls {
		out[i] = labels.Label(l)
	}
	return out
}

// appendKey appends an unambiguous encoding of normalized labels to dst.
func (ls Labels) appendKey(dst []byte) []byte {
	for _, l := range ls {
		dst = binary.AppendUvarint(dst, uint64(len(l.Name)))
		dst = append(dst, l.Name...)
		dst = binary.AppendUvarint(dst, uint64(len(l.Value)))
		dst = append(dst, l.Value...)
	}
	return dst
}

func (ls Labels) proto() *pb.Series {
	s := &pb.Series{Labels: make([]*pb.Label, len(ls))}
	for i, l := range ls {
		s.Labels[i] = &pb.Label{Name: l.Name, Value: l.Value}
	}
	return s
}

func labelsFromProto(s *pb.Series) Labels {
	if s == nil {
		return nil
	}
	ls := make(Labels, len(s.Labels))
	for i, l := range s.Labels {
		ls[i] = Label{l.Name, l.Value}
	}
	if !slices.IsSortedFunc(ls, func(a, b Label) int { return strings.Compare(a.Name, b.Name) }) {
		sortLabels(ls)
	}
	return ls
}

// MatchType is the kind of a Matcher.
type MatchType int

// The matcher kinds, as in PromQL. Regular expressions are RE2 and fully
// anchored.
const (
	MatchEqual     MatchType = iota // =
	MatchNotEqual                   // !=
	MatchRegexp                     // =~
	MatchNotRegexp                  // !~
)

var matchTypeNames = []string{
	MatchEqual:     "=",
	MatchNotEqual:  "!=",
	MatchRegexp:    "=~",
	MatchNotRegexp: "!~",
}

func (t MatchType) String() string { return enum.Name(matchTypeNames, t, "MatchType") }

// Matcher selects series by one label; a series without the label matches
// as if its value were "".
type Matcher struct {
	Type        MatchType
	Name, Value string
}

func (m Matcher) String() string { return fmt.Sprintf("%s%s%q", m.Name, m.Type, m.Value) }

// ParseSelector parses a PromQL-style series selector such as
// `cpu{host="pi-7",region=~"eu-.*"}`, `{__name__="cpu"}` or `cpu`. Errors
// name the byte offset at fault.
func ParseSelector(s string) ([]Matcher, error) {
	ms, err := labels.ParseSelector(s)
	if err != nil {
		return nil, err
	}
	out := make([]Matcher, len(ms))
	for i, m := range ms {
		out[i] = Matcher{Type: MatchType(m.Type), Name: m.Name, Value: m.Value}
	}
	return out, nil
}

// protoMatchers converts an optional selector string and matchers (all of
// which must match) to the API's matchers.
func protoMatchers(selector string, ms []Matcher) ([]*pb.Matcher, error) {
	all := ms
	if strings.TrimSpace(selector) != "" {
		parsed, err := ParseSelector(selector)
		if err != nil {
			return nil, err
		}
		all = append(parsed, ms...)
	}
	out := make([]*pb.Matcher, len(all))
	for i, m := range all {
		if m.Type < MatchEqual || m.Type > MatchNotRegexp {
			return nil, fmt.Errorf("matcher %d on %q: unknown type %d", i, m.Name, int(m.Type))
		}
		if m.Name == "" {
			return nil, fmt.Errorf("matcher %d: empty label name", i)
		}
		out[i] = &pb.Matcher{Type: pb.Matcher_Type(m.Type), Name: m.Name, Value: m.Value}
	}
	return out, nil
}

// ProtoMatchers converts a selector (may be empty) and matchers, all of
// which must match, to the API's matchers, for code that calls the
// generated gRPC client directly.
func ProtoMatchers(selector string, ms ...Matcher) ([]*pb.Matcher, error) {
	return protoMatchers(selector, ms)
}
