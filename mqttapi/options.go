package mqttapi

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/influx"
	"github.com/tributarydb/tributary/node/labels"
)

// Format is the payload format of a subscription.
type Format string

// The payload formats.
const (
	FormatLineProtocol Format = "influx"     // InfluxDB line protocol
	FormatJSON         Format = "json"       // JSON, mapped by a JSONMapping
	FormatSparkplugB   Format = "sparkplugb" // Eclipse Sparkplug B
)

// Subscription is one topic filter and how its messages become points.
type Subscription struct {
	// Topic is an MQTT topic filter, in which a level "+name" (or a last
	// level "#name") matches like "+" ("#") and makes the topic level(s)
	// it matched the label name.
	Topic  string `json:"topic"`
	Format Format `json:"format"`
	// Labels are added to every point (a label of the message or a topic
	// capture of the same name wins).
	Labels map[string]string `json:"labels,omitempty"`
	// DB (line protocol) is the db label of the points, as /write?db=
	// sets it; empty: none.
	DB string `json:"db,omitempty"`
	// Precision (line protocol) is the unit of timestamps: ns (default),
	// us, ms, s, m or h.
	Precision string `json:"precision,omitempty"`
	// JSON maps JSON payloads; nil: the zero mapping (every number and
	// boolean, named after its path, at the time of receipt).
	JSON *JSONMapping `json:"json,omitempty"`
}

// config is the file --mqtt-config reads.
type config struct {
	Subscriptions []Subscription `json:"subscriptions"`
}

// maxConfigBytes bounds a configuration file.
const maxConfigBytes = 1 << 20

// ReadConfig reads the subscriptions of a configuration file (JSON, see
// docs/mqtt.md): {"subscriptions": [...]}. Unknown keys are errors. The
// subscriptions are checked by Options.Validate.
func ReadConfig(r io.Reader) ([]Subscription, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read mqtt config: %w", err)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("read mqtt config: larger than %d bytes", maxConfigBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("read mqtt config: %w", err)
	}
	if dec.More() {
		return nil, errors.New("read mqtt config: data after the top-level object")
	}
	if len(c.Subscriptions) == 0 {
		return nil, errors.New("read mqtt config: no subscriptions")
	}
	return c.Subscriptions, nil
}

// ParseTopic reads FILTER=FORMAT (the --mqtt-topic flag): a subscription
// with the defaults of its format.
func ParseTopic(s string) (Subscription, error) {
	i := strings.LastIndexByte(s, '=')
	if i < 0 {
		return Subscription{}, fmt.Errorf("topic %q: want FILTER=FORMAT (influx, json or sparkplugb)", s)
	}
	return Subscription{Topic: s[:i], Format: Format(s[i+1:])}, nil
}

// Options configure an Adapter. The zero value of a field means its
// default, where it has one.
type Options struct {
	// Broker is the broker's URL: tcp://host[:1883] (also mqtt://) or,
	// with TLS, tls://host[:8883] (also ssl://, mqtts://). Required.
	Broker string
	// ClientID identifies the session at the broker: the same id resumes
	// the same session (its subscriptions and the messages not
	// acknowledged). Required.
	ClientID string
	// Username and Password, when Username is set, authenticate to the
	// broker.
	Username string
	Password []byte
	// TLS configures tls:// brokers; nil: the system's roots.
	TLS *tls.Config
	// Subscriptions are the topics to ingest; at least one. A message is
	// decoded by the first subscription whose filter matches its topic.
	Subscriptions []Subscription
	// SessionExpiry is how long the broker keeps the session (and queues
	// messages) while this client is disconnected. Default 24h; at most
	// 136 years.
	SessionExpiry time.Duration
	// KeepAlive is the MQTT keep-alive period. Default 30s.
	KeepAlive time.Duration
	// ConnectTimeout bounds one connection attempt. Default 10s.
	ConnectTimeout time.Duration
	// ReceiveMaximum is the most messages the broker sends before this
	// client acknowledges them (MQTT 5 Receive Maximum), and so the most
	// it holds. Default 64, at most 65535.
	ReceiveMaximum int
	// MaxPayloadBytes bounds one message's payload; the broker is told a
	// Maximum Packet Size just above it and does not send larger ones,
	// and a larger payload that still arrives is refused (too_large).
	// Default 256 KiB.
	MaxPayloadBytes int
	// MaxPointsPerMessage bounds the points one message may make; a
	// message with more is refused whole (too_many_points). Default 10,000.
	MaxPointsPerMessage int
	// MaxBatchPoints bounds the points of one write to the backend, made
	// of the messages at hand. Default 50,000.
	MaxBatchPoints int
	// MaxAliasBytes bounds the Sparkplug alias tables. Default 4 MiB.
	MaxAliasBytes int
	// Limits are the backend's series limits; the decoders refuse a
	// series beyond them. Default labels.DefaultLimits.
	Limits labels.Limits
	// MaxLineBytes and MaxFieldsPerLine bound line protocol as the HTTP
	// write API does (httpapi.Limits). Defaults httpapi's.
	MaxLineBytes, MaxFieldsPerLine int
	// RefuseStringFields refuses a line with a string field whole, as
	// httpapi.Limits.RefuseStringFields does; default false: its string
	// fields are skipped, its numeric and boolean fields stored.
	RefuseStringFields bool
	// WriteTimeout bounds one write to the backend. Default 30s.
	WriteTimeout time.Duration
	// RetryInitial and RetryMax bound the jittered exponential backoff
	// between attempts to write while the backend refuses (overloaded,
	// unavailable) and between connection attempts. Defaults 100ms, 10s.
	RetryInitial, RetryMax time.Duration
	// Logger receives the adapter's logs; nil: discarded.
	Logger *slog.Logger
	// MeterProvider receives the adapter's metrics; nil: none.
	MeterProvider metric.MeterProvider

	now          func() time.Time // tests
	onSubscribed func()           // tests: called after each accepted SUBSCRIBE
}

