package compat

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// startMosquitto starts Debian's mosquitto broker on a loopback port; it
// is stopped when t ends.
func startMosquitto(t *testing.T) (host, port string) {
	t.Helper()
	addr := freeAddr(t)
	host, port, _ = strings.Cut(addr, ":")
	conf := filepath.Join(t.TempDir(), "mosquitto.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf("listener %s %s\nallow_anonymous true\n", port, host)), 0o600); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd := exec.Command("mosquitto", "-c", conf)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	waitFor(t, 10*time.Second, "mosquitto to listen\n"+out.String(), func() bool {
		return exec.Command("mosquitto_pub", "-h", host, "-p", port, "-t", "probe", "-m", "x").Run() == nil
	})
	return host, port
}

// TestCompat_Mosquitto feeds a node through Debian's mosquitto broker
// with mosquitto_pub (QoS 1): line protocol and JSON messages carrying a
// ledger (sequence numbers at distinct timestamps), with the node killed
// with SIGKILL mid-stream and restarted while messages keep coming, then
// Sparkplug B NBIRTH/NDATA payloads. Every ledger entry must be stored
// exactly once at its timestamp (redeliveries of QoS 1 land on the same
// timestamp), and nothing else.
func TestCompat_Mosquitto(t *testing.T) {
	requireCompat(t, "mosquitto", "mosquitto_pub")
	host, port := startMosquitto(t)
	cfg := filepath.Join(t.TempDir(), "mqtt.json")
	if err := os.WriteFile(cfg, []byte(`{"subscriptions": [
  {"topic": "lp/#", "format": "influx", "precision": "ms"},
  {"topic": "js/+device", "format": "json",
   "json": {"metric": "jledger", "value_fields": ["seq"], "time_field": "ts", "time_unit": "ms"}},
  {"topic": "spBv1.0/#", "format": "sparkplugb"}
]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, "--mqtt-broker", "tcp://"+host+":"+port, "--mqtt-config", cfg, "--mqtt-client-id", "compat-node")

	const total = 400
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Second).UnixMilli()
	lp := newPublisher(t, host, port, "lp/site1")
	js := newPublisher(t, host, port, "js/dev1")
	for i := range total {
		ts := base + int64(i)*100
		lp.send(fmt.Sprintf("ledger,src=lp seq=%di %d", i, ts))
		js.send(fmt.Sprintf(`{"seq": %d, "ts": %d}`, i, ts))
		switch i {
		case total / 3:
			n.kill9() // mid-stream: what was received and not acknowledged is redelivered
		case total / 2:
			n.start() // the same data directory and MQTT session
		}
		time.Sleep(3 * time.Millisecond)
	}
	lp.close()
	js.close()
	for _, sel := range []string{`ledger_seq{src="lp"}`, `jledger{device="dev1"}`} {
		var got map[string]map[int64]float64
		waitFor(t, 60*time.Second, sel+" to hold the whole ledger", func() bool {
			got = n.promSamples(sel, "1h")
			return len(got) == 1 && len(first(got)) >= total
		})
		checkLedger(t, sel, first(got), base, total)
	}

	// Sparkplug B: a birth then data, by metric name.
	spTs := uint64(base + total*100)
	publishFile(t, host, port, "spBv1.0/plant/NBIRTH/edge1", sparkplug(spTs, "Inputs/Temp", 20.5))
	publishFile(t, host, port, "spBv1.0/plant/NDATA/edge1", sparkplug(spTs+1000, "Inputs/Temp", 21.25))
	sel := `Inputs_Temp{group_id="plant",edge_node_id="edge1"}`
	var got map[string]map[int64]float64
	waitFor(t, 30*time.Second, sel, func() bool {
		got = n.promSamples(sel, "1h")
		return len(got) == 1 && len(first(got)) == 2
	})
	if s := first(got); s[int64(spTs)] != 20.5 || s[int64(spTs)+1000] != 21.25 {
		t.Errorf("sparkplug samples %v", s)
	}
}

// checkLedger requires exactly the entries 0..total-1, entry i at
// base+100*i with value i.
func checkLedger(t *testing.T, what string, got map[int64]float64, base int64, total int) {
	t.Helper()
	if len(got) != total {
		t.Errorf("%s: %d points, want %d", what, len(got), total)
	}
	for i := range total {
		if v, ok := got[base+int64(i)*100]; !ok || v != float64(i) {
			t.Errorf("%s: entry %d: %v (present %v)", what, i, v, ok)
		}
	}
}

func first(m map[string]map[int64]float64) map[int64]float64 {
	for _, v := range m {
		return v
	}
	return nil
}

// publisher is a mosquitto_pub -l process: each line written is one QoS 1
// message.
type publisher struct {
	t   *testing.T
	cmd *exec.Cmd
	in  *bufio.Writer
	raw interface{ Close() error }
	out *syncBuffer
}

func newPublisher(t *testing.T, host, port, topic string) *publisher {
	t.Helper()
	p := &publisher{t: t, out: &syncBuffer{}}
	p.cmd = exec.Command("mosquitto_pub", "-h", host, "-p", port, "-q", "1", "-t", topic, "-l")
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	w, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.raw, p.in = w, bufio.NewWriter(w)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *publisher) send(line string) {
	p.in.WriteString(line + "\n")
	if err := p.in.Flush(); err != nil {
		p.t.Fatalf("mosquitto_pub: %v\n%s", err, p.out.String())
	}
}

func (p *publisher) close() {
	p.raw.Close()
	if err := p.cmd.Wait(); err != nil {
		p.t.Fatalf("mosquitto_pub: %v\n%s", err, p.out.String())
	}
}

// publishFile publishes payload as one QoS 1 message (mosquitto_pub -f).
func publishFile(t *testing.T, host, port, topic string, payload []byte) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "payload")
	if err := os.WriteFile(f, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mosquitto_pub", "-h", host, "-p", port, "-q", "1", "-t", topic, "-f", f).CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_pub -f: %v\n%s", err, out)
	}
}

// sparkplug encodes a Sparkplug B payload (the published protobuf schema:
// Payload.timestamp 1, metrics 2, seq 3; Metric.name 1, timestamp 3,
// datatype 4, double_value 13; datatype Double = 10) with one metric.
func sparkplug(tsMs uint64, name string, v float64) []byte {
	var m []byte
	m = protowire.AppendTag(m, 1, protowire.BytesType)
	m = protowire.AppendString(m, name)
	m = protowire.AppendTag(m, 3, protowire.VarintType)
	m = protowire.AppendVarint(m, tsMs)
	m = protowire.AppendTag(m, 4, protowire.VarintType)
	m = protowire.AppendVarint(m, 10)
	m = protowire.AppendTag(m, 13, protowire.Fixed64Type)
	m = protowire.AppendFixed64(m, math.Float64bits(v))
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, tsMs)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, m)
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, 0)
	return b
}
