package coordinator

import (
	"context"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/internal/telemetry"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// The coordinator's own metrics observe counters its parts already keep
// (catalog sizes, intake and replica store statistics, open tunnels) when
// a reader collects; nothing is counted twice on the data path. The raft
// member and the query front end register theirs through their Options
// (raftnode and query metrics.go).

// meterName is the instrumentation scope of the coordinator's metrics.
const meterName = "github.com/tributarydb/tributary/coordinator"

// Attribute sets observed by the callback, made once.
var (
	roleEdge        = metric.WithAttributeSet(attribute.NewSet(attribute.String("role", "edge")))
	roleCoordinator = metric.WithAttributeSet(attribute.NewSet(attribute.String("role", "coordinator")))
	gapReasons      = []catalog.GapReason{catalog.GapBacklogOverflow, catalog.GapDropped, catalog.GapMissing}
	gapAttrs        = func() map[catalog.GapReason]metric.ObserveOption {
		m := map[catalog.GapReason]metric.ObserveOption{}
		for _, r := range gapReasons {
			m[r] = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", r.String())))
		}
		return m
	}()
	outcomeAttr = func(o string) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))
	}
	intakeStored, intakeDuplicate, intakeConflict = outcomeAttr("stored"), outcomeAttr("duplicate"), outcomeAttr("conflict")
	latePending, lateRecorded                     = outcomeAttr("pending"), outcomeAttr("recorded")
	reshipRequested, reshipUnavailable            = outcomeAttr("requested"), outcomeAttr("unavailable")
	outcomeDone, outcomeFailed                    = outcomeAttr("done"), outcomeAttr("failed")
	stateDown                                     = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "down")))
	stateActive                                   = metric.WithAttributeSet(attribute.NewSet(attribute.String("state", "active")))
	findingMissing                                = metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", "missing")))
	findingFound                                  = metric.WithAttributeSet(attribute.NewSet(attribute.String("kind", "found")))
	replicaApplied, replicaDuplicate              = outcomeAttr("applied"), outcomeAttr("duplicate")
	replicaConflict, replicaInvalid, replicaError = outcomeAttr("conflict"), outcomeAttr("invalid"), outcomeAttr("error")

	// Listener refusals, by listener and stage.
	refusedAttr = func(listener, stage string) metric.ObserveOption {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("listener", listener), attribute.String("stage", stage)))
	}
	clusterConnRefused, clusterStreamRefused = refusedAttr("cluster", "connection"), refusedAttr("cluster", "admission")
	intakeConnRefused, intakeStreamRefused   = refusedAttr("intake", "connection"), refusedAttr("intake", "admission")
	clusterHandshakeFailed                   = refusedAttr("cluster", "handshake")
	intakeHandshakeFailed                    = refusedAttr("intake", "handshake")
	clusterListener                          = metric.WithAttributeSet(attribute.NewSet(attribute.String("listener", "cluster")))
	intakeListener                           = metric.WithAttributeSet(attribute.NewSet(attribute.String("listener", "intake")))
	// refusalAttrs has every ship error code, so that each is reported
	// (as 0) before the first refusal.
	refusalAttrs = func() map[string]metric.ObserveOption {
		m := map[string]metric.ObserveOption{}
		for v, name := range pb.ShipErrorCode_name {
			if v != int32(pb.ShipErrorCode_SHIP_ERROR_CODE_UNSPECIFIED) {
				m[name] = metric.WithAttributeSet(attribute.NewSet(attribute.String("code", refusalCode(name))))
			}
		}
		return m
	}()
)

// registerMetrics registers the coordinator's observable instruments; the
// returned registration is unregistered when the coordinator stops.
func (c *Coordinator) registerMetrics(mp metric.MeterProvider) (metric.Registration, error) {
	in := telemetry.NewInstruments(mp.Meter(meterName))
	observe := []func(metric.Observer){
		c.catalogMetrics(in), c.intakeMetrics(in), c.healMetrics(in), c.replicaMetrics(in), c.listenerMetrics(in), c.tunnelMetrics(in),
	}
	if err := in.Err(); err != nil {
		return nil, fmt.Errorf("coordinator metrics: %w", err)
	}
	reg, err := in.Meter().RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, f := range observe {
			f(o)
		}
		return nil
	}, in.Observables()...)
	if err != nil {
		return nil, fmt.Errorf("coordinator metrics: %w", err)
	}
	return reg, nil
}

