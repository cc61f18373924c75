package edgebench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tributarydb/tributary/bench/internal/benchplot"
	"github.com/tributarydb/tributary/bench/internal/report"
)

// Host describes the machine a run measured: report.Machine plus the
// kernel release and the load averages around the run, since the figures
// mean little on a busy machine.
type Host struct {
	report.Machine
	Kernel string `json:"kernel,omitempty"`
	// LoadBefore and LoadAfter are /proc/loadavg's 1, 5 and 15-minute
	// averages at the start and the end of the run.
	LoadBefore []float64 `json:"load_before,omitempty"`
	LoadAfter  []float64 `json:"load_after,omitempty"`
}

// String is a one-line summary with the load averages.
func (h Host) String() string {
	s := h.Machine.String()
	if h.Kernel != "" {
		s += ", kernel " + h.Kernel
	}
	if len(h.LoadBefore) == 3 {
		s += fmt.Sprintf(", load %.2f", h.LoadBefore[0])
		if len(h.LoadAfter) == 3 {
			s += fmt.Sprintf(" → %.2f", h.LoadAfter[0])
		}
	}
	return s
}

// DetectHost describes this machine now; call Finish at the end of the
// run.
func DetectHost() Host { return detectHost() }

// Finish records the load averages at the end of the run.
func (h *Host) Finish() { h.finish() }

// SavePlot draws chart to ResultsDir/<workload>-<profile>-<name>.png and
// returns the path.
func SavePlot(c Common, workload, name string, chart benchplot.Chart) (string, error) {
	return savePlot(c, workload, name, chart)
}

// Save writes r to ResultsDir/<workload>-<profile>.json and returns the
// path ("" when ResultsDir is empty).
func (r Record) Save(c Common) (string, error) { return r.write(c) }

func detectHost() Host {
	h := Host{Machine: report.DetectMachine(), LoadBefore: loadAvg()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.Kernel = strings.TrimSpace(string(b))
	}
	return h
}

func (h *Host) finish() { h.LoadAfter = loadAvg() }

// loadAvg reads /proc/loadavg; nil where there is none.
func loadAvg() []float64 {
	if avg, ok := report.LoadAverages(); ok {
		return avg[:]
	}
	return nil
}

// Record is what a run writes to ResultsDir/<workload>-<profile>.json and,
// as one line, to the end of its output.
type Record struct {
	Workload string    `json:"workload"`
	Profile  string    `json:"profile"`
	Time     time.Time `json:"time"`
	Commit   string    `json:"commit"`
	Machine  Host      `json:"machine"`
	Config   any       `json:"config"`
	Figures  any       `json:"figures"`
	// Published are other systems' figures on other hardware, for
	// comparison only.
	Published map[string]string `json:"published,omitempty"`
	// Plots are the PNG files drawn beside the record (base names in the
	// saved file).
	Plots []string `json:"plots,omitempty"`
}

// write saves r as indented JSON in dir (when set) and returns the path.
func (r Record) write(c Common) (string, error) {
	if c.ResultsDir == "" {
		return "", nil
	}
	if err := os.MkdirAll(c.ResultsDir, 0o755); err != nil {
		return "", err
	}
	// The plots lie beside the record: name them, without the directory.
	r.Plots = slices.Clone(r.Plots)
	for i, p := range r.Plots {
		r.Plots[i] = filepath.Base(p)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.ResultsDir, fileName(c, r.Workload, ".json"))
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// finishRecord writes the record and its JSON line after the table.
func finishRecord(c Common, r Record) error {
	path, err := r.write(c)
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if path != "" {
		fmt.Fprintf(c.Out, "\nresults: %s", path)
		for _, p := range r.Plots {
			fmt.Fprintf(c.Out, ", %s", p)
		}
		fmt.Fprintln(c.Out)
	}
	return report.WriteJSONLine(c.Out, r)
}

// savePlot draws chart to ResultsDir/<workload>-<profile>-<name>.png and
// returns the path.
func savePlot(c Common, workload, name string, chart benchplot.Chart) (string, error) {
	if err := os.MkdirAll(c.ResultsDir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(c.ResultsDir, fileName(c, workload, "-"+name+".png"))
	return path, benchplot.Save(path, chart)
}
