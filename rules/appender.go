package rules

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/metadata"
	promrules "github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/storage"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/model"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// appendable writes rule results into the backend: each Appender gathers
// the samples of one rule evaluation and writes them at Commit, in writes
// of at most max samples (a larger result is written as it grows). When
// the evaluation's context carries a groupWrites (a group none of whose
// rules reads another's results), Commit hands the samples to it instead,
// and the group's samples are written together (groupWrites).
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
		if gw := groupWritesOf(ap.ctx); gw != nil {
			ap.err = gw.add(ap.ctx, ap.batches, false)
			ap.batches = nil
		} else {
			ap.err = ap.write()
		}
	}
	return 0, nil
}

// write writes the waiting samples; a write that stores some samples and
// refuses others is an error naming the first refusal.
func (ap *appender) write() error {
	err := writeBatches(ap.ctx, ap.a.b, ap.batches)
	ap.batches = ap.batches[:0]
	return err
}

// writeBatches writes batches in one write; a write that stores some
// samples and refuses others is an error naming the first refusal.
func writeBatches(ctx context.Context, b backend.Backend, batches []model.Batch) error {
	if len(batches) == 0 {
		return nil
	}
	res, err := b.Write(ctx, batches)
	n := len(batches)
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
	if gw := groupWritesOf(ap.ctx); gw != nil {
		err := gw.add(ap.ctx, ap.batches, true)
		ap.batches = nil
		return errors.Join(ap.err, err)
	}
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

// groupWrites gathers the samples of one evaluation of a group none of
// whose rules reads another's results (the upstream dependency analysis),
// so that they are written together instead of one write, and one WAL
// fsync, per rule: the Commit of the group's last rule writes them (and so
// does any Commit that finds max samples waiting), in writes of at most
// max samples, and Manager.evalIteration writes what is left once the
// evaluation is over (the stale markers of series that went away, the
// samples of an evaluation cut short). A write that fails marks every rule
// of the group unhealthy with its error, since the samples of several
// rules were in it.
type groupWrites struct {
	g     *promrules.Group
	b     backend.Backend
	max   int
	rules int // rules in the group: the Commits of one evaluation

	mu      sync.Mutex
	batches []model.Batch
	commits int
}

type groupWritesKey struct{}

// newGroupWrites returns the groupWrites of an evaluation of g, or nil when
// a rule of g reads another's results (they must be written before it
// runs).
func newGroupWrites(g *promrules.Group, b backend.Backend, max int) *groupWrites {
	rs := g.Rules()
	if len(rs) < 2 {
		return nil
	}
	for _, r := range rs {
		if !r.NoDependentRules() {
			return nil
		}
	}
	return &groupWrites{g: g, b: b, max: max, rules: len(rs)}
}

func groupWritesOf(ctx context.Context) *groupWrites {
	gw, _ := ctx.Value(groupWritesKey{}).(*groupWrites)
	return gw
}

// add takes the samples of a rule (commit: its Commit) and writes what is
// waiting when the group's last rule commits or max samples wait.
func (gw *groupWrites) add(ctx context.Context, batches []model.Batch, commit bool) error {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	gw.batches = append(gw.batches, batches...)
	if commit {
		gw.commits++
	}
	if len(gw.batches) >= gw.max || gw.commits >= gw.rules {
		return gw.flushLocked(ctx)
	}
	return nil
}

// flush writes what is waiting.
func (gw *groupWrites) flush(ctx context.Context) error {
	gw.mu.Lock()
	defer gw.mu.Unlock()
	return gw.flushLocked(ctx)
}

func (gw *groupWrites) flushLocked(ctx context.Context) error {
	var err error
	for len(gw.batches) > 0 && err == nil {
		n := min(len(gw.batches), gw.max)
		err = writeBatches(ctx, gw.b, gw.batches[:n])
		gw.batches = gw.batches[n:]
	}
	gw.batches = nil
	if err != nil {
		err = fmt.Errorf("write the samples of group %q: %w", gw.g.Name(), err)
		for _, r := range gw.g.Rules() {
			r.SetHealth(promrules.HealthBad)
			r.SetLastError(err)
		}
	}
	return err
}
