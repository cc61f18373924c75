package report

import (
	"math"
	"os"
	"strconv"
	"strings"
)

// LoadAverages reads the machine's 1, 5 and 15-minute load averages from
// /proc/loadavg; ok is false where there is no such file or it does not
// start with three numbers. The benchmarks print them beside their
// figures: a loaded machine explains a slow run.
func LoadAverages() (avg [3]float64, ok bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return avg, false
	}
	return parseLoadAvg(string(b))
}

// parseLoadAvg reads the first three fields of /proc/loadavg's text.
func parseLoadAvg(text string) (avg [3]float64, ok bool) {
	f := strings.Fields(text)
	if len(f) < 3 {
		return avg, false
	}
	for i := range avg {
		x, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return [3]float64{}, false
		}
		avg[i] = x
	}
	return avg, true
}

// LoadAveragesText is LoadAverages as /proc/loadavg writes them
// ("0.52 0.61 0.70"), or unknown.
func LoadAveragesText(unknown string) string {
	avg, ok := LoadAverages()
	if !ok {
		return unknown
	}
	return strconv.FormatFloat(avg[0], 'f', 2, 64) + " " + strconv.FormatFloat(avg[1], 'f', 2, 64) + " " + strconv.FormatFloat(avg[2], 'f', 2, 64)
}

// LoadAverage1m is the machine's 1-minute load average, NaN where unknown.
func LoadAverage1m() float64 {
	if avg, ok := LoadAverages(); ok {
		return avg[0]
	}
	return math.NaN()
}
