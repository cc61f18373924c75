package replica

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/rollup"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
)

// Rollup exports: an edge restored from the cloud (ReplicationService
// Restore) takes back the rollups of periods whose raw points the cloud
// no longer holds. They leave the engine packed as it stores them
// (node/rollup's pack format): about 10 to 20 bytes a cell.

// maxRollupEntryBytes bounds (about) the packs of one RollupSeries entry
// and of one ExportRollupsResponse; a series with more is split into
// several entries.
const maxRollupEntryBytes = 1 << 20

// maxRollupMessageBytes bounds the ExportRollupsResponse a Client accepts:
// one message of entries, each at most a pack over maxRollupEntryBytes.
const maxRollupMessageBytes = 4 * maxRollupEntryBytes

// RollupPack is one packed rollup value (node/rollup's format): the hours
// of the UTC day starting at StartMs, or the days of the daily pack
// starting at StartMs.
type RollupPack struct {
	StartMs int64
	Data    []byte
}

// RollupSeries is one entry of a rollup export: packed rollups of one
// series of an edge. One series may come in several entries; a pack is
// never in two.
type RollupSeries struct {
	Labels        labels.Labels // as the edge named them (no EdgeLabel)
	Hourly, Daily []RollupPack
}

// RollupSource is where an edge's rollups are exported from: a Store, or
// a peer's store through a Client.
type RollupSource interface {
	ExportRollups(ctx context.Context, edge string, minT, maxT int64, fn func(RollupSeries) error) error
}

var (
	_ RollupSource = (*Store)(nil)
	_ RollupSource = (*Client)(nil)
)

// ExportRollups calls fn with the rollups of every series of edge that
// has cells (hours, days) starting in [minT, maxT] (inclusive, ms), as
// node.Node.ExportRollups reads them (cells holding unflushed samples are
// computed from raw points, as a query of them is answered), in label
// order, each series in entries of about maxRollupEntryBytes at most.
// Memory: one series' packs in the range. Errors: bad arguments wrap
// model.ErrBadQuery; an error of fn is returned as is and stops the export.
// Safe for concurrent use.
func (s *Store) ExportRollups(ctx context.Context, edge string, minT, maxT int64, fn func(RollupSeries) error) error {
	if err := validEdge(edge); err != nil {
		return fmt.Errorf("%w: export rollups: %w", model.ErrBadQuery, err)
	}
	m, err := labels.NewMatcher(labels.MatchEqual, EdgeLabel, edge)
	if err != nil {
		return fmt.Errorf("export rollups of %q: %w", edge, err)
	}
	var fnErr error
	err = s.eng.ExportRollups(ctx, []*labels.Matcher{m}, minT, maxT, func(r node.SeriesRollups) error {
		ls, _ := stripEdge(r.Labels)
		fnErr = splitRollups(ls, r, fn)
		return fnErr
	})
	switch {
	case err == nil:
		return nil
	case fnErr != nil && errors.Is(err, fnErr):
		return fnErr
	}
	return fmt.Errorf("export rollups of %q: %w", edge, err)
}

// splitRollups packs r and hands it to fn in entries of about
// maxRollupEntryBytes.
func splitRollups(ls labels.Labels, r node.SeriesRollups, fn func(RollupSeries) error) error {
	e := RollupSeries{Labels: ls}
	size := 0
	emit := func() error {
		if len(e.Hourly) == 0 && len(e.Daily) == 0 {
			return nil
		}
		err := fn(e)
		e, size = RollupSeries{Labels: ls}, 0
		return err
	}
	add := func(list *[]RollupPack, p RollupPack) error {
		if size > 0 && size+len(p.Data) > maxRollupEntryBytes {
			if err := emit(); err != nil {
				return err
			}
		}
		*list = append(*list, p)
		size += len(p.Data) + 16
		return nil
	}
	for _, h := range r.Hourly {
		if err := add(&e.Hourly, RollupPack{StartMs: h.Day, Data: h.Hours.AppendBinary(nil, h.Day)}); err != nil {
			return err
		}
	}
	for _, d := range r.Daily {
		if err := add(&e.Daily, RollupPack{StartMs: d.Pack, Data: d.Days.AppendBinary(nil, d.Pack)}); err != nil {
			return err
		}
	}
	return emit()
}

