package coordinator

import (
	"context"

	"github.com/tributarydb/tributary/coordinator/intake"
	"github.com/tributarydb/tributary/coordinator/replica"
)

// restoreSource gives the intake's Restore calls an edge's data: from this
// coordinator's replica store, or from another coordinator's over the
// cluster link.
type restoreSource struct{ c *Coordinator }

var _ intake.RestoreSource = restoreSource{}

// exportSource is coordinator coordID's replica store.
func (r restoreSource) exportSource(coordID string) (interface {
	replica.ExportSource
	replica.RollupSource
}, error) {
	if coordID == r.c.opts.NodeID {
		return r.c.store, nil
	}
	return r.c.links.peer(coordID)
}

func (r restoreSource) ExportRaw(ctx context.Context, coordID, edge string, minT, maxT int64, lastSeq uint64, maxFileBytes int64, fn func(intake.RestoreFile) error) error {
	src, err := r.exportSource(coordID)
	if err != nil {
		return err
	}
	return src.Export(ctx, edge, minT, maxT, 1, lastSeq, maxFileBytes, func(f replica.ExportedFile) error {
		return fn(intake.RestoreFile{Data: f.Data, CRC: f.Info.CRC, Points: f.Info.Points, MinT: f.Info.MinT, MaxT: f.Info.MaxT})
	})
}

func (r restoreSource) ExportRollups(ctx context.Context, coordID, edge string, minT, maxT int64, fn func(intake.RollupSeries) error) error {
	src, err := r.exportSource(coordID)
	if err != nil {
		return err
	}
	return src.ExportRollups(ctx, edge, minT, maxT, func(e replica.RollupSeries) error {
		out := intake.RollupSeries{Labels: e.Labels}
		for _, p := range e.Hourly {
			out.Hourly = append(out.Hourly, intake.RollupPack{StartMs: p.StartMs, Data: p.Data})
		}
		for _, p := range e.Daily {
			out.Daily = append(out.Daily, intake.RollupPack{StartMs: p.StartMs, Data: p.Data})
		}
		return fn(out)
	})
}

// RetentionStart is this coordinator's; every coordinator of a cluster
// runs with the same retention flags.
func (r restoreSource) RetentionStart() (raw, oldest int64) { return r.c.store.RetentionStart() }
