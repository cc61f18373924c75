package labels

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSelector parses a PromQL-style series selector such as
// `cpu{host="pi-7",core=~"0|1"}`, `{__name__="cpu"}` or just `cpu`, and says
// at which byte offset it fails.
func ParseSelector(s string) ([]*Matcher, error) {
	p := selParser{in: s}
	return p.parse()
}

type selParser struct {
	in  string
	pos int
}

func (p *selParser) errorf(format string, a ...any) error {
	return fmt.Errorf("selector %q at offset %d: %s", p.in, p.pos, fmt.Sprintf(format, a...))
}

func (p *selParser) skipSpace() {
	for p.pos < len(p.in) && (p.in[p.pos] == ' ' || p.in[p.pos] == '\t') {
		p.pos++
	}
}

func (p *selParser) ident() string {
	start := p.pos
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '_' || c == ':' || c == '.' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (p.pos > start && c >= '0' && c <= '9') {
			p.pos++
			continue
		}
		break
	}
	return p.in[start:p.pos]
}

func (p *selParser) parse() ([]*Matcher, error) {
	var ms []*Matcher
	p.skipSpace()
	if name := p.ident(); name != "" {
		m, err := NewMatcher(MatchEqual, MetricName, name)
		if err != nil {
			return nil, p.errorf("%v", err)
		}
		ms = append(ms, m)
	}
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '{' {
		p.pos++
		for {
			p.skipSpace()
			if p.pos < len(p.in) && p.in[p.pos] == '}' {
				p.pos++
				break
			}
			name := p.ident()
			if name == "" {
				return nil, p.errorf("expected a label name")
			}
			p.skipSpace()
			var t MatchType
			switch {
			case strings.HasPrefix(p.in[p.pos:], "=~"):
				t, p.pos = MatchRegexp, p.pos+2
			case strings.HasPrefix(p.in[p.pos:], "!~"):
				t, p.pos = MatchNotRegexp, p.pos+2
			case strings.HasPrefix(p.in[p.pos:], "!="):
				t, p.pos = MatchNotEqual, p.pos+2
			case strings.HasPrefix(p.in[p.pos:], "="):
				t, p.pos = MatchEqual, p.pos+1
			default:
				return nil, p.errorf("expected =, !=, =~ or !~ after %q", name)
			}
			p.skipSpace()
			if p.pos >= len(p.in) || (p.in[p.pos] != '"' && p.in[p.pos] != '\'') {
				return nil, p.errorf("expected a quoted value for %q", name)
			}
			value, err := p.quoted()
			if err != nil {
				return nil, p.errorf("bad quoted value for %q: %v", name, err)
			}
			m, err := NewMatcher(t, name, value)
			if err != nil {
				return nil, p.errorf("%v", err)
			}
			ms = append(ms, m)
			p.skipSpace()
			if p.pos < len(p.in) && p.in[p.pos] == ',' {
				p.pos++
				continue
			}
			if p.pos < len(p.in) && p.in[p.pos] == '}' {
				p.pos++
				break
			}
			return nil, p.errorf("expected , or }")
		}
	}
	p.skipSpace()
	if p.pos != len(p.in) {
		return nil, p.errorf("unexpected %q", p.in[p.pos:])
	}
	if len(ms) == 0 {
		return nil, p.errorf("empty selector")
	}
	return ms, nil
}

// quoted reads a double-quoted (Go escapes) or single-quoted string.
func (p *selParser) quoted() (string, error) {
	rest := p.in[p.pos:]
	if rest[0] == '"' {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return "", err
		}
		p.pos += len(q)
		return strconv.Unquote(q)
	}
	// Single quotes take the same escapes as double quotes (as in PromQL):
	// rewrite the literal as a double-quoted one and unquote that.
	var b strings.Builder
	b.WriteByte('"')
	for i := 1; i < len(rest); i++ {
		switch c := rest[i]; {
		case c == '\\' && i+1 < len(rest):
			i++
			if rest[i] != '\'' {
				b.WriteByte('\\')
			}
			b.WriteByte(rest[i])
		case c == '"':
			b.WriteString(`\"`)
		case c == '\'':
			b.WriteByte('"')
			v, err := strconv.Unquote(b.String())
			if err != nil {
				return "", err
			}
			p.pos += i + 1
			return v, nil
		default:
			b.WriteByte(c)
		}
	}
	return "", fmt.Errorf("unterminated string")
}
