package mqttapi

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxTopicLevels bounds the levels of a filter (and so the work of
// matching one topic against it).
const maxTopicLevels = 64

// filter is a compiled topic filter: the filter the broker is sent, and
// the names of its capturing wildcards.
//
// A level "+name" matches one level like "+" and captures it as the label
// name; "#name" (last level only) matches the rest like "#" and captures
// the levels it matched joined by '/'. Plain "+" and "#" capture nothing.
type filter struct {
	levels []string // the levels as written, wildcard names included
	names  []string // per level: the capture name, "" for none
	broker string   // the MQTT filter: names removed
}

// parseFilter compiles a filter, checking MQTT's rules (a wildcard fills
// a whole level, '#' only last) and the capture names.
func parseFilter(s string) (*filter, error) {
	if s == "" {
		return nil, fmt.Errorf("empty topic filter")
	}
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return nil, fmt.Errorf("topic filter %q: not valid UTF-8 or holds NUL", s)
	}
	if len(s) > 65535 {
		return nil, fmt.Errorf("topic filter is %d bytes, MQTT allows 65535", len(s))
	}
	if strings.HasPrefix(s, "$share/") {
		return nil, fmt.Errorf("topic filter %q: shared subscriptions are not supported", s)
	}
	levels := strings.Split(s, "/")
	if len(levels) > maxTopicLevels {
		return nil, fmt.Errorf("topic filter %q: %d levels, limit is %d", s, len(levels), maxTopicLevels)
	}
	f := &filter{levels: levels, names: make([]string, len(levels))}
	broker := make([]string, len(levels))
	seen := map[string]bool{}
	for i, l := range levels {
		switch {
		case strings.HasPrefix(l, "+") || strings.HasPrefix(l, "#"):
			if l[0] == '#' && i != len(levels)-1 {
				return nil, fmt.Errorf("topic filter %q: '#' must be the last level", s)
			}
			name := l[1:]
			if name != "" {
				if err := checkCaptureName(name); err != nil {
					return nil, fmt.Errorf("topic filter %q: level %d: %w", s, i+1, err)
				}
				if seen[name] {
					return nil, fmt.Errorf("topic filter %q: capture name %q used twice", s, name)
				}
				seen[name] = true
			}
			f.names[i] = name
			broker[i] = l[:1]
		case strings.ContainsAny(l, "+#"):
			return nil, fmt.Errorf("topic filter %q: level %d (%q): a wildcard must fill a whole level", s, i+1, l)
		default:
			broker[i] = l
		}
	}
	f.broker = strings.Join(broker, "/")
	return f, nil
}

// checkCaptureName requires a valid label name that is not reserved.
func checkCaptureName(name string) error {
	if sanitizeName(name) != name {
		return fmt.Errorf("capture name %q is not a label name ([a-zA-Z_][a-zA-Z0-9_.:-]*)", name)
	}
	if strings.HasPrefix(name, "__") {
		return fmt.Errorf("capture name %q: names starting with __ are reserved", name)
	}
	return nil
}

// match reports whether topic matches f and, when it does, appends the
// captured (name, value) pairs to caps. Topics starting with '$' match
// only filters that start with the same literal level (MQTT's rule for
// $SYS and the like).
func (f *filter) match(topic string, caps []capture) ([]capture, bool) {
	if first := f.levels[0]; strings.HasPrefix(topic, "$") && first != "" && (first[0] == '+' || first[0] == '#') {
		return caps, false
	}
	rest := topic
	for i, l := range f.levels {
		if l != "" && l[0] == '#' {
			if f.names[i] != "" {
				caps = append(caps, capture{f.names[i], rest})
			}
			return caps, true
		}
		var level string
		last := false
		if j := strings.IndexByte(rest, '/'); j >= 0 {
			level, rest = rest[:j], rest[j+1:]
		} else {
			level, last = rest, true
		}
		switch {
		case l != "" && l[0] == '+':
			if f.names[i] != "" {
				caps = append(caps, capture{f.names[i], level})
			}
		case l != level:
			return caps, false
		}
		if last {
			// "a/#" also matches "a": the parent level.
			if i == len(f.levels)-1 {
				return caps, true
			}
			if i == len(f.levels)-2 && f.levels[i+1] != "" && f.levels[i+1][0] == '#' {
				if n := f.names[i+1]; n != "" {
					caps = append(caps, capture{n, ""})
				}
				return caps, true
			}
			return caps, false
		}
	}
	return caps, false // topic has more levels than the filter
}

// capture is one captured topic level.
type capture struct{ name, value string }
