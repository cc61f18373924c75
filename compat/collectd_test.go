package compat

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// collectdBin is where Debian's collectd-core installs the daemon.
const collectdBin = "/usr/sbin/collectd"

// TestCompat_Collectd runs Debian's collectd with its write_tsdb plugin
// pointed at the node's OpenTSDB telnet input (--opentsdb-listen) and
// reads the metrics back through the OpenTSDB HTTP API, as a Grafana
// OpenTSDB data source would.
func TestCompat_Collectd(t *testing.T) {
	requireCompat(t, collectdBin)
	n := startNode(t)
	dir := t.TempDir()
	host, port, _ := strings.Cut(n.telnet, ":")
	conf := fmt.Sprintf(`Hostname "compathost"
FQDNLookup false
BaseDir %[1]q
PIDFile %[2]q
PluginDir "/usr/lib/collectd"
TypesDB "/usr/share/collectd/types.db"
Interval 1
LoadPlugin load
LoadPlugin memory
LoadPlugin write_tsdb
<Plugin write_tsdb>
  <Node "tributary">
    Host %[3]q
    Port %[4]q
    HostTags "source=collectd"
  </Node>
</Plugin>
`, dir, filepath.Join(dir, "collectd.pid"), host, port)
	confPath := filepath.Join(dir, "collectd.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	cmd := exec.Command(collectdBin, "-f", "-C", confPath)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()

	// write_tsdb names a value <plugin>.<type>.<type instance> with the
	// tag fqdn (the host name) and the HostTags.
	metric := "load.load.shortterm"
	var got []struct {
		Metric string             `json:"metric"`
		Tags   map[string]string  `json:"tags"`
		Dps    map[string]float64 `json:"dps"`
	}
	var last []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, b := n.get("/api/query", url.Values{"start": {"5m-ago"}, "m": {"max:" + metric + "{fqdn=*}"}})
		last = b
		if st == 200 && json.Unmarshal(b, &got) == nil && len(got) == 1 && len(got[0].Dps) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			st, names := n.get("/api/suggest", url.Values{"type": {"metrics"}, "max": {"50"}})
			t.Fatalf("collectd's %s did not arrive in 30s: last answer %.500s\nmetrics: %d %.1000s\ncollectd:\n%s", metric, last, st, names, out.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
	if got[0].Tags["fqdn"] != "compathost" || got[0].Tags["source"] != "collectd" {
		t.Errorf("tags %v, want fqdn=compathost source=collectd", got[0].Tags)
	}
	for ts, v := range got[0].Dps {
		if v < 0 || v > 1000 {
			t.Errorf("load at %s = %v", ts, v)
		}
	}
	// The memory plugin's values, listed by the OpenTSDB suggest API.
	st, b := n.get("/api/suggest", url.Values{"type": {"metrics"}, "q": {"memory."}, "max": {"50"}})
	if st != 200 || !strings.Contains(string(b), `"memory.used.memory"`) {
		t.Errorf("suggest memory.: %d %s", st, b)
	}
}