// Defaults of Options.
const (
	DefaultSessionExpiry       = 24 * time.Hour
	DefaultKeepAlive           = 30 * time.Second
	DefaultConnectTimeout      = 10 * time.Second
	DefaultReceiveMaximum      = 64
	DefaultMaxPayloadBytes     = 256 << 10
	DefaultMaxPointsPerMessage = 10_000
	DefaultMaxBatchPoints      = 50_000
	DefaultWriteTimeout        = 30 * time.Second
	DefaultRetryInitial        = 100 * time.Millisecond
	DefaultRetryMax            = 10 * time.Second
)

// maxSessionExpiry is MQTT's longest expiry that still expires.
const maxSessionExpiry = 0xFFFFFFFE * time.Second

// Validate fills in defaults and checks o, subscriptions included; an
// error says which option is wrong and why.
func (o *Options) Validate() error {
	if _, err := brokerAddr(o.Broker); err != nil {
		return err
	}
	if o.ClientID == "" {
		return errors.New("mqtt: a client id is required (the broker keeps the session under it)")
	}
	if len(o.ClientID) > 65535 || !validUTF8NoNUL(o.ClientID) {
		return fmt.Errorf("mqtt: client id %.32q: want valid UTF-8 without NUL, at most 65535 bytes", o.ClientID)
	}
	if len(o.Subscriptions) == 0 {
		return errors.New("mqtt: no subscriptions (give --mqtt-topic or --mqtt-config)")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.SessionExpiry, DefaultSessionExpiry)
	def(&o.KeepAlive, DefaultKeepAlive)
	def(&o.ConnectTimeout, DefaultConnectTimeout)
	def(&o.WriteTimeout, DefaultWriteTimeout)
	def(&o.RetryInitial, DefaultRetryInitial)
	def(&o.RetryMax, DefaultRetryMax)
	if o.SessionExpiry > maxSessionExpiry {
		return fmt.Errorf("mqtt: session expiry %s is longer than MQTT allows", o.SessionExpiry)
	}
	if o.KeepAlive > 65535*time.Second {
		return fmt.Errorf("mqtt: keep-alive %s is longer than MQTT allows (65535s)", o.KeepAlive)
	}
	defInt := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt(&o.ReceiveMaximum, DefaultReceiveMaximum)
	defInt(&o.MaxPayloadBytes, DefaultMaxPayloadBytes)
	defInt(&o.MaxPointsPerMessage, DefaultMaxPointsPerMessage)
	defInt(&o.MaxBatchPoints, DefaultMaxBatchPoints)
	defInt(&o.MaxAliasBytes, DefaultMaxAliasBytes)
	defInt(&o.MaxLineBytes, httpapi.DefaultMaxLineBytes)
	defInt(&o.MaxFieldsPerLine, httpapi.DefaultMaxFieldsPerLine)
	if o.ReceiveMaximum > 65535 {
		return fmt.Errorf("mqtt: receive maximum %d: at most 65535", o.ReceiveMaximum)
	}
	if o.MaxPayloadBytes > 256<<20 {
		return fmt.Errorf("mqtt: max payload %d bytes: MQTT packets hold at most 256 MiB", o.MaxPayloadBytes)
	}
	if o.Limits == (labels.Limits{}) {
		o.Limits = labels.DefaultLimits
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MeterProvider == nil {
		o.MeterProvider = noop.NewMeterProvider()
	}
	if o.now == nil {
		o.now = time.Now
	}
	for i := range o.Subscriptions {
		if _, err := compile(&o.Subscriptions[i], o, nil); err != nil {
			return fmt.Errorf("mqtt: subscription %d (%s): %w", i+1, o.Subscriptions[i].Topic, err)
		}
	}
	return nil
}

func validUTF8NoNUL(s string) bool {
	return !strings.ContainsRune(s, 0) && strings.ToValidUTF8(s, "\uFFFD") == s
}

// brokerAddr checks the broker URL and returns it with a default port.
func brokerAddr(broker string) (*url.URL, error) {
	if broker == "" {
		return nil, errors.New("mqtt: a broker URL is required (tcp://host:1883 or tls://host:8883)")
	}
	u, err := url.Parse(broker)
	if err != nil {
		return nil, fmt.Errorf("mqtt: broker %q: %w", broker, err)
	}
	port := ""
	switch u.Scheme {
	case "tcp", "mqtt":
		port = "1883"
	case "tls", "ssl", "mqtts":
		port = "8883"
	default:
		return nil, fmt.Errorf("mqtt: broker %q: scheme must be tcp, mqtt, tls, ssl or mqtts", broker)
	}
	if u.Hostname() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("mqtt: broker %q: want SCHEME://HOST[:PORT]", broker)
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), port)
	}
	return u, nil
}

