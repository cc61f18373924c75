// Package benchplot draws the benchmark plots as PNG files with a pure-Go
// plotting library (gonum.org/v1/plot), so that the plots build without cgo
// on every platform tribench runs on.
package benchplot

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Series is one line of a chart.
type Series struct {
	Name string
	X, Y []float64
}

// Chart describes a line chart.
type Chart struct {
	Title, XLabel, YLabel string
	// XNames, when set, label the X positions 0, 1, 2, ... by name (for
	// example latency percentiles) instead of numbers.
	XNames []string
	// LogX and LogY draw that axis on a log scale; values at or below
	// zero are then left out.
	LogX, LogY bool
	Series     []Series
}

// Size of every plot: small enough to keep the committed files small.
const (
	width  = 16 * vg.Centimeter
	height = 10 * vg.Centimeter
)

// Save draws c to path; the extension picks the format (".png").
func Save(path string, c Chart) error {
	if len(c.Series) == 0 {
		return errors.New("benchplot: no series to draw")
	}
	p := plot.New()
	p.Title.Text = c.Title
	p.X.Label.Text = c.XLabel
	p.Y.Label.Text = c.YLabel
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	if c.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	if c.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	var lines []any
	drawn := 0
	for _, s := range c.Series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("benchplot: series %q has %d x and %d y values", s.Name, len(s.X), len(s.Y))
		}
		var xys plotter.XYs
		for i := range s.X {
			x, y := s.X[i], s.Y[i]
			if math.IsNaN(x) || math.IsNaN(y) || (c.LogX && x <= 0) || (c.LogY && y <= 0) {
				continue
			}
			xys = append(xys, plotter.XY{X: x, Y: y})
		}
		if len(xys) == 0 {
			continue
		}
		lines = append(lines, s.Name, xys)
		drawn++
	}
	if drawn == 0 {
		return errors.New("benchplot: no drawable points")
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return fmt.Errorf("benchplot: %w", err)
	}
	if len(c.XNames) > 0 {
		p.NominalX(c.XNames...)
	}
	// Head room above the data for the legend.
	if c.LogY {
		p.Y.Max *= 8
	} else {
		p.Y.Max *= 1.35
		p.Y.Min = min(p.Y.Min, 0) // a linear axis starts at zero
	}
	p.Legend.Left = true
	if err := p.Save(width, height, path); err != nil {
		return fmt.Errorf("benchplot: save %s: %w", path, err)
	}
	return nil
}
