// Package otlpsink is an in-process OTLP/gRPC receiver that counts and
// discards what it receives: the collector a benchmark points a node's
// --otlp-endpoint at, so that exporting traces and metrics costs the node
// what it would against a real collector on the same machine, minus the
// collector's own work.
//
// A Sink is safe for concurrent use.
package otlpsink

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"

	metricsv1 "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// Sink receives OTLP traces and metrics on a loopback port.
type Sink struct {
	srv  *grpc.Server
	addr string

	spans, traceRequests, metricRequests, dataPoints atomic.Int64
}

// Start listens on a free loopback port and serves until Stop.
func Start() (*Sink, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("otlp sink: listen: %w", err)
	}
	s := &Sink{srv: grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20)), addr: lis.Addr().String()}
	tracev1.RegisterTraceServiceServer(s.srv, traceService{s: s})
	metricsv1.RegisterMetricsServiceServer(s.srv, metricsService{s: s})
	go s.srv.Serve(lis) //nolint:errcheck // returns when Stop closes the listener
	return s, nil
}

// Addr is the host:port to give as --otlp-endpoint (with --otlp-insecure).
func (s *Sink) Addr() string { return s.addr }

// Stop closes the listener and every connection.
func (s *Sink) Stop() { s.srv.Stop() }

// Counts is what a Sink received.
type Counts struct {
	Spans, TraceRequests, MetricRequests, DataPoints int64
}

// Counts returns the totals so far.
func (s *Sink) Counts() Counts {
	return Counts{Spans: s.spans.Load(), TraceRequests: s.traceRequests.Load(),
		MetricRequests: s.metricRequests.Load(), DataPoints: s.dataPoints.Load()}
}

type traceService struct {
	tracev1.UnimplementedTraceServiceServer
	s *Sink
}

func (t traceService) Export(_ context.Context, req *tracev1.ExportTraceServiceRequest) (*tracev1.ExportTraceServiceResponse, error) {
	var n int64
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			n += int64(len(ss.GetSpans()))
		}
	}
	t.s.spans.Add(n)
	t.s.traceRequests.Add(1)
	return &tracev1.ExportTraceServiceResponse{}, nil
}

type metricsService struct {
	metricsv1.UnimplementedMetricsServiceServer
	s *Sink
}

func (m metricsService) Export(_ context.Context, req *metricsv1.ExportMetricsServiceRequest) (*metricsv1.ExportMetricsServiceResponse, error) {
	var n int64
	for _, rm := range req.GetResourceMetrics() {
		for _, sm := range rm.GetScopeMetrics() {
			for _, mt := range sm.GetMetrics() {
				n += int64(len(mt.GetGauge().GetDataPoints()) + len(mt.GetSum().GetDataPoints()) + len(mt.GetHistogram().GetDataPoints()))
			}
		}
	}
	m.s.dataPoints.Add(n)
	m.s.metricRequests.Add(1)
	return &metricsv1.ExportMetricsServiceResponse{}, nil
}
