package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun_BadInvocationsSayWhatIsWrong(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, 2, "Usage"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"bad wal sync", []string{"node", "--data-dir", "x", "--wal-sync", "sometimes"}, 2, "--wal-sync"},
		{"bad wal format", []string{"node", "--data-dir", "x", "--wal-format", "3"}, 2, "--wal-format"},
		{"bad log level", []string{"node", "--log-level", "loud"}, 2, "--log-level"},
		{"bad selector", []string{"query", `cpu{host=}`}, 2, "offset"},
		{"two selectors", []string{"query", "a", "b"}, 2, "exactly one selector"},
		{"bad function", []string{"query", "--step", "1m", "--fn", "median", "cpu"}, 2, "--fn"},
		{"compact missing dir", []string{"compact", "--data-dir", "/nonexistent/tributary"}, 1, "data dir"},
		{"version", []string{"version"}, 0, "tributary"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(c.args, &out, &errOut)
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, c.code, errOut.String())
			}
			if !strings.Contains(out.String()+errOut.String(), c.want) {
				t.Fatalf("output does not mention %q:\n%s%s", c.want, out.String(), errOut.String())
			}
		})
	}
}

func TestParseWALSync(t *testing.T) {
	if p, err := parseWALSync("interval:250ms"); err != nil || p.Interval.Milliseconds() != 250 {
		t.Fatalf("interval:250ms -> %+v %v", p, err)
	}
	if p, err := parseWALSync("always"); err != nil || p.Interval != 0 {
		t.Fatalf("always -> %+v %v", p, err)
	}
	for _, bad := range []string{"interval:", "interval:-1s", "never"} {
		if _, err := parseWALSync(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
