package replicator

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tributarydb/tributary/internal/telemetry"
)

// meterName is the instrumentation scope of the Shipper's instruments.
const meterName = "github.com/tributarydb/tributary/replicator"

// registerMetrics creates the Shipper's instruments on
// opts.MeterProvider: observable ones over Stats, read once per
// collection. Their Prometheus names are the tributary_replication_*
// family (tributary.replication.lag with unit s is
// tributary_replication_lag_seconds).
func (s *Shipper) registerMetrics() error {
	in := telemetry.NewInstruments(s.opts.MeterProvider.Meter(meterName))
	gauge, counter := in.Float64Gauge, in.Int64Counter
	connected := gauge("tributary.replication.connected", "", "1 while a stream to a coordinator is open and welcomed.")
	acked := gauge("tributary.replication.acked_through_seq", "", "Every WAL segment up to this sequence is held by the cloud or a recorded gap.")
	sealed := gauge("tributary.replication.newest_sealed_seq", "", "Newest sealed WAL segment of this node.")
	lag := gauge("tributary.replication.lag", "s", "Age of the newest point of the oldest segment the cloud does not hold yet.")
	lagBytes := gauge("tributary.replication.lag.bytes", "By", "Bytes of WAL not yet held by the cloud (backlog plus the open segment).")
	backlogSegs := gauge("tributary.replication.backlog.segments", "{segment}", "Sealed segments not yet held by the cloud.")
	backlogBytes := gauge("tributary.replication.backlog.bytes", "By", "Bytes of those segments.")
	retained := gauge("tributary.replication.retained.bytes", "By", "Sealed segments kept on disk for shipping (what the budget bounds).")
	gaps := gauge("tributary.replication.gaps", "{gap}", "Gap records in the cursor (segments the edge will not ship as such).")
	gapPoints := gauge("tributary.replication.gap.points", "{point}", "Points in segments declared as gaps (not shipped), since the cursor was created.")
	dropped := gauge("tributary.replication.dropped.points", "{point}", "Points dropped by the drop-oldest overflow policy, since the cursor was created.")
	unrecoverable := gauge("tributary.replication.unrecoverable.points", "{point}", "Known points of missing segments that will not be re-shipped: the local store may lack them (lost before they were flushed).")
	perPoint := gauge("tributary.replication.shipped.bytes_per_point", "By", "Compressed bytes shipped per point since start.")
	blocked := gauge("tributary.replication.writes_blocked", "", "1 while the backlog is over budget and writes are refused.")
	backfilled := counter("tributary.replication.backfilled.points", "{point}", "Points of gaps backfilled from the local store and acknowledged by the cloud, since the cursor was created.")
	shortfall := counter("tributary.replication.backfill.shortfall.points", "{point}", "Points gaps declared that their backfills did not ship since start (the node's retention dropped them first); the cloud counts what it received.")
	segs := counter("tributary.replication.shipped.segments", "{segment}", "Segments the cloud acknowledged since start.")
	bytes := counter("tributary.replication.shipped.bytes", "By", "Compressed bytes of those segments.")
	points := counter("tributary.replication.shipped.points", "{point}", "Points in those segments.")
	refusals := counter("tributary.replication.refusals", "{refusal}", "Segments and gaps the cloud refused.")
	sessions := counter("tributary.replication.sessions", "{session}", "Streams opened to coordinators.")
	failures := counter("tributary.replication.session_failures", "{session}", "Streams that ended (every end is a failure).")
	sends := counter("tributary.replication.sends", "{segment}", "Segments sent, resends included.")
	reshipRequests := counter("tributary.replication.reship.requests", "{request}", "Runs of segments the cloud asked to ship again because no live replica holds them (repeats included), since start.")
	reshipIgnored := counter("tributary.replication.reship.ignored", "{request}", "Reship requests ignored: the run overlapped one already queued, or the queue was full.")
	reshipUnavailable := counter("tributary.replication.reship.unavailable", "{run}", "Runs, or parts of runs, answered unavailable: the node can no longer give them whole (past its raw retention, lost before flushed, fewer points in the store).")
	reshipped := counter("tributary.replication.reship.segments", "{segment}", "Segment files shipped again on request and acknowledged, by source: wal (the original files) or store (rebuilt from the local store).")
	reshipBytes := counter("tributary.replication.reship.bytes", "By", "Compressed bytes of those files.")
	reshipQueued := gauge("tributary.replication.reship.queued", "{run}", "Runs being shipped again now.")
	if err := in.Err(); err != nil {
		return fmt.Errorf("replicator: metrics: %w", err)
	}
	fromWAL, fromStore := metric.WithAttributes(attribute.String("source", "wal")), metric.WithAttributes(attribute.String("source", "store"))
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	_, err := in.Meter().RegisterCallback(func(_ context.Context, o metric.Observer) error {
		st := s.Stats()
		o.ObserveFloat64(connected, b(st.Connected))
		o.ObserveFloat64(acked, float64(st.AckedThrough))
		o.ObserveFloat64(sealed, float64(st.NewestSealed))
		o.ObserveFloat64(lag, st.LagSeconds)
		o.ObserveFloat64(lagBytes, float64(st.LagBytes))
		o.ObserveFloat64(backlogSegs, float64(st.BacklogSegments))
		o.ObserveFloat64(backlogBytes, float64(st.BacklogBytes))
		o.ObserveFloat64(retained, float64(st.RetainedBytes))
		o.ObserveFloat64(gaps, float64(len(st.Gaps)))
		o.ObserveFloat64(gapPoints, float64(st.GapPoints))
		o.ObserveFloat64(dropped, float64(st.DroppedPoints))
		o.ObserveFloat64(unrecoverable, float64(st.UnrecoverablePoints))
		o.ObserveFloat64(perPoint, st.BytesPerPoint)
		o.ObserveFloat64(blocked, b(st.WritesBlocked))
		o.ObserveInt64(backfilled, int64(st.BackfilledPoints))
		o.ObserveInt64(shortfall, int64(st.BackfillShortfallPoints))
		o.ObserveInt64(segs, st.ShippedSegments)
		o.ObserveInt64(bytes, st.ShippedBytes)
		o.ObserveInt64(points, st.ShippedPoints)
		o.ObserveInt64(refusals, st.Refusals)
		o.ObserveInt64(sessions, st.Sessions)
		o.ObserveInt64(failures, st.SessionFailures)
		o.ObserveInt64(sends, st.Sends)
		o.ObserveInt64(reshipRequests, st.ReshipRequests)
		o.ObserveInt64(reshipIgnored, st.ReshipsIgnored)
		o.ObserveInt64(reshipUnavailable, st.ReshipsUnavailable)
		o.ObserveInt64(reshipped, st.ReshippedFromWAL, fromWAL)
		o.ObserveInt64(reshipped, st.ReshippedRebuilt, fromStore)
		o.ObserveInt64(reshipBytes, st.ReshippedBytes)
		o.ObserveFloat64(reshipQueued, float64(st.ReshipsQueued))
		return nil
	}, in.Observables()...)
	if err != nil {
		return fmt.Errorf("replicator: metrics: %w", err)
	}
	return nil
}