// catalogMetrics creates the instruments of the fleet catalog (sizes, held and lacking segments, gaps, coordinators by state) and returns what observes them.
func (c *Coordinator) catalogMetrics(in *telemetry.Instruments) func(metric.Observer) {
	series := in.Int64Gauge("tributary.catalog.series", "{series}", "Series registered in the fleet catalog.")
	nodes := in.Int64Gauge("tributary.catalog.nodes", "{node}", "Nodes registered in the fleet catalog, by role.")
	members := in.Int64Gauge("tributary.catalog.members", "{member}", "Raft members the catalog knows of.")
	placements := in.Int64Gauge("tributary.catalog.placements", "{edge}", "Edges with a placement (replica coordinators chosen).")
	heldRuns := in.Int64Gauge("tributary.catalog.held.runs", "{run}", "Runs of consecutive segments the cloud holds, over all edges (few runs: little fragmentation).")
	heldSegs := in.Int64Gauge("tributary.catalog.held.segments", "{segment}", "Segments the cloud holds, over all edges.")
	gaps := in.Int64Gauge("tributary.catalog.gaps", "{gap}", "Open recorded gaps (segments edges declared they will not ship and no backfill has covered yet), by reason.")
	gapSegs := in.Int64Gauge("tributary.catalog.gap.segments", "{segment}", "Segments inside open recorded gaps, over all edges.")
	underRep := in.Int64Gauge("tributary.catalog.under_replicated.segments", "{segment}", "Held segments an active replica lacks (counted once per replica that lacks it), over all edges: copies not done yet.")
	unsourced := in.Int64Gauge("tributary.catalog.unsourced.segments", "{segment}", "Held segments an active replica lacks that no live replica can give: the edge must ship them again, or they are on no live replica.")
	leaving := in.Int64Gauge("tributary.catalog.leaving.replicas", "{replica}", "Replicas being replaced (kept until their history is copied), over all edges.")
	coordStates := in.Int64Gauge("tributary.catalog.coordinators", "{coordinator}", "Registered coordinators by placement state: active, draining, down.")
	return func(o metric.Observer) {
		sz := c.fsm.Sizes()
		o.ObserveInt64(series, int64(sz.Series))
		o.ObserveInt64(nodes, int64(sz.Edges), roleEdge)
		o.ObserveInt64(nodes, int64(sz.Coordinators), roleCoordinator)
		o.ObserveInt64(members, int64(sz.Members))
		o.ObserveInt64(placements, int64(sz.Placements))
		o.ObserveInt64(heldRuns, int64(sz.HeldRuns))
		o.ObserveInt64(heldSegs, int64(sz.HeldSegments))
		for _, r := range gapReasons {
			o.ObserveInt64(gaps, int64(sz.Gaps[r]), gapAttrs[r])
		}
		o.ObserveInt64(gapSegs, int64(sz.GapSegments))
		o.ObserveInt64(underRep, int64(sz.UnderReplicatedSegments))
		o.ObserveInt64(unsourced, int64(sz.UnsourcedSegments))
		o.ObserveInt64(leaving, int64(sz.LeavingReplicas))
		for _, st := range []catalog.NodeState{catalog.NodeActive, catalog.NodeDraining, catalog.NodeDown} {
			o.ObserveInt64(coordStates, int64(sz.CoordinatorsByState[st]), metric.WithAttributes(attribute.String("state", st.String())))
		}
	}
}

