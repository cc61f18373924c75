package rules

import (
	"strings"
	"testing"
)

func TestCheckFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		want       []string // substrings of the error; none: valid
		sum        FileSummary
	}{
		{name: "valid", body: overheatRules, sum: FileSummary{Groups: 1, Recording: 1, Alerting: 1}},
		{name: "bad expression", body: "groups:\n  - name: g\n    rules:\n      - record: r\n        expr: sum(x\n",
			want: []string{"bad expression.yml: 5:15:", `group "g"`, "could not parse expression"}},
		{name: "unknown field", body: "groups:\n  - name: g\n    rules:\n      - record: r\n        expr: x\n        fro: 1m\n",
			want: []string{"line 6", "fro"}},
		{name: "bad template", body: "groups:\n  - name: g\n    rules:\n      - alert: A\n        expr: x > 1\n        annotations:\n          s: '{{ $value '\n",
			want: []string{`group "g"`, `"A"`, "template"}},
		{name: "duplicate group", body: "groups:\n  - name: g\n    rules: [{record: r, expr: x}]\n  - name: g\n    rules: [{record: r, expr: x}]\n",
			want: []string{`"g" is repeated in the same file`}},
		{name: "record and alert", body: "groups:\n  - name: g\n    rules: [{record: r, alert: A, expr: x}]\n",
			want: []string{"only one of 'record' and 'alert' must be set"}},
		{name: "missing file", want: []string{"no such file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := dir + "/" + tc.name + ".yml"
			if tc.body != "" {
				p = writeFile(t, dir, tc.name+".yml", tc.body)
			}
			sum, errs := CheckFile(p)
			if len(tc.want) == 0 {
				if len(errs) > 0 || sum != tc.sum {
					t.Fatalf("errors %v, summary %+v", errs, sum)
				}
				return
			}
			if len(errs) == 0 {
				t.Fatal("accepted")
			}
			msg := errs[0].Error()
			if !strings.HasPrefix(msg, p) {
				t.Errorf("error %q does not start with the file", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
}
