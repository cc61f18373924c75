package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/api"
)

// metricsHandler serves the node's counters in the Prometheus text
// exposition format on GET /metrics: points accepted and rejected (by
// reason), limit violations and protocol counters of the client APIs, and
// the sizes of the head and the WAL. It is a plain snapshot of counters
// the node already keeps; richer telemetry comes from OpenTelemetry.
func metricsHandler(n *node.Node, grpcAPI *api.Server, stats *httpapi.Stats) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "use GET", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		writeMetrics(w, n.Status(), grpcAPI.TooLargeRequests(), stats.Snapshot())
	})
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
