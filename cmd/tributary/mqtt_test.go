package main

import (
	"bytes"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/labels"
)

func TestMQTTFlags_BadInvocationsSayWhatIsWrong(t *testing.T) {
	dir := t.TempDir()
	badConfig := filepath.Join(dir, "bad.json")
	os.WriteFile(badConfig, []byte(`{"subscriptions":[{"topic":"a","format":"json","json":{"metric":"x","metric_field":"y"}}]}`), 0o600)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"topic without broker", []string{"--mqtt-topic", "a/#=influx"}, "need --mqtt-broker"},
		{"broker without topics", []string{"--mqtt-broker", "tcp://127.0.0.1:1"}, "no subscriptions"},
		{"bad scheme", []string{"--mqtt-broker", "http://x", "--mqtt-topic", "a=json"}, "scheme"},
		{"bad format", []string{"--mqtt-broker", "tcp://x", "--mqtt-topic", "a=xml"}, `format "xml"`},
		{"topic without format", []string{"--mqtt-broker", "tcp://x", "--mqtt-topic", "a/b"}, "FILTER=FORMAT"},
		{"missing config", []string{"--mqtt-broker", "tcp://x", "--mqtt-config", filepath.Join(dir, "none.json")}, "--mqtt-config"},
		{"bad mapping", []string{"--mqtt-broker", "tcp://x", "--mqtt-config", badConfig}, "at most one of metric"},
		{"cert without key", []string{"--mqtt-broker", "tls://x", "--mqtt-topic", "a=json", "--mqtt-cert", badConfig}, "go together"},
		{"missing password file", []string{"--mqtt-broker", "tcp://x", "--mqtt-topic", "a=json", "--mqtt-password-file", filepath.Join(dir, "pw")}, "--mqtt-password-file"},
	}
	for _, c := range cases {
		for _, cmd := range []string{"node", "local"} {
			t.Run(cmd+"/"+c.name, func(t *testing.T) {
				var out, errOut bytes.Buffer
				args := append([]string{cmd, "--data-dir", filepath.Join(dir, "data")}, c.args...)
				// 2: a usage error; 1: a flag value the flag package refused.
				if code := run(args, &out, &errOut); code != 2 && code != 1 {
					t.Fatalf("exit %d, want 1 or 2; stderr:\n%s", code, errOut.String())
				}
				if !strings.Contains(errOut.String(), c.want) {
					t.Fatalf("stderr does not mention %q:\n%s", c.want, errOut.String())
				}
			})
		}
	}
}

func TestMQTTFlags_ConfigFileAndTopicsMakeTheSubscriptions(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "mqtt.json")
	os.WriteFile(cfg, []byte(`{"subscriptions":[{"topic":"sensors/+site","format":"json","json":{"metric":"t","value_fields":["v"]}}]}`), 0o600)
	pw := filepath.Join(dir, "pw")
	os.WriteFile(pw, []byte("s3cret\n"), 0o600)
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var f mqttFlags
	f.register(fs)
	if err := fs.Parse([]string{"--mqtt-broker", "tcp://127.0.0.1:1", "--mqtt-config", cfg, "--mqtt-topic", "tg/#=influx",
		"--mqtt-topic", "spBv1.0/#=sparkplugb", "--mqtt-username", "u", "--mqtt-password-file", pw}); err != nil {
		t.Fatal(err)
	}
	if err := f.validate(labels.DefaultLimits, httpapi.Limits{}); err != nil {
		t.Fatal(err)
	}
	var formats []string
	for _, s := range f.o.Subscriptions {
		formats = append(formats, s.Topic+"="+string(s.Format))
	}
	if got := strings.Join(formats, " "); got != "sensors/+site=json tg/#=influx spBv1.0/#=sparkplugb" {
		t.Fatalf("subscriptions %s", got)
	}
	if string(f.o.Password) != "s3cret" || f.o.Username != "u" {
		t.Fatalf("credentials %q %q", f.o.Username, f.o.Password)
	}
	if f.o.ClientID != "" {
		t.Fatalf("client id %q before the node id is known", f.o.ClientID)
	}
}

// The adapter starts whether or not the broker is there (an edge keeps
// working offline) and stops promptly.
func TestMQTTFlags_StartWithoutABrokerAndStop(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	var f mqttFlags
	f.register(fs)
	if err := fs.Parse([]string{"--mqtt-broker", "tcp://" + addr, "--mqtt-topic", "a/#=influx"}); err != nil {
		t.Fatal(err)
	}
	if err := f.validate(labels.DefaultLimits, httpapi.Limits{}); err != nil {
		t.Fatal(err)
	}
	n, err := node.Open(node.Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	bg, err := f.start(n, n.NodeID(), noop.NewMeterProvider(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil || bg == nil {
		t.Fatalf("start: %v, %v", bg, err)
	}
	time.Sleep(200 * time.Millisecond)
	done := make(chan struct{})
	go func() { bg.stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("mqtt ingest did not stop within 15s")
	}
	if n.WriteReady() != nil {
		t.Fatal("the node is not ready")
	}
	var off mqttFlags
	if bg, err := off.start(n, "x", nil, nil); bg != nil || err != nil {
		t.Fatalf("started without --mqtt-broker: %v %v", bg, err)
	}
}