// intakeMetrics creates the instruments of the segment intake and returns what observes them.
func (c *Coordinator) intakeMetrics(in *telemetry.Instruments) func(metric.Observer) {
	inSegs := in.Int64Counter("tributary.intake.segments", "{segment}", "Segments received from edges, by outcome: stored (on their replicas and recorded), duplicate (already held; acknowledged again), conflict (held with another checksum; refused).")
	inBytes := in.Int64Counter("tributary.intake.received", "By", "Segment data received from edges, compressed, as on the wire.")
	inRefused := in.Int64Counter("tributary.intake.refusals", "{refusal}", "Ship errors sent to edges, by code.")
	inGaps := in.Int64Counter("tributary.intake.gaps", "{gap}", "Gap declarations from edges recorded in the catalog (replays included).")
	inStreams := in.Int64Counter("tributary.intake.streams", "{stream}", "Shipping streams welcomed since start.")
	inOpen := in.Int64Gauge("tributary.intake.streams.open", "{stream}", "Shipping streams open now.")
	inBeats := in.Int64Counter("tributary.intake.heartbeats", "{command}", "Heartbeat commands proposed for the edges with an open stream.")
	inQuorum := in.Int64Counter("tributary.intake.quorum.acks", "{segment}", "Segments acknowledged once a write quorum held them, before every active replica did.")
	inLate := in.Int64Counter("tributary.intake.replica.late", "{store}", "Replica stores still running when their segment was acknowledged, by outcome: pending (started), recorded (completed and recorded as held).")
	inRefilled := in.Int64Counter("tributary.intake.refilled", "{segment}", "Held segments given to active replicas that lacked them (resends, segments shipped again on request).")
	inReships := in.Int64Counter("tributary.intake.reships", "{request}", "Runs of held segments edges were asked to ship again, by outcome: requested, unavailable (the edge cannot).")
	inRecords := in.Int64Counter("tributary.intake.catalog.records", "{record}", "Catalog records of segments and gaps (series registrations, held and replicated runs, gaps) proposed by the intake.")
	inProposals := in.Int64Counter("tributary.intake.catalog.proposals", "{proposal}", "Raft proposals that carried the intake's catalog records (a record batch, or one record alone); records over proposals is the batching factor.")
	inRetries := in.Int64Counter("tributary.intake.catalog.retries", "{proposal}", "Proposals of the intake's catalog records made again because raft dropped them unapplied (no leader, an election under way).")
	inRevoked := in.Int64Counter("tributary.intake.revoked", "{stream}", "Replication streams refused or ended because their edge is revoked.")
	return func(o metric.Observer) {
		is := c.intake.Stats()
		o.ObserveInt64(inSegs, is.SegmentsStored, intakeStored)
		o.ObserveInt64(inSegs, is.Duplicates, intakeDuplicate)
		o.ObserveInt64(inSegs, is.Conflicts, intakeConflict)
		o.ObserveInt64(inBytes, is.BytesReceived)
		for code, attrs := range refusalAttrs {
			o.ObserveInt64(inRefused, is.Refusals[code], attrs)
		}
		o.ObserveInt64(inGaps, is.GapsRecorded)
		o.ObserveInt64(inStreams, is.Streams)
		o.ObserveInt64(inOpen, is.StreamsOpen)
		o.ObserveInt64(inBeats, is.Heartbeats)
		o.ObserveInt64(inQuorum, is.QuorumAcks)
		o.ObserveInt64(inLate, is.Stragglers, latePending)
		o.ObserveInt64(inLate, is.LateRecorded, lateRecorded)
		o.ObserveInt64(inRefilled, is.Refilled)
		o.ObserveInt64(inReships, is.Reships, reshipRequested)
		o.ObserveInt64(inReships, is.ReshipsUnavailable, reshipUnavailable)
		o.ObserveInt64(inRevoked, is.RevokedRefusals)
		o.ObserveInt64(inRecords, is.CatalogRecords)
		o.ObserveInt64(inProposals, is.CatalogProposals)
		o.ObserveInt64(inRetries, is.CatalogRetries)
	}
}

// healMetrics creates the instruments of the healer and returns what observes them.
func (c *Coordinator) healMetrics(in *telemetry.Instruments) func(metric.Observer) {
	healMarked := in.Int64Counter("tributary.heal.coordinators.marked", "{change}", "Coordinators this member, as raft leader, marked down (no heartbeat within dead-after) or active again, by state.")
	healRebalances := in.Int64Counter("tributary.heal.rebalances", "{command}", "Rebalance commands this member proposed as leader (a few moves at a time).")
	healMoves := in.Int64Counter("tributary.heal.moves", "{placement}", "Placements those rebalances changed.")
	healCopies := in.Int64Counter("tributary.heal.copies", "{copy}", "Repair copies of runs this coordinator's replicas lacked, by outcome: done (copied and recorded), failed (retried).")
	healCopied := in.Int64Counter("tributary.heal.copied", "By", "Segment bytes (uncompressed) copied into this coordinator's replica store by repairs.")
	healRunning := in.Int64Gauge("tributary.heal.copies.running", "{copy}", "Repair copies running now.")
	healScrubs := in.Int64Counter("tributary.heal.scrubs", "{round}", "Scrub rounds comparing the replica store with the catalog.")
	healFindings := in.Int64Counter("tributary.heal.scrub.findings", "{run}", "Runs a scrub found, by kind: missing (credited by the catalog, not in the store; repaired), found (in the store, listed as lacking; recorded).")
	healForgotten := in.Int64Counter("tributary.heal.forgotten", "{edge}", "Edges the replica store forgot because they are placed elsewhere.")
	return func(o metric.Observer) {
		hs := c.healer.Stats()
		o.ObserveInt64(healMarked, hs.MarkedDown, stateDown)
		o.ObserveInt64(healMarked, hs.MarkedUp, stateActive)
		o.ObserveInt64(healRebalances, hs.Rebalances)
		o.ObserveInt64(healMoves, hs.Moves)
		o.ObserveInt64(healCopies, hs.Copies, outcomeDone)
		o.ObserveInt64(healCopies, hs.CopyFailures, outcomeFailed)
		o.ObserveInt64(healCopied, hs.CopiedBytes)
		o.ObserveInt64(healRunning, hs.CopiesRunning)
		o.ObserveInt64(healScrubs, hs.Scrubs)
		o.ObserveInt64(healFindings, hs.ScrubMissing, findingMissing)
		o.ObserveInt64(healFindings, hs.ScrubFound, findingFound)
		o.ObserveInt64(healForgotten, hs.Forgotten)
	}
}

