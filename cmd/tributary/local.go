package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/coordinator"
	"github.com/tributarydb/tributary/coordinator/query"
	"github.com/tributarydb/tributary/grpcapi"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
	"github.com/tributarydb/tributary/replicator"
)

// localBackend is what tributary local serves: writes go to the edge node,
// queries through the coordinator's fleet-wide front end (replicated data
// plus the edge's fresh tail).
type localBackend struct {
	edge    *node.Node
	edgeAPI *grpcapi.Server // WriteService over the edge
	cloud   backend.Backend
	ship    *shipping
}

func (b *localBackend) Write(ctx context.Context, batches []model.Batch) (model.WriteResult, error) {
	return b.edge.Write(ctx, batches)
}

func (b *localBackend) Query(ctx context.Context, q model.Query, emit func(model.Series) error) (model.QueryInfo, error) {
	return b.cloud.Query(ctx, q, emit)
}

func (b *localBackend) Series(ctx context.Context, ms []*labels.Matcher, limit int) ([]labels.Labels, error) {
	return b.cloud.Series(ctx, ms, limit)
}

func (b *localBackend) LabelNames(ctx context.Context, ms []*labels.Matcher) ([]string, error) {
	return b.cloud.LabelNames(ctx, ms)
}

func (b *localBackend) LabelValues(ctx context.Context, name string, ms []*labels.Matcher) ([]string, error) {
	return b.cloud.LabelValues(ctx, name, ms)
}

// register serves WriteService from the edge and QueryService from the
// front end.
func (b *localBackend) register(status grpcapi.StatusFunc) func(*grpc.Server) {
	return func(g *grpc.Server) {
		pb.RegisterWriteServiceServer(g, b.edgeAPI)
		grpcapi.New(b, grpcapi.Options{Status: status}).RegisterQuery(g)
	}
}

// status adds the edge's figures to the coordinator's status.
func (b *localBackend) status(st *pb.StatusResponse) *pb.StatusResponse {
	es := b.edge.Status()
	st.Role = "local"
	st.HeadSeries, st.HeadSamples = int64(es.Series), es.HeadSamples
	st.WalSegmentSeq, st.WalBytes = es.WAL.OpenSeq, es.WAL.Bytes
	st.PointsAcceptedTotal, st.PointsRejectedTotal = es.Accepted, es.Rejected
	st.CorruptSegmentsQuarantined = es.WALQuarantined
	st.StoreHealth = storeHealth(es)
	st.Replication = b.ship.status()
	return st
}

func (b *localBackend) metrics(tp *telemetry.Provider, st *httpapi.Stats) http.Handler {
	return metricsHandler(tp, b.edgeAPI, st)
}

// ready is the in-process edge's readiness check for /readyz.
func (b *localBackend) ready() error { return nodeReady(b.edge)() }

// edgeSource hands the in-process edge to the coordinator's front end
// once it is open.
type edgeSource struct{ n atomic.Pointer[node.Node] }

func (e *edgeSource) source(id string) query.Source {
	n := e.n.Load()
	if n == nil || n.NodeID() != id {
		return nil
	}
	return n
}

