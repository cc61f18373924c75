package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/httpapi/influxql"
	"github.com/tributarydb/tributary/httpapi/opentsdb"
	"github.com/tributarydb/tributary/httpapi/prom"
)

// openPaths are the paths that need no token: liveness and readiness
// probes (httpapi.RegisterHealth) and client pings, and the metrics unless
// metricsAuth.
func openPaths(metricsAuth bool) []string {
	open := []string{"/ping", "/health", "/healthz", "/readyz", "/-/healthy", "/-/ready"}
	if !metricsAuth {
		open = append(open, "/metrics")
	}
	return open
}

// registerParseLimits binds the flags of the limits write bodies are
// parsed under (docs/influx.md, "Request parsing limits").
func registerParseLimits(fs *flag.FlagSet, l *httpapi.Limits) {
	fs.IntVar(&l.MaxLineBytes, "max-line-bytes", httpapi.DefaultMaxLineBytes, "longest line of InfluxDB line protocol; a longer line is refused (400, the other lines are stored) without being held in memory")
	fs.IntVar(&l.MaxFieldsPerLine, "max-fields-per-line", httpapi.DefaultMaxFieldsPerLine, "most fields in one line of InfluxDB line protocol; a line with more is refused (400) before its fields are parsed")
	fs.BoolVar(&l.RefuseStringFields, "influx-refuse-string-fields", false, "refuse a line of InfluxDB line protocol with a string field whole (400; HTTP and MQTT), as earlier versions did. Default: its string fields are skipped and counted, its numeric and boolean fields stored")
	fs.IntVar(&l.MaxSeriesPerRequest, "max-series-per-request", httpapi.DefaultMaxSeriesPerRequest, "most distinct series in one HTTP write request (line protocol, OpenTSDB /api/put, remote_write); more refuses the whole request (413)")
}

// registerHTTP mounts every HTTP protocol on mux; the Prometheus API
// answers the rules and alerts API from rules when it is not nil, else,
// with alertsFromSeries, lists the alerts of the ALERTS series in b; with
// both (rulesWithSeriesAlerts), the rules' alerts and then those of the
// series.
func registerHTTP(mux *http.ServeMux, b backend.Backend, cfg *httpapi.Config, po prom.Options, rules prom.RuleSource, alertsFromSeries, rulesWithSeriesAlerts bool) error {
	influx.Register(mux, b, cfg)
	influxql.Register(mux, b, cfg)
	opentsdb.Register(mux, b, cfg)
	api, err := prom.New(b, cfg, po)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	switch {
	case rules != nil && rulesWithSeriesAlerts:
		api.SetRulesWithSeriesAlerts(rules)
	case rules != nil:
		api.SetRules(rules)
	case alertsFromSeries:
		api.ServeAlertsFromSeries()
	}
	api.Register(mux)
	return nil
}

type telnetServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}

// newTelnet returns the OpenTSDB telnet-style put listener, holding at
// most maxConns connections. It has no authentication (standard senders
// cannot send a token), which is why it is off by default, refused while
// tokens are set unless --opentsdb-telnet-unauthenticated says otherwise,
// and, like every plaintext listener, loopback-only unless
// --insecure-listen is given.
func newTelnet(b backend.Backend, cfg *httpapi.Config, maxConns int, log *slog.Logger) telnetServer {
	srv, err := opentsdb.NewTelnetServer(b, cfg, opentsdb.TelnetOptions{MaxConns: maxConns, Logger: log})
	if err != nil {
		panic("BUG: default telnet options: " + err.Error())
	}
	return srv
}