// DecodeRollups decodes the packs of an entry into what node.Node's
// ImportRollups takes. A pack that is not at a day (hourly) or a daily
// pack's start, or that does not decode, is an error wrapping
// ErrInvalidSegment.
func DecodeRollups(e RollupSeries) (node.SeriesRollups, error) {
	r := node.SeriesRollups{Labels: e.Labels}
	for _, p := range e.Hourly {
		if rollup.BucketStart(p.StartMs, rollup.Day) != p.StartMs {
			return r, fmt.Errorf("%w: hourly rollups of %s at %d, not the start of a day", ErrInvalidSegment, e.Labels, p.StartMs)
		}
		h, err := rollup.DecodeHourly(p.Data, p.StartMs)
		if err != nil {
			return r, fmt.Errorf("%w: hourly rollups of %s at %d: %w", ErrInvalidSegment, e.Labels, p.StartMs, err)
		}
		r.Hourly = append(r.Hourly, node.HourlyRollups{Day: p.StartMs, Hours: h})
	}
	for _, p := range e.Daily {
		if rollup.PackStart(p.StartMs) != p.StartMs {
			return r, fmt.Errorf("%w: daily rollups of %s at %d, not the start of a pack", ErrInvalidSegment, e.Labels, p.StartMs)
		}
		d, err := rollup.DecodeDaily(p.Data, p.StartMs)
		if err != nil {
			return r, fmt.Errorf("%w: daily rollups of %s at %d: %w", ErrInvalidSegment, e.Labels, p.StartMs, err)
		}
		r.Daily = append(r.Daily, node.DailyRollups{Pack: p.StartMs, Days: d})
	}
	return r, nil
}

// RetentionStart returns the oldest times (ms) whose data the store keeps,
// by the retention in force: raw points from raw on (older ones are
// refused when they arrive and dropped by retention, in whole partitions,
// so some stay a little longer; only their rollups remain), and rollups
// from oldest on (the longer of the hourly and daily retentions).
func (s *Store) RetentionStart() (raw, oldest int64) {
	r, h, d := s.eng.Retention()
	now := s.opts.Now()
	return now.Add(-r).UnixMilli(), now.Add(-max(h, d)).UnixMilli()
}

// ExportRollups streams the entries of a rollup export, several to a
// message of about maxRollupEntryBytes, then the final message.
func (s *Server) ExportRollups(req *clusterv1.ExportRollupsRequest, stream clusterv1.ReplicaService_ExportRollupsServer) error {
	ctx := stream.Context()
	if err := s.authorize(ctx); err != nil {
		return err
	}
	if req.GetMaxTimeMs() < req.GetMinTimeMs() {
		return toStatus(fmt.Errorf("%w: export rollups of %q: time range [%d, %d] ends before it starts", model.ErrBadQuery, req.GetEdge(), req.GetMinTimeMs(), req.GetMaxTimeMs()))
	}
	msg := &clusterv1.ExportRollupsResponse{}
	size := 0
	var entries int64
	err := s.opts.Store.ExportRollups(ctx, req.GetEdge(), req.GetMinTimeMs(), req.GetMaxTimeMs(), func(e RollupSeries) error {
		p := rollupSeriesToProto(e)
		n := proto.Size(p)
		if size > 0 && size+n > maxRollupEntryBytes {
			if err := stream.Send(msg); err != nil {
				return err
			}
			msg, size = &clusterv1.ExportRollupsResponse{}, 0
		}
		msg.Series = append(msg.Series, p)
		size += n
		entries++
		return nil
	})
	if err != nil {
		return toStatus(err)
	}
	msg.Done, msg.Entries = true, entries
	return stream.Send(msg)
}

