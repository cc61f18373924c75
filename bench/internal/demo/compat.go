package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/tributarydb/tributary/bench/internal/report"
)

// CompatOptions configures RunCompat.
type CompatOptions struct {
	// HTTPAddr is the node's HTTP address (host:port).
	HTTPAddr string
	// Minutes of climate readings to write, ending now.
	Minutes     int
	CallTimeout time.Duration
	Now         func() time.Time
	Location    *time.Location
	Out         io.Writer
	// SkipWrite only asks and checks (see Options.SkipWrite).
	SkipWrite bool
}

// rooms of the demo building; each reports a temperature and a humidity
// every 10 s.
var rooms = []string{"kitchen", "living", "bedroom", "garage"}

const climateIntervalMs = 10_000

type climate struct {
	ts         []int64
	temp, humi map[string][]float64
}

func newClimate(endMs int64, minutes int) *climate {
	n := minutes * 60_000 / climateIntervalMs
	c := &climate{temp: map[string][]float64{}, humi: map[string][]float64{}}
	endMs -= endMs % climateIntervalMs
	for i := range n {
		c.ts = append(c.ts, endMs-int64(n-1-i)*climateIntervalMs)
	}
	for r, room := range rooms {
		for i := range n {
			phase := float64(i)/30 + float64(r)
			c.temp[room] = append(c.temp[room], math.Round((19+2*float64(r)+1.5*math.Sin(phase))*100)/100)
			c.humi[room] = append(c.humi[room], float64(40+5*r+int(10*math.Cos(phase))))
		}
	}
	return c
}

// lineProtocol renders the readings as InfluxDB line protocol, one line
// per room and time (two fields each), millisecond precision.
func (c *climate) lineProtocol() []byte {
	var b bytes.Buffer
	for i, t := range c.ts {
		for _, room := range rooms {
			fmt.Fprintf(&b, "climate,room=%s temp_c=%s,humidity_pct=%di %d\n", room,
				strconv.FormatFloat(c.temp[room][i], 'f', -1, 64), int(c.humi[room][i]), t)
		}
	}
	return b.Bytes()
}

