package mqttapi

import (
	"context"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/node/labels"
)

// ackInterval is how often paho sends the acknowledgements released by
// the ingest goroutine (in the order the messages arrived).
const ackInterval = 20 * time.Millisecond

// Adapter subscribes to an MQTT broker and writes what it receives into a
// backend.Backend. See the package documentation for the delivery
// contract. Run it once; Connected and Pending are safe for concurrent
// use.
type Adapter struct {
	b      backend.Backend
	o      Options
	subs   []*subscription
	broker *url.URL
	m      *metrics
	rl     *rateLog
	in     chan *message
	// INVARIANT: touched by the ingest goroutine only.
	res result

	bg        sync.WaitGroup // subscribe calls
	connected sync.Once      // the first connection was made
}

// message is one PUBLISH received and not yet acknowledged.
type message struct {
	client   *paho.Client
	pub      *paho.Publish
	received time.Time
}

// New checks o and returns an Adapter writing into b.
func New(b backend.Backend, o Options) (*Adapter, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	broker, _ := brokerAddr(o.Broker)
	a := &Adapter{b: b, o: o, broker: broker, rl: newRateLog(o.Logger, o.now)}
	aliases := newAliasTable(o.MaxAliasBytes)
	for i := range o.Subscriptions {
		s, err := compile(&o.Subscriptions[i], &a.o, aliases)
		if err != nil {
			return nil, err // Validate compiled it already
		}
		slices.SortFunc(s.base, func(x, y labels.Label) int { return strings.Compare(x.Name, y.Name) })
		a.subs = append(a.subs, s)
	}
	var err error
	if a.m, err = newMetrics(o.MeterProvider); err != nil {
		return nil, err
	}
	// The broker sends at most ReceiveMaximum QoS 1 messages before they
	// are acknowledged, so with this capacity a QoS 1 message never waits
	// for room; QoS 0 messages that find it full are dropped.
	a.in = make(chan *message, o.ReceiveMaximum)
	return a, nil
}

// Connected reports whether the adapter is connected to the broker.
func (a *Adapter) Connected() bool { return a.m.connected.Load() }

// Pending returns the number of messages received and not acknowledged.
func (a *Adapter) Pending() int64 { return a.m.pending.Load() }

// Broker returns the broker's URL, without credentials.
func (a *Adapter) Broker() string { return a.broker.Redacted() }

// Run connects to the broker (and reconnects, with backoff, whenever the
// connection is lost), subscribes, and ingests until ctx is done. Then it
// stops taking messages, finishes the write at hand, lets the
// acknowledgements of what was stored go out and disconnects; messages
// not acknowledged stay with the broker for the next session. It returns
// nil once stopped.
func (a *Adapter) Run(ctx context.Context) error {
	defer a.m.close()
	work, stopWork := context.WithCancel(context.Background())
	defer stopWork()
	conn, closeConn := context.WithCancel(context.Background())
	defer closeConn()
	cm, err := autopaho.NewConnection(conn, a.clientConfig(work))
	if err != nil {
		return err
	}
	ingested := make(chan struct{})
	go func() {
		defer close(ingested)
		a.ingest(work)
	}()
	a.o.Logger.Info("mqtt: ingesting", "broker", a.Broker(), "client_id", a.o.ClientID, "subscriptions", len(a.subs))
	<-ctx.Done()
	stopWork()
	<-ingested
	// Let paho send the acknowledgements the last write released.
	t := time.NewTimer(3 * ackInterval)
	<-t.C
	closeConn()
	<-cm.Done()
	a.bg.Wait()
	a.m.connected.Store(false)
	a.m.pending.Store(0)
	a.o.Logger.Info("mqtt: stopped", "broker", a.Broker())
	return nil
}

// clientConfig is the autopaho configuration: MQTT 5, a persistent
// session, manual acknowledgements and flow control.
func (a *Adapter) clientConfig(work context.Context) autopaho.ClientConfig {
	receiveMax := uint16(a.o.ReceiveMaximum)
	maxPacket := uint32(a.o.MaxPayloadBytes + packetOverhead)
	return autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{a.broker},
		KeepAlive:                     uint16(a.o.KeepAlive / time.Second),
		CleanStartOnInitialConnection: false,
		SessionExpiryInterval:         uint32(a.o.SessionExpiry / time.Second),
		ReconnectBackoff:              a.backoff,
		ConnectTimeout:                a.o.ConnectTimeout,
		AttemptConnection:             a.dial,
		OnConnectionUp:                func(cm *autopaho.ConnectionManager, ca *paho.Connack) { a.up(work, cm, ca) },
		OnConnectionDown: func() bool {
			a.m.connected.Store(false)
			a.o.Logger.Warn("mqtt: connection to the broker lost; reconnecting", "broker", a.Broker())
			return true
		},
		OnConnectError: func(err error) {
			a.m.connects.Add(context.Background(), 1, a.m.connFail)
			a.rl.warn("connect", "mqtt: cannot connect to the broker; retrying", "broker", a.Broker(), "err", err)
		},
		ConnectUsername: a.o.Username,
		ConnectPassword: a.o.Password,
		ConnectPacketBuilder: func(cp *paho.Connect, _ *url.URL) (*paho.Connect, error) {
			if cp.Properties == nil {
				cp.Properties = &paho.ConnectProperties{}
			}
			cp.Properties.ReceiveMaximum = &receiveMax
			cp.Properties.MaximumPacketSize = &maxPacket
			return cp, nil
		},
		ClientConfig: paho.ClientConfig{
			ClientID:                   a.o.ClientID,
			EnableManualAcknowledgment: true,
			SendAcksInterval:           ackInterval,
			OnPublishReceived:          []func(paho.PublishReceived) (bool, error){a.receiver(work)},
			OnClientError: func(err error) {
				a.rl.warn("client", "mqtt: connection error", "broker", a.Broker(), "err", err)
			},
			OnServerDisconnect: func(d *paho.Disconnect) {
				reason := ""
				if d.Properties != nil {
					reason = d.Properties.ReasonString
				}
				a.o.Logger.Warn("mqtt: the broker closed the connection", "broker", a.Broker(), "reason_code", d.ReasonCode, "reason", reason)
			},
		},
	}
}