// replicaMetrics creates the instruments of the replica store and returns what observes them.
func (c *Coordinator) replicaMetrics(in *telemetry.Instruments) func(metric.Observer) {
	repSegs := in.Int64Counter("tributary.replica.segments", "{segment}", "Segments this coordinator's replica store was asked to store (its own intake's and peers' Store calls), by outcome: applied, duplicate, conflict, invalid, error.")
	repPoints := in.Int64Counter("tributary.replica.points", "{point}", "Points written to this coordinator's replica store.")
	repRejected := in.Int64Counter("tributary.replica.points.rejected", "{point}", "Points of stored segments that the replica engine refused.")
	repSeries := in.Int64Gauge("tributary.replica.series", "{series}", "Series in this coordinator's replica store.")
	return func(o metric.Observer) {
		rs := c.store.Stats()
		o.ObserveInt64(repSegs, rs.SegmentsApplied, replicaApplied)
		o.ObserveInt64(repSegs, rs.Duplicates, replicaDuplicate)
		o.ObserveInt64(repSegs, rs.Conflicts, replicaConflict)
		o.ObserveInt64(repSegs, rs.Invalid, replicaInvalid)
		o.ObserveInt64(repSegs, rs.Failed, replicaError)
		o.ObserveInt64(repPoints, rs.Points)
		o.ObserveInt64(repRejected, rs.Rejected)
		o.ObserveInt64(repSeries, int64(rs.Series))
	}
}

// listenerMetrics creates the instruments of the cluster and intake listeners and returns what observes them.
func (c *Coordinator) listenerMetrics(in *telemetry.Instruments) func(metric.Observer) {
	lisRefused := in.Int64Counter("tributary.listener.refusals", "{refusal}", "Connections and streams the cluster and intake listeners refused before reading anything of them, by listener and stage: connection (a connection cap was reached), handshake (the TLS handshake failed: closed early, timed out, or a certificate the listener's CA does not verify), admission (no verified certificate, a certificate naming no member on the cluster listener or a member on the intake, AdmitEdge's refusal, raft headers of another cluster or sender).")
	lisOpen := in.Int64Gauge("tributary.listener.connections.open", "{connection}", "Connections the cluster and intake listeners hold open now, by listener.")
	return func(o metric.Observer) {
		cs := c.clusterSrv.Stats()
		o.ObserveInt64(lisRefused, int64(cs.ConnsRefused), clusterConnRefused)
		o.ObserveInt64(lisRefused, int64(cs.RefusedAtAdmission), clusterStreamRefused)
		o.ObserveInt64(lisRefused, int64(c.admission.intakeConns.Load()), intakeConnRefused)
		o.ObserveInt64(lisRefused, int64(c.admission.intakeStreams.Load()), intakeStreamRefused)
		o.ObserveInt64(lisRefused, int64(cs.HandshakesFailed), clusterHandshakeFailed)
		o.ObserveInt64(lisRefused, int64(c.admission.intakeHandshakes.Load()), intakeHandshakeFailed)
		o.ObserveInt64(lisOpen, int64(cs.ConnsOpen), clusterListener)
		o.ObserveInt64(lisOpen, int64(c.intakeLis.Stats().Open), intakeListener)
	}
}

// tunnelMetrics creates the instruments of the query tunnels and returns what observes them.
func (c *Coordinator) tunnelMetrics(in *telemetry.Instruments) func(metric.Observer) {
	tunnels := in.Int64Gauge("tributary.tunnel.open", "{tunnel}", "Edges with a query tunnel open to this coordinator.")
	return func(o metric.Observer) {
		o.ObserveInt64(tunnels, int64(len(c.tunnels.Edges())))
	}
}

// refusalCode turns SHIP_ERROR_CODE_UNAVAILABLE into "unavailable".
func refusalCode(name string) string {
	return strings.ToLower(strings.TrimPrefix(name, "SHIP_ERROR_CODE_"))
}
