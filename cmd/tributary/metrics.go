package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/internal/telemetry"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/api"
	"github.com/tributarydb/tributary/replicator"
)

// metricsHandler serves GET /metrics in the Prometheus text exposition
// format: the OpenTelemetry instruments of tp, then the node's own
// counters (points accepted and rejected by reason, limit violations and
// protocol counters of the client APIs, head and WAL sizes, replication)
// when n is not nil.
func metricsHandler(tp *telemetry.Provider, n *node.Node, grpcAPI *api.Server, ship *shipping, stats *httpapi.Stats) http.Handler {
	otel := tp.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		if n == nil {
			otel.ServeHTTP(w, r)
			return
		}
		// The OpenTelemetry handler negotiates its format; ask it for text.
		r2 := r.Clone(r.Context())
		r2.Header.Del("Accept")
		r2.Header.Del("Accept-Encoding")
		otel.ServeHTTP(w, r2)
		writeMetrics(w, n.Status(), grpcAPI.TooLargeRequests(), stats.Snapshot())
		if ship != nil {
			writeReplicationMetrics(w, ship.s.Stats())
		}
	})
}

// writeReplicationMetrics exports the edge's replication state: how far
// the cloud holds its data, the backlog, gaps and dropped points.
func writeReplicationMetrics(w io.Writer, st replicator.Stats) {
	gauge := func(name, help string, v any) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %v\n", name, help, name, name, v)
	}
	counter := func(name, help string, v any) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %v\n", name, help, name, name, v)
	}
	connected := 0
	if st.Connected {
		connected = 1
	}
	gauge("tributary_replication_connected", "1 while a stream to a coordinator is open and welcomed.", connected)
	gauge("tributary_replication_acked_through_seq", "Every WAL segment up to this sequence is held by the cloud or a recorded gap.", st.AckedThrough)
	gauge("tributary_replication_newest_sealed_seq", "Newest sealed WAL segment of this node.", st.NewestSealed)
	gauge("tributary_replication_lag_seconds", "Age of the newest point of the oldest segment the cloud does not hold yet.", st.LagSeconds)
	gauge("tributary_replication_lag_bytes", "Bytes of WAL not yet held by the cloud (backlog plus the open segment).", st.LagBytes)
	gauge("tributary_replication_backlog_segments", "Sealed segments not yet held by the cloud.", st.BacklogSegments)
	gauge("tributary_replication_backlog_bytes", "Bytes of those segments.", st.BacklogBytes)
	gauge("tributary_replication_retained_bytes", "Sealed segments kept on disk for shipping (what the budget bounds).", st.RetainedBytes)
	gauge("tributary_replication_gap_points", "Points in segments declared as gaps (not shipped), since the cursor was created.", st.GapPoints)
	gauge("tributary_replication_dropped_points", "Points dropped by the drop-oldest overflow policy.", st.DroppedPoints)
	counter("tributary_replication_backfilled_points_total", "Points of backlog-overflow gaps backfilled from the local store and acknowledged by the cloud, since the cursor was created.", st.BackfilledPoints)
	counter("tributary_replication_shipped_segments_total", "Segments the cloud acknowledged since start.", st.ShippedSegments)
	counter("tributary_replication_shipped_bytes_total", "Compressed bytes of those segments.", st.ShippedBytes)
	counter("tributary_replication_shipped_points_total", "Points in those segments.", st.ShippedPoints)
	counter("tributary_replication_refusals_total", "Segments and gaps the cloud refused.", st.Refusals)
	counter("tributary_replication_sessions_total", "Streams opened to coordinators.", st.Sessions)
}

func writeMetrics(w io.Writer, st node.Status, tooLarge int64, events []httpapi.NameCount) {
	metric := func(name, typ, help string) {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	metric("tributary_points_accepted_total", "counter", "Points stored and acknowledged.")
	fmt.Fprintf(w, "tributary_points_accepted_total %d\n", st.Accepted)
	metric("tributary_points_rejected_total", "counter", "Points refused by the node, by reason.")
	for r, c := range st.RejectedBy {
		if r == 0 {
			continue
		}
		fmt.Fprintf(w, "tributary_points_rejected_total{reason=%q} %d\n", node.RejectReason(r).String(), c)
	}
	metric("tributary_series", "gauge", "Series known to the node.")
	fmt.Fprintf(w, "tributary_series %d\n", st.Series)
	metric("tributary_head_bytes", "gauge", "Memory held by unflushed samples.")
	fmt.Fprintf(w, "tributary_head_bytes %d\n", st.HeadBytes)
	metric("tributary_wal_bytes", "gauge", "Size of the WAL segments on disk.")
	fmt.Fprintf(w, "tributary_wal_bytes %d\n", st.WAL.Bytes)
	metric("tributary_flush_errors_total", "counter", "Flushes of the head to the store that failed.")
	fmt.Fprintf(w, "tributary_flush_errors_total %d\n", st.FlushErrors)
	metric("tributary_grpc_requests_too_large_total", "counter", "gRPC write requests refused for carrying more points than the limit.")
	fmt.Fprintf(w, "tributary_grpc_requests_too_large_total %d\n", tooLarge)
	metric("tributary_api_events_total", "counter", "Client API events: limit violations, refused requests and per-protocol counts.")
	for _, e := range events {
		fmt.Fprintf(w, "tributary_api_events_total{event=%q} %d\n", sanitizeEvent(e.Name), e.Count)
	}
}

func sanitizeEvent(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, s)
}
