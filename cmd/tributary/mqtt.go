package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/mqttapi"
	"github.com/tributarydb/tributary/node/labels"
)

// mqttFlags are the --mqtt-* flags of tributary node and tributary local:
// MQTT ingest into the (edge) node (mqttapi, docs/mqtt.md).
type mqttFlags struct {
	broker        string
	topics        topicList
	configFile    string
	clientID      string
	username      string
	passwordFile  string
	ca            string
	cert, key     string
	sessionExpiry time.Duration
	receiveMax    int
	maxPayload    int
	maxPoints     int

	o mqttapi.Options // built by validate
}

// topicList is the repeatable --mqtt-topic FILTER=FORMAT.
type topicList []mqttapi.Subscription

func (l *topicList) String() string {
	var parts []string
	for _, s := range *l {
		parts = append(parts, s.Topic+"="+string(s.Format))
	}
	return strings.Join(parts, " ")
}

func (l *topicList) Set(v string) error {
	s, err := mqttapi.ParseTopic(v)
	if err != nil {
		return err
	}
	*l = append(*l, s)
	return nil
}

// newMQTTFlags registers the --mqtt-* flags on fs.
func newMQTTFlags(fs *flag.FlagSet) *mqttFlags {
	f := &mqttFlags{}
	f.register(fs)
	return f
}

func (f *mqttFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.broker, "mqtt-broker", "", "ingest MQTT from this broker: tcp://HOST[:1883] or tls://HOST[:8883] (empty: off; see docs/mqtt.md)")
	fs.Var(&f.topics, "mqtt-topic", "with --mqtt-broker: subscribe to FILTER=FORMAT, FORMAT one of influx, json, sparkplugb; a level +NAME captures the label NAME (repeatable)")
	fs.StringVar(&f.configFile, "mqtt-config", "", "with --mqtt-broker: JSON file of subscriptions with their mappings (docs/mqtt.md), in addition to --mqtt-topic")
	fs.StringVar(&f.clientID, "mqtt-client-id", "", "MQTT client id: the broker keeps the session (subscriptions, queued messages) under it (default tributary-NODE_ID)")
	fs.StringVar(&f.username, "mqtt-username", "", "MQTT user name")
	fs.StringVar(&f.passwordFile, "mqtt-password-file", "", "file holding the MQTT password (one line)")
	fs.StringVar(&f.ca, "mqtt-ca", "", "PEM file of the CAs that sign the broker's certificate (tls:// brokers; default: the system's roots)")
	fs.StringVar(&f.cert, "mqtt-cert", "", "PEM client certificate for the broker (with --mqtt-key)")
	fs.StringVar(&f.key, "mqtt-key", "", "PEM key of --mqtt-cert")
	fs.DurationVar(&f.sessionExpiry, "mqtt-session-expiry", mqttapi.DefaultSessionExpiry, "how long the broker keeps the session and queues messages while the node is away")
	fs.IntVar(&f.receiveMax, "mqtt-receive-maximum", mqttapi.DefaultReceiveMaximum, "most MQTT messages in flight (received, not yet acknowledged)")
	fs.IntVar(&f.maxPayload, "mqtt-max-payload-bytes", mqttapi.DefaultMaxPayloadBytes, "largest MQTT payload; the broker is told not to send larger ones")
	fs.IntVar(&f.maxPoints, "mqtt-max-points-per-message", mqttapi.DefaultMaxPointsPerMessage, "most points one MQTT message may hold; a message with more is refused whole")
}

func (f *mqttFlags) on() bool { return f.broker != "" }

// validate checks the flags and reads the files they name, so that a
// mistake stops the command before anything is opened.
func (f *mqttFlags) validate(lim labels.Limits, parse httpapi.Limits) error {
	if !f.on() {
		if len(f.topics) > 0 || f.configFile != "" {
			return fmt.Errorf("%w: --mqtt-topic and --mqtt-config need --mqtt-broker", errUsage)
		}
		return nil
	}
	o := mqttapi.Options{
		Broker: f.broker, ClientID: f.clientID, Username: f.username, SessionExpiry: f.sessionExpiry,
		ReceiveMaximum: f.receiveMax, MaxPayloadBytes: f.maxPayload, MaxPointsPerMessage: f.maxPoints,
		Limits: lim, MaxLineBytes: parse.MaxLineBytes, MaxFieldsPerLine: parse.MaxFieldsPerLine,
		RefuseStringFields: parse.RefuseStringFields,
	}
	if f.configFile != "" {
		file, err := os.Open(f.configFile)
		if err != nil {
			return fmt.Errorf("%w: --mqtt-config: %v", errUsage, err)
		}
		subs, err := mqttapi.ReadConfig(file)
		file.Close()
		if err != nil {
			return fmt.Errorf("%w: --mqtt-config %s: %v", errUsage, f.configFile, err)
		}
		o.Subscriptions = subs
	}
	o.Subscriptions = append(o.Subscriptions, f.topics...)
	if f.passwordFile != "" {
		pw, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return fmt.Errorf("%w: --mqtt-password-file: %v", errUsage, err)
		}
		o.Password = bytes.TrimRight(pw, "\r\n")
	}
	var err error
	if o.TLS, err = mqttTLS(f.ca, f.cert, f.key); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	check := o
	if check.ClientID == "" {
		check.ClientID = "tributary" // the node id is known once the node is open
	}
	if err := check.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	f.o = o
	return nil
}

// caPool reads the PEM CA bundle at path, given by flag --name; its error
// names the flag.
func caPool(name, path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", name, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--%s %s: no PEM certificate in it", name, path)
	}
	return pool, nil
}

// mqttTLS builds the client TLS configuration of the broker connection.
func mqttTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := caPool("mqtt-ca", caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("--mqtt-cert and --mqtt-key go together")
	}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("--mqtt-cert/--mqtt-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}

// run is start logging its error: validate checked the options, so only
// the metrics' registration can fail, and the node serves on without
// MQTT ingest then.
func (f *mqttFlags) run(b backend.Backend, nodeID string, mp metric.MeterProvider, log *slog.Logger) *background {
	bg, err := f.start(b, nodeID, mp, log)
	if err != nil {
		log.Error("mqtt ingest not started", "err", err)
	}
	return bg
}

// start runs MQTT ingest into b when --mqtt-broker is set (nil, a no-op
// to stop, otherwise). Stop it before closing the node: it finishes the
// write at hand and leaves what is not acknowledged with the broker.
func (f *mqttFlags) start(b backend.Backend, nodeID string, mp metric.MeterProvider, log *slog.Logger) (*background, error) {
	if !f.on() {
		return nil, nil
	}
	o := f.o
	if o.ClientID == "" {
		o.ClientID = "tributary-" + nodeID
	}
	o.Logger, o.MeterProvider = log.With("component", "mqtt"), mp
	a, err := mqttapi.New(b, o)
	if err != nil {
		return nil, fmt.Errorf("mqtt: %w", err)
	}
	return goBackground("mqtt ingest", func(ctx context.Context) error { return a.Run(ctx) }, log), nil
}