func runLocal(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("local", stderr, "")
	var no node.Options
	nf := nodeFlags(fs, &no)
	dd := fs.Lookup("data-dir")
	dd.Usage = "directory for the edge node (DIR/edge) and the coordinator (DIR/coordinator)"
	dd.DefValue = "./tributary-data"
	no.DataDir = dd.DefValue
	var co coordinator.Options
	var cf coordinatorFlags
	cf.register(fs, &co, true)
	fs.StringVar(&co.NodeID, "coordinator-id", "local-coordinator", "the coordinator's node id")
	ignoreFleet := fs.Bool("ignore-fleet-config", false, "the edge keeps its own retention, seal policy (--wal-segment-age), no ingest rate limit and no rule groups of the fleet instead of applying the fleet configuration (tributary cluster config, tributary cluster rules)")
	budget := fs.Int64("replication-budget-bytes", 1<<30, "disk budget for sealed WAL segments kept until the coordinator holds them")
	var smf selfMonitorFlags
	smf.register(fs)
	mqf := newMQTTFlags(fs)
	var rulesf rulesFlags
	rulesf.register(fs)
	var sf serveFlags
	sf.register(fs)
	sf.alertsFromSeries = true // without --rules: the fleet's ALERTS (docs/rules.md)
	log, err := nf.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	root := no.DataDir
	no.DataDir = filepath.Join(root, "edge")
	no.Logger = log
	co.DataDir, co.RaftID, co.Logger = filepath.Join(root, "coordinator"), 1, log
	cf.peers = fmt.Sprintf("1=%s@%s", co.NodeID, co.ClusterListen)
	cf.insecureCluster = true
	if err := cf.apply(&co, false); err != nil {
		return err
	}
	if err := sf.check(); err != nil {
		return err
	}
	co.GRPCReflection = sf.reflection
	if err := errors.Join(smf.validate(), mqf.validate(no.Limits, sf.limits), rulesf.validate(!*ignoreFleet)); err != nil {
		return err
	}
	tp, err := sf.telemetry("local", co.NodeID)
	if err != nil {
		return err
	}
	defer stopTelemetry(tp, log)
	no.MeterProvider, no.TracerProvider = tp.MeterProvider(), tp.TracerProvider()
	co.MeterProvider, co.TracerProvider = no.MeterProvider, no.TracerProvider
	var edge edgeSource
	co.LocalEdge = edge.source
	c, err := coordinator.Open(co)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		c.Stop(context.Background())
		return err
	}
	ro := replicator.Options{Targets: []string{c.IntakeAddr()}, Insecure: true, SoftwareVersion: version,
		CursorPath: filepath.Join(no.DataDir, "replication.cursor"), BudgetBytes: *budget, Logger: log,
		MeterProvider: no.MeterProvider, TracerProvider: no.TracerProvider}
	var fleetTarget atomic.Pointer[node.Node]
	fleetRulesHook, fleetFile := fleetHooks(&ro, &fleetTarget, no.DataDir, *ignoreFleet, nf.sealFixed, log)
	if err := ro.Validate(); err != nil {
		return fail(fmt.Errorf("%w: replication: %v", errUsage, err))
	}
	ship, err := newShipping(&ro, &no)
	if err != nil {
		return fail(err)
	}
	n, err := node.Open(no)
	if err != nil {
		return fail(err)
	}
	edge.n.Store(n)
	fleetTarget.Store(n)
	var selfMon, mqttIn *background
	var rr *ruleRunner
	closeEdge := func() error {
		rr.stop()
		mqttIn.stop()
		selfMon.stop()
		ship.stop()
		if err := n.Close(); err != nil {
			return fmt.Errorf("close edge node: %w", err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err = c.WaitReady(ctx)
	cancel()
	if err != nil {
		closeEdge()
		return fail(err)
	}
	ship.start(n, log)
	edgeAPI := grpcapi.New(n, grpcapi.Options{MaxPointsPerRequest: sf.limits.MaxPointsPerRequest})
	lb := &localBackend{edge: n, edgeAPI: edgeAPI, cloud: c.Backend(), ship: ship}
	sf.limits.Labels = no.Limits // the HTTP parsers refuse what the edge node would
	// Rules evaluate over the edge node and write into it, as on a Pi.
	if rr, err = rulesf.open(n, &sf, fleetFile, no.MeterProvider, log); err != nil {
		closeEdge()
		return fail(err)
	}
	fleetRulesHook.attach(rr)
	fe, gh, err := serveCoordinator(c, &sf, lb, tp, log)
	if err != nil {
		closeEdge()
		return fail(err)
	}
	selfMon = smf.start(n, tp, log)
	mqttIn = mqf.run(n, n.NodeID(), no.MeterProvider, log)
	rr.start(log)
	log.Info("local ready: writes go to the edge node, queries through the coordinator", append(fe.addrs,
		"edge", n.NodeID(), "coordinator", co.NodeID, "intake", c.IntakeAddr(), "data_dir", root, "version", version)...)
	return waitAndStop(fe, gh, log, cf.shutdownGrace, c, closeEdge)
}
