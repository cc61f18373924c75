// Package reporttest helps tests read a benchmark's output the way a
// machine does: by its last line, the JSON line report.WriteJSONLine wrote.
//
// Everything here is safe for concurrent use.
package reporttest

import (
	"encoding/json"
	"strings"
	"testing"
)

// LastJSONLine decodes the last line of out, failing the test if it is not
// a JSON object.
func LastJSONLine(t testing.TB, out string) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, out)
	}
	return last
}
