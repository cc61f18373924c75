package edgebench

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tributarydb/tributary/bench/internal/lpbench"
)

// lpBody is one rendered line-protocol request.
type lpBody struct {
	body   []byte
	points int64
	lines  int64
}

// lpWriteStats are the figures of a line-protocol write phase.
type lpWriteStats struct {
	Lines, Points int64
	Elapsed       time.Duration
	Latencies     []time.Duration
}

// writeLP posts every client's bodies, in order, over that client's own
// keep-alive connection to url; every answer must be 204 No Content.
func writeLP(ctx context.Context, url string, perClient [][]lpBody) (lpWriteStats, error) {
	var (
		st   lpWriteStats
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs = make([]error, len(perClient))
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	t0 := time.Now()
	for c, bodies := range perClient {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := newHTTPClient()
			defer hc.CloseIdleConnections()
			lat := make([]time.Duration, 0, len(bodies))
			var lines, points int64
			for _, b := range bodies {
				t := time.Now()
				if err := lpbench.Post(ctx, hc, url, b.body); err != nil {
					errs[c] = err
					cancel()
					return
				}
				lat = append(lat, time.Since(t))
				lines += b.lines
				points += b.points
			}
			mu.Lock()
			st.Lines += lines
			st.Points += points
			st.Latencies = append(st.Latencies, lat...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	st.Elapsed = time.Since(t0)
	return st, errors.Join(errs...)
}

func newHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 2 * time.Minute,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 1,
			DisableCompression:  true,
			WriteBufferSize:     256 << 10,
		},
	}
}