// backoff is the jittered exponential delay before attempt number
// attempt (0: the first, no delay), between RetryInitial and RetryMax;
// the jitter keeps a fleet that lost the same broker from reconnecting
// in step. It is autopaho's ReconnectBackoff and the write retries'.
func (a *Adapter) backoff(attempt int) time.Duration {
	if attempt == 0 {
		return 0
	}
	d := a.o.RetryInitial
	for i := 1; i < attempt && d < a.o.RetryMax; i++ {
		d *= 2
	}
	d = min(d, a.o.RetryMax)
	return d - time.Duration(rand.Float64()*0.5*float64(d))
}

// up runs when a connection is made: it (re)subscribes, off paho's
// goroutine (OnConnectionUp must not block).
func (a *Adapter) up(work context.Context, cm *autopaho.ConnectionManager, ca *paho.Connack) {
	a.m.connected.Store(true)
	a.m.connects.Add(context.Background(), 1, a.m.connOK)
	first := false
	a.connected.Do(func() { first = true })
	if !ca.SessionPresent && !first {
		a.o.Logger.Warn("mqtt: the broker did not keep the session: messages published while disconnected were not queued (session expired or broker state lost)", "broker", a.Broker())
	}
	a.o.Logger.Info("mqtt: connected", "broker", a.Broker(), "session_present", ca.SessionPresent)
	a.bg.Go(func() {
		ctx, cancel := context.WithTimeout(work, a.o.ConnectTimeout)
		defer cancel()
		a.subscribe(ctx, cm)
	})
}

// subscribe (re)makes every subscription: QoS 1, no retained messages
// (Retain Handling 2: a retained message is an old value, and would be
// stored again at every connection).
func (a *Adapter) subscribe(ctx context.Context, cm *autopaho.ConnectionManager) {
	sub := &paho.Subscribe{}
	for _, s := range a.subs {
		sub.Subscriptions = append(sub.Subscriptions, paho.SubscribeOptions{Topic: s.filter.broker, QoS: 1, RetainHandling: 2})
	}
	ack, err := cm.Subscribe(ctx, sub)
	if err != nil {
		if ctx.Err() == nil {
			a.o.Logger.Error("mqtt: subscribe failed; retrying at the next connection", "broker", a.Broker(), "err", err)
		}
		return
	}
	defer func() {
		if a.o.onSubscribed != nil {
			a.o.onSubscribed()
		}
	}()
	for i, code := range ack.Reasons {
		if i < len(a.subs) && code >= 0x80 {
			a.o.Logger.Error("mqtt: the broker refused a subscription", "topic", a.subs[i].filter.broker, "reason_code", code)
		} else if i < len(a.subs) && code == 0 {
			a.o.Logger.Warn("mqtt: the broker granted QoS 0 only: messages may be lost", "topic", a.subs[i].filter.broker)
		}
	}
}

// receiver is paho's OnPublishReceived: it queues the message for the
// ingest goroutine. It runs on paho's routing goroutine; a QoS 1 message
// always finds room (see New), so it never blocks for long.
func (a *Adapter) receiver(work context.Context) func(paho.PublishReceived) (bool, error) {
	return func(pr paho.PublishReceived) (bool, error) {
		m := &message{client: pr.Client, pub: pr.Packet, received: a.o.now()}
		if pr.Packet.QoS == 0 {
			select {
			case a.in <- m:
				a.m.pending.Add(1)
			default:
				a.m.message(outcomeDropped)
				a.rl.warn("dropped", "mqtt: a QoS 0 message was dropped: the queue is full", "topic", pr.Packet.Topic)
			}
			return true, nil
		}
		select {
		case a.in <- m:
			a.m.pending.Add(1)
		case <-work.Done():
			// Stopping: not acknowledged, so the broker sends it again
			// in the next session.
		}
		return true, nil
	}
}
