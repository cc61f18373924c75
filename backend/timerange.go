package backend

import (
	"context"

	"github.com/tributarydb/tributary/node/labels"
)

// RangeLister is implemented by a backend whose series index knows when
// series had samples: its listings keep only the series with samples in
// [start, end] (Unix ms, inclusive), at the precision the implementation
// documents. A backend without it lists series of any time.
type RangeLister interface {
	// SeriesInRange is Series restricted to series with samples in
	// [start, end].
	SeriesInRange(ctx context.Context, ms []*labels.Matcher, start, end int64, limit int) ([]labels.Labels, error)
	// LabelNamesInRange is LabelNames restricted to series with samples
	// in [start, end].
	LabelNamesInRange(ctx context.Context, ms []*labels.Matcher, start, end int64) ([]string, error)
	// LabelValuesInRange is LabelValues restricted to series with samples
	// in [start, end].
	LabelValuesInRange(ctx context.Context, name string, ms []*labels.Matcher, start, end int64) ([]string, error)
}