// ExportRollups has the contract of Store.ExportRollups, over the peer's
// store. Every entry is checked (labels, packs' starts and sizes; the
// packs are decoded by DecodeRollups, not here); an answer that breaks
// the protocol is an error wrapping ErrInvalidSegment.
func (c *Client) ExportRollups(ctx context.Context, edge string, minT, maxT int64, fn func(RollupSeries) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream when fn fails
	stream, err := c.rpc.ExportRollups(ctx, &clusterv1.ExportRollupsRequest{Edge: edge, MinTimeMs: minT, MaxTimeMs: maxT},
		grpc.MaxCallRecvMsgSize(maxRollupMessageBytes))
	if err != nil {
		return fmt.Errorf("export rollups of %q from peer: %w", edge, fromStatus(err, model.ErrBadQuery))
	}
	var entries int64
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("export rollups of %q from peer: %w: the answer ended without its final message", edge, ErrInvalidSegment)
		}
		if err != nil {
			return fmt.Errorf("export rollups of %q from peer: %w", edge, fromStatus(err, model.ErrBadQuery))
		}
		for _, p := range msg.GetSeries() {
			e, err := rollupSeriesFromProto(p)
			if err != nil {
				return fmt.Errorf("export rollups of %q from peer: entry %d: %w", edge, entries+1, err)
			}
			entries++
			if err := fn(e); err != nil {
				return err
			}
		}
		if msg.GetDone() {
			if msg.GetEntries() != entries {
				return fmt.Errorf("export rollups of %q from peer: %w: the peer says it sent %d entries, %d arrived",
					edge, ErrInvalidSegment, msg.GetEntries(), entries)
			}
			return nil
		}
	}
}

func rollupSeriesToProto(e RollupSeries) *clusterv1.RollupSeries {
	p := &clusterv1.RollupSeries{Labels: labelsToProto(e.Labels)}
	for _, h := range e.Hourly {
		p.Hourly = append(p.Hourly, &clusterv1.RollupPack{StartMs: h.StartMs, Data: h.Data})
	}
	for _, d := range e.Daily {
		p.Daily = append(p.Daily, &clusterv1.RollupPack{StartMs: d.StartMs, Data: d.Data})
	}
	return p
}

// rollupSeriesFromProto checks an entry's shape: labels, and packs that
// are not empty.
func rollupSeriesFromProto(p *clusterv1.RollupSeries) (RollupSeries, error) {
	e := RollupSeries{Labels: labelsFromProto(p.GetLabels())}
	if len(e.Labels) == 0 {
		return e, fmt.Errorf("%w: rollups of a series without labels", ErrInvalidSegment)
	}
	if len(p.GetHourly())+len(p.GetDaily()) == 0 {
		return e, fmt.Errorf("%w: rollups of %s: no packs", ErrInvalidSegment, e.Labels)
	}
	for _, x := range p.GetHourly() {
		if len(x.GetData()) == 0 {
			return e, fmt.Errorf("%w: rollups of %s: empty hourly pack at %d", ErrInvalidSegment, e.Labels, x.GetStartMs())
		}
		e.Hourly = append(e.Hourly, RollupPack{StartMs: x.GetStartMs(), Data: x.GetData()})
	}
	for _, x := range p.GetDaily() {
		if len(x.GetData()) == 0 {
			return e, fmt.Errorf("%w: rollups of %s: empty daily pack at %d", ErrInvalidSegment, e.Labels, x.GetStartMs())
		}
		e.Daily = append(e.Daily, RollupPack{StartMs: x.GetStartMs(), Data: x.GetData()})
	}
	return e, nil
}

// ImportRollups writes the rollup cells of one export entry of edge into
// this store, each replacing the stored cell of the same hour or day (the
// others are kept): a replica being given an edge's history copies the
// rollups of the periods older than its raw retention this way (raw
// points are copied with Copy). Importing the same entry again changes
// nothing. A pack that does not decode wraps ErrInvalidSegment, and
// nothing of the entry is written.
func (s *Store) ImportRollups(edge string, e RollupSeries) error {
	if err := validEdge(edge); err != nil {
		return err
	}
	r, err := DecodeRollups(e)
	if err != nil {
		return err
	}
	if r.Labels.Get(EdgeLabel) != "" {
		return fmt.Errorf("%w: rollups of %s carry the reserved label %s", ErrInvalidSegment, r.Labels, EdgeLabel)
	}
	r.Labels = append(slices.Clone(r.Labels), labels.Label{Name: EdgeLabel, Value: edge})
	if err := s.eng.ImportRollups(r); err != nil {
		return fmt.Errorf("import rollups of %s of %q: %w", e.Labels, edge, err)
	}
	return nil
}

// SyncImports makes every ImportRollups that returned so far durable.
func (s *Store) SyncImports() error { return s.eng.SyncImports() }
