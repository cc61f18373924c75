package labels

import (
	"regexp/syntax"
	"slices"
	"unicode/utf8"
)

// maxLiteralSet bounds the strings a regular expression may expand to and
// still be answered as a set of equality lookups.
const maxLiteralSet = 256

// literalSet returns the finite set of strings the fully anchored regular
// expression expr matches — `host_1|host_7`, `cpu_(usage_user|usage_system)`,
// `a[bc]` — sorted and unique, or ok=false when the set is infinite, larger
// than maxLiteralSet, or not simple to expand (case folding, any-character,
// repetition, anchors inside the expression).
func literalSet(expr string) (set []string, ok bool) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, false
	}
	set, ok = expand(re.Simplify())
	if !ok {
		return nil, false
	}
	slices.Sort(set)
	return slices.Compact(set), true
}

// expand returns the strings re matches, or false (see literalSet).
func expand(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 || slices.Contains(re.Rune, utf8.RuneError) {
			return nil, false // a regexp reads an invalid byte as U+FFFD
		}
		return []string{string(re.Rune)}, true
	case syntax.OpCharClass:
		return expandClass(re.Rune)
	case syntax.OpCapture:
		return expand(re.Sub[0])
	case syntax.OpQuest:
		s, ok := expand(re.Sub[0])
		if !ok || len(s)+1 > maxLiteralSet {
			return nil, false
		}
		return append(s, ""), true
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			s, ok := expand(sub)
			if !ok || len(out)+len(s) > maxLiteralSet {
				return nil, false
			}
			out = append(out, s...)
		}
		return out, true
	case syntax.OpConcat:
		out := []string{""}
		for _, sub := range re.Sub {
			s, ok := expand(sub)
			if !ok || len(out)*len(s) > maxLiteralSet {
				return nil, false
			}
			next := make([]string, 0, len(out)*len(s))
			for _, a := range out {
				for _, b := range s {
					next = append(next, a+b)
				}
			}
			out = next
		}
		return out, true
	}
	return nil, false
}

// expandClass lists the runes of a character class given as ranges.
func expandClass(ranges []rune) ([]string, bool) {
	var out []string
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		if int(hi-lo)+1+len(out) > maxLiteralSet || (lo <= utf8.RuneError && utf8.RuneError <= hi) {
			return nil, false
		}
		for r := lo; r <= hi; r++ {
			out = append(out, string(r))
		}
	}
	return out, true
}