// subscription is a compiled Subscription.
type subscription struct {
	Subscription
	filter *filter
	base   []labels.Label // the static labels
	dec    decoder
}

// compile checks s and builds its decoder; aliases is the shared
// Sparkplug alias table (nil: a private one, for validation).
func compile(s *Subscription, o *Options, aliases *aliasTable) (*subscription, error) {
	f, err := parseFilter(s.Topic)
	if err != nil {
		return nil, err
	}
	c := &subscription{Subscription: *s, filter: f}
	caps := make([]string, 0, len(f.names))
	for _, n := range f.names {
		if n != "" {
			caps = append(caps, n)
		}
	}
	for k, v := range s.Labels {
		if sanitizeName(k) != k || strings.HasPrefix(k, "__") {
			return nil, fmt.Errorf("label %q is not a label name or is reserved", k)
		}
		if err := checkLabelValue(k, v); err != nil {
			return nil, err
		}
		c.base = append(c.base, labels.Label{Name: k, Value: v})
	}
	if (s.DB != "" || s.Precision != "") && s.Format != FormatLineProtocol {
		return nil, fmt.Errorf("db and precision apply to format %s only", FormatLineProtocol)
	}
	if s.JSON != nil && s.Format != FormatJSON {
		return nil, fmt.Errorf("a json mapping applies to format %s only", FormatJSON)
	}
	switch s.Format {
	case FormatLineProtocol:
		prec, err := influx.ParsePrecision(s.Precision, false)
		if err != nil {
			return nil, err
		}
		if s.DB != "" {
			if err := checkLabelValue("db", s.DB); err != nil {
				return nil, err
			}
		}
		c.dec = newLineDecoder(o, s.DB, prec)
	case FormatJSON:
		var m JSONMapping
		if s.JSON != nil {
			m = *s.JSON
		}
		if c.dec, err = newJSONDecoder(m, caps); err != nil {
			return nil, err
		}
	case FormatSparkplugB:
		if len(caps) > 0 {
			return nil, errors.New("sparkplugb takes its labels from the topic itself: no +name captures")
		}
		if aliases == nil {
			aliases = newAliasTable(o.MaxAliasBytes)
		}
		c.dec = &sparkplugDecoder{aliases: aliases}
	default:
		return nil, fmt.Errorf("format %q: want influx, json or sparkplugb", s.Format)
	}
	return c, nil
}

// baseLabels are the labels every point of a message gets, before its
// own: the topic captures, then the static labels they do not override.
func (c *subscription) baseLabels(caps []capture, skip string) []labels.Label {
	out := make([]labels.Label, 0, len(caps)+len(c.base))
	for _, cp := range caps {
		if cp.name != skip {
			out = append(out, labels.Label{Name: cp.name, Value: cp.value})
		}
	}
	for _, l := range c.base {
		dup := false
		for _, o := range out {
			dup = dup || o.Name == l.Name
		}
		if !dup {
			out = append(out, l)
		}
	}
	return out
}