// RunCompat shows the node speaking other databases' protocols: it writes
// a building's climate readings as InfluxDB line protocol over HTTP, asks
// for them through the Prometheus query API (PromQL) and OpenTSDB's
// last-point API, and checks every answer against the readings written.
func RunCompat(ctx context.Context, o CompatOptions) ([]QueryOutcome, error) {
	w := o.Out
	hc := &http.Client{Timeout: o.CallTimeout}
	base := "http://" + o.HTTPAddr
	c := newClimate(o.Now().UnixMilli(), o.Minutes)
	endMs := c.ts[len(c.ts)-1]
	body := c.lineProtocol()
	points := len(c.ts) * len(rooms) * 2

	fmt.Fprintf(w, "\nThe same server speaks InfluxDB line protocol, PromQL and OpenTSDB on http://%s\n", o.HTTPAddr)
	if o.SkipWrite {
		fmt.Fprintf(w, "\nNot writing: checking the %s climate readings written before\n", report.Int(int64(points)))
	} else {
		fmt.Fprintf(w, "\nWriting %s climate readings (%d rooms, every 10 s) as line protocol to POST /write?db=demo ... ", report.Int(int64(points)), len(rooms))
		t0 := time.Now()
		status, msg, err := post(ctx, hc, base+"/write?db=demo&precision=ms", body)
		if err == nil && status != http.StatusNoContent {
			err = fmt.Errorf("POST /write answered %d: %s", status, msg)
		}
		if err != nil {
			fmt.Fprintln(w, "failed")
			return nil, err
		}
		fmt.Fprintf(w, "204 No Content in %.1f ms\n", float64(time.Since(t0).Microseconds())/1000)
	}

	var outs []QueryOutcome
	run := func(title, how string, f func() (int, int, error)) {
		fmt.Fprintf(w, "\n%d. %s\n   %s\n", len(outs)+1, title, how)
		t0 := time.Now()
		series, pts, err := f()
		out := QueryOutcome{Title: title, Latency: time.Since(t0), Series: series, Points: pts, Err: err}
		if err != nil {
			fmt.Fprintf(w, "   ✗ %v\n", err)
		}
		outs = append(outs, out)
	}

	// 1. An instant PromQL query: the mean temperature of each room.
	q1 := `avg_over_time(climate_temp_c{db="demo"}[` + strconv.Itoa(o.Minutes) + `m])`
	run("PromQL: mean temperature per room", "GET /api/v1/query?query="+q1, func() (int, int, error) {
		var res promVector
		if err := getJSON(ctx, hc, base+"/api/v1/query?"+url.Values{"query": {q1}, "time": {promTime(endMs)}}.Encode(), &res); err != nil {
			return 0, 0, err
		}
		tb := report.Table{Header: []string{"room", "mean °C"}, RightAlign: []bool{false, true}}
		got := map[string]float64{}
		for _, s := range res.Data.Result {
			v, err := strconv.ParseFloat(s.Value[1].(string), 64)
			if err != nil {
				return 0, 0, fmt.Errorf("value %v: %w", s.Value[1], err)
			}
			got[s.Metric["room"]] = v
			tb.Add(s.Metric["room"], report.Float(v, 2))
		}
		writeIndented(w, tb)
		for _, room := range rooms {
			want := avg(c.temp[room])
			if g, ok := got[room]; !ok || math.Abs(g-want) > 1e-9 {
				return len(got), len(got), fmt.Errorf("room %s: answered %v (present %v), want %v", room, g, ok, want)
			}
		}
		return len(got), len(got), nil
	})

	// 2. A range query: the kitchen's highest humidity per minute.
	q2 := `max_over_time(climate_humidity_pct{db="demo",room="kitchen"}[1m])`
	startMs := endMs - int64(o.Minutes-1)*60_000
	run("PromQL: kitchen humidity, maximum per minute", "GET /api/v1/query_range?step=60&query="+q2, func() (int, int, error) {
		var res promMatrix
		v := url.Values{"query": {q2}, "start": {promTime(startMs)}, "end": {promTime(endMs)}, "step": {"60"}}
		if err := getJSON(ctx, hc, base+"/api/v1/query_range?"+v.Encode(), &res); err != nil {
			return 0, 0, err
		}
		if len(res.Data.Result) != 1 {
			return len(res.Data.Result), 0, fmt.Errorf("%d series answered, want 1", len(res.Data.Result))
		}
		vals := res.Data.Result[0].Values
		tb := report.Table{Header: []string{"minute ending", "max %"}, RightAlign: []bool{false, true}}
		for _, p := range vals {
			tsec, _ := p[0].(float64)
			tMs := int64(math.Round(tsec * 1000))
			got, err := strconv.ParseFloat(p[1].(string), 64)
			if err != nil {
				return 1, len(vals), err
			}
			tb.Add(fmtTime(tMs, o.Location, "15:04:05"), report.Float(got, 0))
			// Prometheus windows are (t-1m, t].
			want := math.Inf(-1)
			for i, ts := range c.ts {
				if ts > tMs-60_000 && ts <= tMs {
					want = math.Max(want, c.humi["kitchen"][i])
				}
			}
			if got != want {
				return 1, len(vals), fmt.Errorf("minute ending %s: answered %v, want %v", fmtTime(tMs, o.Location, "15:04:05"), got, want)
			}
		}
		writeIndented(w, tb)
		if len(vals) != o.Minutes {
			return 1, len(vals), fmt.Errorf("%d minutes answered, want %d", len(vals), o.Minutes)
		}
		return 1, len(vals), nil
	})

	// 3. OpenTSDB: the newest temperature of every room.
	q3 := "climate_temp_c{db=demo}"
	run("OpenTSDB: newest temperature of every room", "GET /api/query/last?timeseries="+q3, func() (int, int, error) {
		var res []struct {
			Timestamp int64             `json:"timestamp"`
			Value     string            `json:"value"`
			Tags      map[string]string `json:"tags"`
		}
		if err := getJSON(ctx, hc, base+"/api/query/last?"+url.Values{"timeseries": {q3}}.Encode(), &res); err != nil {
			return 0, 0, err
		}
		slices.SortFunc(res, func(a, b struct {
			Timestamp int64             `json:"timestamp"`
			Value     string            `json:"value"`
			Tags      map[string]string `json:"tags"`
		}) int {
			return slices.Index(rooms, a.Tags["room"]) - slices.Index(rooms, b.Tags["room"])
		})
		tb := report.Table{Header: []string{"room", "time", "°C"}, RightAlign: []bool{false, false, true}}
		for _, r := range res {
			tb.Add(r.Tags["room"], fmtTime(r.Timestamp, o.Location, "15:04:05"), r.Value)
			want := c.temp[r.Tags["room"]]
			if len(want) == 0 || r.Timestamp != endMs || r.Value != strconv.FormatFloat(want[len(want)-1], 'f', -1, 64) {
				return len(res), len(res), fmt.Errorf("room %q: answered %s at %d, want the reading at %d", r.Tags["room"], r.Value, r.Timestamp, endMs)
			}
		}
		writeIndented(w, tb)
		if len(res) != len(rooms) {
			return len(res), len(res), fmt.Errorf("%d rooms answered, want %d", len(res), len(rooms))
		}
		return len(res), len(res), nil
	})
	return outs, nil
}

type promVector struct {
	Data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	} `json:"data"`
}

type promMatrix struct {
	Data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"`
		} `json:"result"`
	} `json:"data"`
}

func promTime(ms int64) string { return strconv.FormatFloat(float64(ms)/1000, 'f', 3, 64) }

func post(ctx context.Context, hc *http.Client, u string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(msg), nil
}

func getJSON(ctx context.Context, hc *http.Client, u string, into any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %d: %.300s", resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("decode answer: %w (%.200s)", err, body)
	}
	return nil
}
