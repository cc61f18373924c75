package influxql

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// python is Debian's interpreter, which python3-influxdb installs into.
const python = "/usr/bin/python3"

// runPythonClient runs testdata/client.py (python3-influxdb 5.3.1)
// against the InfluxDB API at addr (host:port).
func runPythonClient(t *testing.T, addr string) {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import influxdb").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import influxdb: run `make deps` (installs python3-influxdb): %v\n%s", python, err, out)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "-B", "testdata/client.py", host, port).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "ok ") {
		t.Fatalf("python3-influxdb client: %v\n%s", err, out)
	}
	t.Logf("python3-influxdb: %s", strings.TrimSpace(string(out)))
}

// TestPythonClient_WritesThenQueriesAndManages: Debian's python3-influxdb
// writes through its client, then query() (plain, epoch, chunked, bound
// parameters, two statements) and every management call it offers get
// the answers InfluxDB gives.
func TestPythonClient_WritesThenQueriesAndManages(t *testing.T) {
	e := newTestEnv(t, Options{})
	runPythonClient(t, strings.TrimPrefix(e.srv.URL, "http://"))
}
