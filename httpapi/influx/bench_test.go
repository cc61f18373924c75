package influx

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/node"
)

// tsbsCPU returns lines in the shape of the TSBS cpu-only workload: hosts
// hosts with 10 tags each, 10 integer fields a line, a line per host per
// 10 s starting at startNs.
func tsbsCPU(seed uint64, hosts, lines int, startNs int64) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	regions := []string{"us-east-1", "us-west-1", "eu-west-1", "eu-central-1", "ap-northeast-1"}
	oses := []string{"Ubuntu16.04LTS", "Ubuntu15.10", "Ubuntu16.10"}
	keys := make([]string, hosts)
	for h := range keys {
		r := regions[rng.IntN(len(regions))]
		keys[h] = fmt.Sprintf("cpu,hostname=host_%d,region=%s,datacenter=%sa,rack=%d,os=%s,arch=x64,team=NYC,service=%d,service_version=%d,service_environment=production",
			h, r, r, rng.IntN(100), oses[rng.IntN(len(oses))], rng.IntN(20), rng.IntN(2))
	}
	fields := []string{"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
		"usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice"}
	var b strings.Builder
	for i := 0; i < lines; i++ {
		h := i % hosts
		b.WriteString(keys[h])
		for f, name := range fields {
			if f == 0 {
				b.WriteByte(' ')
			} else {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%s=%di", name, rng.IntN(100))
		}
		fmt.Fprintf(&b, " %d\n", startNs+int64(i/hosts)*int64(10*time.Second))
	}
	return []byte(b.String())
}

// BenchmarkParse parses TSBS-style cpu lines (10 integer fields a line)
// with a warm series cache, as a long-running server does.
func BenchmarkParse(b *testing.B) {
	for _, hosts := range []int{100, 1000} {
		b.Run(fmt.Sprintf("tsbs-cpu/hosts=%d", hosts), func(b *testing.B) {
			body := tsbsCPU(1, hosts, 5000, 1451606400000000000)
			p := NewParser(Options{})
			res, err := p.Parse(body, "benchmark", Nanosecond, 0)
			if err != nil || res.RejectedLines > 0 {
				b.Fatalf("warm-up: %v %+v", err, res.Errors)
			}
			points := res.Points
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := p.Parse(body, "benchmark", Nanosecond, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(points), "ns/point")
		})
	}
	b.Run("cold-cache/hosts=1000", func(b *testing.B) {
		body := tsbsCPU(1, 1000, 5000, 1451606400000000000)
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		points := 0
		for range b.N {
			p := NewParser(Options{})
			res, err := p.Parse(body, "benchmark", Nanosecond, 0)
			if err != nil {
				b.Fatal(err)
			}
			points = res.Points
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(points), "ns/point")
	})
}

// BenchmarkWriteHTTP is the whole write path in one process: HTTP client,
// handler, parser and a real node on a temporary directory (fsync before
// every acknowledgement), with 4 concurrent clients each sending
// TSBS-style requests of 5,000 lines (50,000 points) to series of their
// own. It reports points/s and the CPU the process spent per million
// points (client side included).
func BenchmarkWriteHTTP(b *testing.B) {
	n, err := node.Open(node.Options{DataDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := n.Close(); err != nil {
			b.Error(err)
		}
	}()
	mux := http.NewServeMux()
	Register(mux, n, &httpapi.Config{})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	const hosts, linesPerReq = 100, 5000
	const stepMs = 100 // between the lines of one host
	start := time.Now().Add(-2 * time.Hour).UnixMilli()
	var clients atomic.Int64
	var points atomic.Int64
	cpu0, cpuOK := processCPU()
	b.SetParallelism(2) // 2 x GOMAXPROCS clients
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := clients.Add(1)
		// The body is built once in milliseconds; each request rewrites
		// the fixed-width timestamps in place so that every host moves
		// forward in time.
		tmpl := tsbsCPU(uint64(id), hosts, linesPerReq, 0)
		tmpl = bytes.ReplaceAll(tmpl, []byte("hostname=host_"), []byte(fmt.Sprintf("hostname=c%d_host_", id)))
		body, slots := msTemplate(tmpl)
		client := srv.Client()
		for req := int64(0); pb.Next(); req++ {
			for i, off := range slots {
				step := req*linesPerReq/hosts + int64(i/hosts)
				strconv.AppendInt(body[off:off], start+step*stepMs, 10)
			}
			resp, err := client.Post(srv.URL+"/api/v2/write?bucket=bench&precision=ms", "text/plain", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			msg, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNoContent {
				b.Errorf("status %d: %.300s", resp.StatusCode, msg)
				return
			}
			points.Add(linesPerReq * 10)
		}
	})
	b.StopTimer()
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(points.Load())/secs, "points/s")
	if cpu1, ok := processCPU(); ok && cpuOK && points.Load() > 0 {
		b.ReportMetric((cpu1-cpu0).Seconds()/(float64(points.Load())/1e6), "cpu-s/Mpoints")
	}
}

// msTemplate rewrites the timestamps of body to 13 fixed-width digits and
// returns where each one starts.
func msTemplate(body []byte) ([]byte, []int) {
	var out []byte
	var slots []int
	for _, line := range bytes.SplitAfter(body, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		sp := bytes.LastIndexByte(line, ' ')
		out = append(out, line[:sp+1]...)
		slots = append(slots, len(out))
		out = append(out, "0000000000000\n"...)
	}
	return out, slots
}
