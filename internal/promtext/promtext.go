// Package promtext reads the samples of a Prometheus text exposition (what
// GET /metrics answers) into a map from the series, its name with its label
// set as written, to its value: what the end-to-end tests and the
// benchmarks read of the processes they start. It is not a full parser:
// comments, types and histograms' structure are not interpreted.
package promtext

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Parse reads an exposition. Comment and blank lines are skipped; a
// sample line that does not parse is an error naming its line. A line may
// be at most 1 MiB.
func Parse(r io.Reader) (map[string]float64, error) {
	out := make(map[string]float64)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, v, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %w", n, line, err)
		}
		out[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	return out, nil
}

// parseLine splits a sample line into its series and value. The value
// follows the series, after the label set's closing brace when there is
// one (label values may hold spaces); a timestamp may follow it.
func parseLine(line string) (string, float64, error) {
	var name, rest string
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := strings.LastIndexByte(line, '}')
		if j < i {
			return "", 0, fmt.Errorf("unterminated label set")
		}
		name, rest = line[:j+1], line[j+1:]
	} else {
		name, rest, _ = strings.Cut(line, " ")
	}
	fields := strings.Fields(rest)
	if name == "" || len(fields) == 0 || len(fields) > 2 {
		return "", 0, fmt.Errorf("want 'name value [timestamp]'")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return "", 0, fmt.Errorf("value: %w", err)
	}
	return name, v, nil
}
