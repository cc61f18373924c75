// Package report formats benchmark results: aligned text tables for people
// and single-line JSON for machines, plus a description of the machine the
// benchmark ran on, its load averages, and the nearest-rank quantile every
// benchmark's percentiles are.
//
// Everything here is a pure function of its arguments except DetectMachine
// and the load averages, which read the host; all of it is safe for
// concurrent use.
package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Machine describes the host a benchmark ran on.
type Machine struct {
	GOOS     string `json:"goos"`
	GOARCH   string `json:"goarch"`
	NProc    int    `json:"nproc"`
	CPUModel string `json:"cpu_model,omitempty"`
	MemMiB   int64  `json:"mem_mib,omitempty"`
}

// String is a one-line summary such as "linux/amd64, 2 CPUs (Intel Xeon), 24105 MiB".
func (m Machine) String() string {
	s := fmt.Sprintf("%s/%s, %d CPUs", m.GOOS, m.GOARCH, m.NProc)
	if m.CPUModel != "" {
		s += " (" + m.CPUModel + ")"
	}
	if m.MemMiB > 0 {
		s += fmt.Sprintf(", %d MiB RAM", m.MemMiB)
	}
	return s
}

// DetectMachine describes this host. CPU model and memory are read from
// /proc where it exists and left empty elsewhere.
func DetectMachine() Machine {
	m := Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, NProc: runtime.NumCPU()}
	if v, ok := procField("/proc/cpuinfo", "model name"); ok {
		m.CPUModel = v
	} else if v, ok := procField("/proc/cpuinfo", "Model"); ok { // Raspberry Pi
		m.CPUModel = v
	}
	if v, ok := procField("/proc/meminfo", "MemTotal"); ok {
		if kb, err := strconv.ParseInt(strings.TrimSuffix(v, " kB"), 10, 64); err == nil {
			m.MemMiB = kb / 1024
		}
	}
	return m
}

// procField returns the value of the first "key: value" line of path.
func procField(path, key string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// Provenance ends the JSON line of a benchmark held to targets: the
// targets, the notes on the figures, and the code and host measured.
// Embedded last in a result struct, its fields encode as that struct's own.
type Provenance struct {
	Targets map[string]float64 `json:"targets"`
	Notes   []string           `json:"notes"`
	Commit  string             `json:"commit"`
	Machine Machine            `json:"machine"`
}

// NewProvenance is the provenance of a run of commit on machine, held to
// targets, with no notes yet (an empty list, which encodes as [], not null).
func NewProvenance(targets map[string]float64, commit string, machine Machine) Provenance {
	return Provenance{Targets: targets, Notes: []string{}, Commit: commit, Machine: machine}
}

// WriteJSONLine writes v as compact JSON on exactly one line.
func WriteJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// WriteNotesAndJSONLine ends a benchmark's report: each note on a line of
// its own ("note: ..."), a blank line, and then v as the JSON line, which is
// always the last line a benchmark prints.
func WriteNotesAndJSONLine(w io.Writer, notes []string, v any) error {
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintln(w)
	return WriteJSONLine(w, v)
}

// Table is a text table with a header row, written with aligned columns.
type Table struct {
	Header []string
	Rows   [][]string
	// RightAlign marks columns whose cells are right-aligned (numbers).
	RightAlign []bool
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// AddTarget appends the row of a figure with a target, in a table whose
// columns are figure, measured, target and verdict: label, the measured
// text, the target as format writes its value, and the verdict on x.
func (t *Table) AddTarget(label, measured string, target Target, format func(float64) string, x Number) {
	t.Add(label, measured, target.Format(format), target.Verdict(float64(x)))
}

// Write prints the table with two spaces between columns and a rule under
// the header.
func (t *Table) Write(w io.Writer) error {
	widths := make([]int, len(t.Header))
	grow := func(row []string) {
		for i, c := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], displayWidth(c))
		}
	}
	grow(t.Header)
	for _, r := range t.Rows {
		grow(r)
	}
	bw := bufio.NewWriter(w)
	line := func(row []string) {
		var sb strings.Builder
		for i := range widths {
			cell := ""
			if i < len(row) {
				cell = row[i]
			}
			pad := strings.Repeat(" ", widths[i]-displayWidth(cell))
			if i > 0 {
				sb.WriteString("  ")
			}
			if i < len(t.RightAlign) && t.RightAlign[i] {
				sb.WriteString(pad + cell)
			} else {
				sb.WriteString(cell + pad)
			}
		}
		bw.WriteString(strings.TrimRight(sb.String(), " ") + "\n")
	}
	line(t.Header)
	rule := make([]string, len(widths))
	for i, wd := range widths {
		rule[i] = strings.Repeat("-", wd)
	}
	line(rule)
	for _, r := range t.Rows {
		line(r)
	}
	return bw.Flush()
}

// displayWidth counts runes, so that "°C" and "≥" line up.
func displayWidth(s string) int { return len([]rune(s)) }

// KeyValues prints "key  value" lines with aligned values.
func KeyValues(w io.Writer, kv [][2]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range kv {
		fmt.Fprintf(tw, "%s\t%s\n", p[0], p[1])
	}
	return tw.Flush()
}

// Int formats n with thousands separators: 1234567 → "1,234,567".
func Int(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var sb strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			sb.WriteByte(',')
		}
		sb.WriteRune(c)
	}
	if neg {
		return "-" + sb.String()
	}
	return sb.String()
}

// Float formats x with the given number of decimals, or "n/a" when x is NaN.
func Float(x float64, decimals int) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return strconv.FormatFloat(x, 'f', decimals, 64)
}

// Decimals returns Float with the given number of decimals as a function,
// the form Target.Format takes.
func Decimals(decimals int) func(float64) string {
	return func(x float64) string { return Float(x, decimals) }
}

// Whole formats x rounded to a whole number with thousands separators
// (2999999.6 → "3,000,000"), or "n/a" when x is NaN.
func Whole(x float64) string {
	if math.IsNaN(x) {
		return "n/a"
	}
	return Int(int64(math.Round(x)))
}

// Round rounds x to the given number of decimals, for JSON fields that
// should not carry float noise. NaN stays NaN.
func Round(x float64, decimals int) float64 {
	p := math.Pow10(decimals)
	return math.Round(x*p) / p
}

// Number is a float64 that encodes NaN (a figure that could not be
// measured) as JSON null instead of failing the whole encoding.
type Number float64

// MarshalJSON implements json.Marshaler.
func (n Number) MarshalJSON() ([]byte, error) {
	x := float64(n)
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, x, 'f', -1, 64), nil
}

// Text formats n with the given number of decimals, or "n/a" when it was
// not measured (NaN): Float of a Number.
func (n Number) Text(decimals int) string { return Float(float64(n), decimals) }

// Target is a goal for a measured figure: at least Value, or at most Value
// when AtMost is set.
type Target struct {
	Value  float64
	AtMost bool
}

// Met reports whether x reaches the target. An unmeasured (NaN) figure
// never does.
func (t Target) Met(x float64) bool {
	if math.IsNaN(x) {
		return false
	}
	if t.AtMost {
		return x <= t.Value
	}
	return x >= t.Value
}

// Verdict is "met" when x reaches the target and "missed" otherwise, for the
// last column of a report table.
func (t Target) Verdict(x float64) string {
	if t.Met(x) {
		return "met"
	}
	return "missed"
}

// Format renders the target as "≥ 3,000,000" or "≤ 0.30", with the value
// formatted by format.
func (t Target) Format(format func(float64) string) string {
	if t.AtMost {
		return "≤ " + format(t.Value)
	}
	return "≥ " + format(t.Value)
}
