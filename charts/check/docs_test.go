package check

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// undocumented returns the values (dotted paths) that the README's table
// does not list: a value is documented when its row, or one of an enclosing
// map, is there.
func undocumented(prefix string, values map[string]any, documented map[string]bool) []string {
	var out []string
	for k, v := range values {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		if documented[p] {
			continue
		}
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			out = append(out, undocumented(p, m, documented)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// lookup reports whether the dotted path names a value in values.
func lookup(values map[string]any, path string) bool {
	var cur any = values
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[k]; !ok {
			return false
		}
	}
	return true
}

var valueRow = regexp.MustCompile("(?m)^\\| `([A-Za-z0-9.]+)` \\|")

func TestREADMEs_DocumentEveryValue(t *testing.T) {
	for _, c := range []struct{ readme, values string }{
		{coordinatorChart + "/README.md", coordinatorChart + "/values.yaml"},
		{"../../k3s/README.md", edgeChart + "/values.yaml"},
	} {
		data, err := os.ReadFile(c.readme)
		if err != nil {
			t.Fatal(err)
		}
		values := readValues(t, c.values)
		documented := map[string]bool{}
		for _, m := range valueRow.FindAllStringSubmatch(string(data), -1) {
			documented[m[1]] = true
			if !lookup(values, m[1]) {
				t.Errorf("%s documents %q, which %s does not have", c.readme, m[1], c.values)
			}
		}
		if len(documented) == 0 {
			t.Fatalf("%s has no values table", c.readme)
		}
		if missing := undocumented("", values, documented); len(missing) > 0 {
			t.Errorf("%s does not document %q", c.readme, missing)
		}
	}
}
