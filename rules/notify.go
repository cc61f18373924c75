package rules

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/discovery/targetgroup"
	"github.com/prometheus/prometheus/notifier"
)

// newNotifier builds the upstream notification manager with one
// Alertmanager configuration per URL (API v2, the URL's path as prefix).
func newNotifier(opts Options, reg prometheus.Registerer) (*notifier.Manager, error) {
	n := notifier.NewManager(&notifier.Options{
		QueueCapacity: opts.NotificationQueueCapacity,
		Registerer:    reg,
	}, model.UTF8Validation, opts.Logger)
	cfg := &config.Config{}
	for _, s := range opts.Alertmanagers {
		u, err := parseAlertmanagerURL(s)
		if err != nil {
			return nil, err
		}
		am := config.DefaultAlertmanagerConfig
		am.Scheme = u.Scheme
		am.PathPrefix = u.Path
		am.Timeout = model.Duration(opts.AlertmanagerTimeout)
		am.APIVersion = config.AlertmanagerAPIVersionV2
		am.HTTPClientConfig = opts.AlertmanagerHTTP.clientConfig()
		cfg.AlertingConfig.AlertmanagerConfigs = append(cfg.AlertingConfig.AlertmanagerConfigs, &am)
	}
	if err := n.ApplyConfig(cfg); err != nil {
		return nil, fmt.Errorf("configure alertmanagers: %w", err)
	}
	return n, nil
}

// staticTargets is the target update the notifier's Run waits for: each
// configuration (named config-<index> by the upstream package) has the
// one Alertmanager of its URL. The channel is never closed: Run returns
// at Stop.
func staticTargets(urls []string) <-chan map[string][]*targetgroup.Group {
	tgs := make(map[string][]*targetgroup.Group, len(urls))
	for i, s := range urls {
		u, _ := parseAlertmanagerURL(s) // checked by Options.Validate
		tgs[fmt.Sprintf("config-%d", i)] = []*targetgroup.Group{{
			Targets: []model.LabelSet{{model.AddressLabel: model.LabelValue(u.Host)}},
			Source:  s,
		}}
	}
	ch := make(chan map[string][]*targetgroup.Group, 1)
	ch <- tgs
	return ch
}
