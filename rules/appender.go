package rules

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	"github.com/prometheus/prometheus/storage"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// appendable writes rule results into the backend: each Appender gathers
// the samples of one rule evaluation and writes them at Commit, in writes
// of at most max samples (a larger result is written as it grows).
type appendable struct {
	b   backend.Backend
	max int
}

func (a *appendable) Appender(ctx context.Context) storage.Appender {
	return &appender{a: a, ctx: ctx}
}

// errNativeHistogram refuses native histograms, which the store does not
// hold (a rule that produces them fails with this error).
var errNativeHistogram = errors.New("native histograms are not stored; make the rule produce float samples")

// appender is one transaction; used by one goroutine.
type appender struct {
	a       *appendable
	ctx     context.Context
	batches []model.Batch
	err     error // of a write made before Commit
}

// Append implements storage.Appender. The sample is stored at Commit (or
// earlier, with others, once max samples are waiting).
func (ap *appender) Append(_ storage.SeriesRef, l labels.Labels, t int64, v float64) (storage.SeriesRef, error) {
	ls := make([]nlabels.Label, 0, l.Len())
	l.Range(func(lb labels.Label) { ls = append(ls, nlabels.Label{Name: lb.Name, Value: lb.Value}) })
	ap.batches = append(ap.batches, model.Batch{Labels: ls, Ts: []int64{t}, Vs: []float64{v}})
	if len(ap.batches) >= ap.a.max && ap.err == nil {
		ap.err = ap.write()
	}
	return 0, nil
}

// write writes the waiting samples; a write that stores some samples and
// refuses others is an error naming the first refusal.
func (ap *appender) write() error {
	if len(ap.batches) == 0 {
		return nil
	}
	res, err := ap.a.b.Write(ap.ctx, ap.batches)
	n := len(ap.batches)
	ap.batches = ap.batches[:0]
	if err != nil {
		return fmt.Errorf("write %d rule samples: %w", n, err)
	}
	if res.Rejected > 0 {
		msg := ""
		if len(res.Rejections) > 0 {
			msg = ": " + res.Rejections[0].Message
		}
		return fmt.Errorf("write %d rule samples: %d refused%s", n, res.Rejected, msg)
	}
	return nil
}

// Commit implements storage.Appender.
func (ap *appender) Commit() error {
	err := ap.write()
	if ap.err != nil {
		return ap.err
	}
	return err
}

// Rollback implements storage.Appender: the samples not yet written are
// dropped (those written because the result was large stay).
func (ap *appender) Rollback() error {
	ap.batches = nil
	return nil
}

func (*appender) SetOptions(*storage.AppendOptions) {}

func (*appender) AppendExemplar(storage.SeriesRef, labels.Labels, exemplar.Exemplar) (storage.SeriesRef, error) {
	return 0, nil
}

func (*appender) AppendHistogram(storage.SeriesRef, labels.Labels, int64, *histogram.Histogram, *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return 0, errNativeHistogram
}

func (*appender) AppendHistogramSTZeroSample(storage.SeriesRef, labels.Labels, int64, int64, *histogram.Histogram, *histogram.FloatHistogram) (storage.SeriesRef, error) {
	return 0, errNativeHistogram
}

func (*appender) UpdateMetadata(storage.SeriesRef, labels.Labels, metadata.Metadata) (storage.SeriesRef, error) {
	return 0, nil
}

func (*appender) AppendSTZeroSample(storage.SeriesRef, labels.Labels, int64, int64) (storage.SeriesRef, error) {
	return 0, nil
}
