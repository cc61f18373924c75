package mqttapi

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/autopaho"
	"github.com/eclipse/paho.golang/paho"
)

// mosquittoPath finds Debian's mosquitto (scripts/deps.sh installs it).
func mosquittoPath() string {
	if p, err := exec.LookPath("mosquitto"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// broker is a mosquitto process on a loopback port, with its state
// (sessions, queued messages) persisted in a directory so that it
// survives a restart.
type broker struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
	done chan struct{}
}

// startBroker starts mosquitto; the test is skipped, loudly, only when
// the binary is not installed.
func startBroker(t testing.TB) *broker {
	t.Helper()
	bin := mosquittoPath()
	if bin == "" {
		fmt.Fprintln(os.Stderr, "\n*** SKIPPING MQTT BROKER TESTS: mosquitto is not installed (run scripts/deps.sh) ***")
		t.Skip("mosquitto is not installed: run scripts/deps.sh (apt-get install mosquitto)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	b := &broker{t: t, bin: bin, dir: t.TempDir(), port: port}
	b.start()
	t.Cleanup(func() {
		b.stop()
		if t.Failed() {
			if log, err := os.ReadFile(filepath.Join(b.dir, "mosquitto.log")); err == nil {
				t.Logf("mosquitto log:\n%s", log)
			}
		}
	})
	return b
}

func (b *broker) url() string { return fmt.Sprintf("tcp://127.0.0.1:%d", b.port) }

// start runs mosquitto and waits until it accepts connections.
func (b *broker) start() {
	b.t.Helper()
	conf := fmt.Sprintf(`listener %d 127.0.0.1
allow_anonymous true
persistence true
persistence_location %s/
max_queued_messages 0
log_dest file %s
log_type error
log_type warning
log_type notice
`, b.port, b.dir, filepath.Join(b.dir, "mosquitto.log"))
	if os.Geteuid() == 0 {
		if u, err := user.Current(); err == nil {
			conf += "user " + u.Username + "\n" // do not drop to user mosquitto, who cannot write b.dir
		}
	}
	path := filepath.Join(b.dir, "mosquitto.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		b.t.Fatal(err)
	}
	b.cmd = exec.Command(b.bin, "-c", path)
	if f, err := os.OpenFile(filepath.Join(b.dir, "mosquitto.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err == nil {
		b.cmd.Stderr = f
		defer f.Close()
	}
	if err := b.cmd.Start(); err != nil {
		b.t.Fatalf("start mosquitto: %v", err)
	}
	b.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		close(done)
	}(b.cmd, b.done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", b.port), time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-b.done:
			b.t.Fatalf("mosquitto exited at start; log in %s", b.dir)
		default:
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("mosquitto does not accept connections on port %d", b.port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends mosquitto with SIGTERM, which saves its state.
func (b *broker) stop() {
	if b.cmd == nil {
		return
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		b.cmd.Process.Kill()
		<-b.done
	}
	b.cmd = nil
}

// publisher is a test client that publishes at QoS 1 and waits for the
// broker's acknowledgement.
type publisher struct {
	t  testing.TB
	cm *autopaho.ConnectionManager
}

func newPublisher(t testing.TB, brokerURL, id string) *publisher {
	t.Helper()
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cm, err := autopaho.NewConnection(ctx, autopaho.ClientConfig{
		ServerUrls:                    []*url.URL{u},
		KeepAlive:                     10,
		CleanStartOnInitialConnection: true,
		ReconnectBackoff:              autopaho.NewConstantBackoff(100 * time.Millisecond),
		ClientConfig:                  paho.ClientConfig{ClientID: id},
	})
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := cm.AwaitConnection(wctx); err != nil {
		t.Fatalf("publisher cannot connect: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		<-cm.Done()
	})
	return &publisher{t: t, cm: cm}
}

// publish sends one message at QoS 1 and returns once the broker holds
// it, retrying across reconnections.
func (p *publisher) publish(topic string, payload []byte) {
	p.t.Helper()
	if err := p.tryPublish(topic, payload); err != nil {
		p.t.Fatal(err)
	}
}

// tryPublish is publish for goroutines other than the test's.
func (p *publisher) tryPublish(topic string, payload []byte) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := p.cm.Publish(ctx, &paho.Publish{QoS: 1, Topic: topic, Payload: payload})
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("publish %s: %w", topic, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
