package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tributarydb/tributary/internal/auth"
)

// startCredentialReload keeps the TLS material and token files of this
// process current: it polls them every interval (0: never) and reloads
// them all on SIGHUP, until the frontend stops. Everything built from
// internal/auth follows: the client listeners, and the cluster, intake
// and replication links.
func startCredentialReload(interval time.Duration, log *slog.Logger) []*background {
	bg := []*background{goOnSIGHUP("SIGHUP handler", func() {
		log.Info("SIGHUP: reloading certificates, CA bundles and token files")
		auth.Reload(log)
	}, log)}
	if interval > 0 {
		bg = append(bg, goBackground("credential watch", func(ctx context.Context) error {
			auth.Watch(ctx, interval, log)
			return nil
		}, log))
	}
	return bg
}

// goOnSIGHUP calls reload on every SIGHUP this process receives, in a
// background loop named what, until the loop is stopped.
func goOnSIGHUP(what string, reload func(), log *slog.Logger) *background {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	return goBackground(what, func(ctx context.Context) error {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-hup:
				reload()
			}
		}
	}, log)
}

// registerCredentialMetrics adds the reload counters of internal/auth:
// tributary_credentials_reloads_total{kind,result} and
// tributary_credentials_last_load_timestamp_seconds{kind}.
func registerCredentialMetrics(meter metric.Meter) {
	reloads, _ := meter.Int64ObservableCounter("tributary.credentials.reloads", metric.WithUnit("{reload}"),
		metric.WithDescription("Reloads of certificates, keys, CA bundles (kind tls) and token files (kind tokens) after a change or SIGHUP, by result."))
	last, _ := meter.Float64ObservableGauge("tributary.credentials.last_load_timestamp", metric.WithUnit("s"),
		metric.WithDescription("Unix time at which material of this kind was last read successfully, the first load included."))
	_, _ = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, st := range auth.ReloadStats() {
			kind := attribute.String("kind", st.Kind)
			o.ObserveInt64(reloads, st.Successes, metric.WithAttributes(kind, attribute.String("result", "ok")))
			o.ObserveInt64(reloads, st.Failures, metric.WithAttributes(kind, attribute.String("result", "error")))
			if !st.LastSuccess.IsZero() {
				o.ObserveFloat64(last, float64(st.LastSuccess.UnixNano())/1e9, metric.WithAttributes(kind))
			}
		}
		return nil
	}, reloads, last)
}
