package opentsdb

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/node/labels"
)

// benchPutBody is n datapoints over 100 series, as a sender batches them.
func benchPutBody(n int) string {
	rng := rand.New(rand.NewPCG(3, 4))
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"metric":"sys.cpu.user","timestamp":%d,"value":%.2f,"tags":{"host":"web%02d","cpu":"%d","dc":"lga"}}`,
			nowSec()-3600+int64(i/100), rng.Float64()*100, i%25, i%4)
	}
	b.WriteByte(']')
	return b.String()
}

func BenchmarkDecodePut(b *testing.B) {
	body := []byte(benchPutBody(1000))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		pb, err := decodePut(body, putLimits{maxPoints: 1_000_000})
		if err != nil || pb.failed != 0 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/point")
}

func BenchmarkParseTelnetLine(b *testing.B) {
	lines := make([]string, 1000)
	for i := range lines {
		lines[i] = fmt.Sprintf("put sys.cpu.user %d %d.5 host=web%02d cpu=%d dc=lga", nowSec()-3600+int64(i/100), i, i%25, i%4)
	}
	b.ReportAllocs()
	var bt batcher
	var fields []string
	var tags []labels.Label
	for b.Loop() {
		for _, l := range lines {
			var n int
			fields, n = splitFields(l, fields[:0], putFields+31)
			metric, tg, tMs, v, err := parsePut(fields[1:], n-1, 31, tags[:0])
			if err != nil {
				b.Fatal(err)
			}
			tags = tg
			if err := bt.add(metric, tg, tMs, v, 0); err != nil {
				b.Fatal(err)
			}
		}
		bt.take()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(lines)), "ns/line")
}

// BenchmarkPutHTTP stores 1000-point bodies in a real node over HTTP.
func BenchmarkPutHTTP(b *testing.B) {
	e := newEnv(b)
	b.ReportAllocs()
	i := 0
	// Distinct timestamps per body keep every point new.
	bodies := make([]string, 64)
	for j := range bodies {
		bodies[j] = benchPutBodyAt(1000, int64(j)*10)
	}
	for b.Loop() {
		e.put("", bodies[i%len(bodies)], http.StatusNoContent)
		i++
	}
	b.ReportMetric(float64(i*1000)/b.Elapsed().Seconds(), "points/s")
}

func benchPutBodyAt(n int, offsetSec int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"metric":"sys.cpu.user","timestamp":%d,"value":%d,"tags":{"host":"web%02d","cpu":"%d","dc":"lga"}}`,
			nowSec()-7000+offsetSec+int64(i/100), i, i%25, i%4)
	}
	b.WriteByte(']')
	return b.String()
}

// BenchmarkTelnetIngest streams put lines over TCP into a real node.
func BenchmarkTelnetIngest(b *testing.B) {
	e := newEnv(b)
	srv, err := NewTelnetServer(e.b, e.cfg, TelnetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(l)
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(c, 64<<10)
	b.ReportAllocs()
	start := nowMs() - 7000_000
	n := 0
	for b.Loop() {
		// 100 series, one point each per 100 lines, 10 ms apart.
		fmt.Fprintf(w, "put sys.cpu.user %d %d host=web%02d cpu=%d dc=lga\n", start+int64(n/100)*10, n%1000, n%25, n%4)
		n++
	}
	// The reply to version comes once every line before it is handled.
	fmt.Fprintf(w, "version\n")
	w.Flush()
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		b.Fatal(err)
	}
	c.Close()
	if err := srv.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	if got := e.cfg.Stats.Get("opentsdb_points_accepted"); got != int64(n) {
		b.Fatalf("%d points stored, want %d", got, n)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "points/s")
}

// BenchmarkQuery answers a Grafana-like query: 1-minute averages of 6
// series over two hours, summed per host.
func BenchmarkQuery(b *testing.B) {
	e, _ := seeded(b)
	for _, c := range []struct{ name, m string }{
		{"sum_1m-avg_by_host", "sum:1m-avg:sys.cpu.user{host=*}"},
		{"sum_1m-avg-nan_by_host", "sum:1m-avg-nan:sys.cpu.user{host=*}"},
		{"sum_rate_by_host", "sum:rate:net.bytes{host=*}"},
	} {
		b.Run(c.name, func(b *testing.B) {
			path := "/api/query?start=2h-ago&m=" + url.QueryEscape(c.m)
			b.ReportAllocs()
			for b.Loop() {
				e.query(path)
			}
		})
	}
}
