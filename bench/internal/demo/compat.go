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
	c := &compat{ctx: ctx, o: o, w: o.Out, hc: &http.Client{Timeout: o.CallTimeout}, base: "http://" + o.HTTPAddr,
		climate: newClimate(o.Now().UnixMilli(), o.Minutes)}
	c.endMs = c.climate.ts[len(c.climate.ts)-1]
	fmt.Fprintf(c.w, "\nThe same server speaks InfluxDB line protocol, PromQL and OpenTSDB on http://%s\n", o.HTTPAddr)
	if err := c.write(); err != nil {
		return nil, err
	}
	var outs []QueryOutcome
	for _, q := range []struct {
		title, how string
		run        func() (series, points int, err error)
	}{
		{"PromQL: mean temperature per room", "GET /api/v1/query?query=" + c.meanTempQuery(), c.meanTemperature},
		{"PromQL: kitchen humidity, maximum per minute", "GET /api/v1/query_range?step=60&query=" + kitchenHumidityQuery, c.kitchenHumidity},
		{"OpenTSDB: newest temperature of every room", "GET /api/query/last?timeseries=" + newestTempQuery, c.newestTemperature},
	} {
		fmt.Fprintf(c.w, "\n%d. %s\n   %s\n", len(outs)+1, q.title, q.how)
		t0 := time.Now()
		series, pts, err := q.run()
		if err != nil {
			fmt.Fprintf(c.w, "   ✗ %v\n", err)
		}
		outs = append(outs, QueryOutcome{Title: q.title, Latency: time.Since(t0), Series: series, Points: pts, Err: err})
	}
	return outs, nil
}

// compat is one run of RunCompat: the readings, and the server asked.
type compat struct {
	ctx     context.Context
	o       CompatOptions
	w       io.Writer
	hc      *http.Client
	base    string // the server's HTTP URL
	climate *climate
	endMs   int64 // time of the last readings
}

// write posts the readings as line protocol, unless o.SkipWrite.
func (c *compat) write() error {
	points := len(c.climate.ts) * len(rooms) * 2
	if c.o.SkipWrite {
		fmt.Fprintf(c.w, "\nNot writing: checking the %s climate readings written before\n", report.Int(int64(points)))
		return nil
	}
	fmt.Fprintf(c.w, "\nWriting %s climate readings (%d rooms, every 10 s) as line protocol to POST /write?db=demo ... ", report.Int(int64(points)), len(rooms))
	t0 := time.Now()
	status, msg, err := post(c.ctx, c.hc, c.base+"/write?db=demo&precision=ms", c.climate.lineProtocol())
	if err == nil && status != http.StatusNoContent {
		err = fmt.Errorf("POST /write answered %d: %s", status, msg)
	}
	if err != nil {
		fmt.Fprintln(c.w, "failed")
		return err
	}
	fmt.Fprintf(c.w, "204 No Content in %.1f ms\n", float64(time.Since(t0).Microseconds())/1000)
	c.waitVisible(len(rooms) * 2)
	return nil
}

// waitVisible waits until GET /api/v1/series lists the n series just
// written (at once on a node; through a coordinator, once the edge's
// announcement is in the catalog, about a second), and says how long
// that took.
func (c *compat) waitVisible(n int) {
	t0 := time.Now()
	u := c.base + "/api/v1/series?" + url.Values{"match[]": {`{db="demo"}`}}.Encode()
	var got int
	var err error
	for {
		var res struct {
			Data []map[string]string `json:"data"`
		}
		err = getJSON(c.ctx, c.hc, u, &res)
		if got = len(res.Data); err == nil && got >= n {
			fmt.Fprintf(c.w, "%d series listed %.2f s after the write\n", got, time.Since(t0).Seconds())
			return
		}
		if time.Since(t0) > 10*time.Second || c.ctx.Err() != nil {
			fmt.Fprintf(c.w, "only %d of %d series listed %.0f s after the write (last error: %v)\n", got, n, time.Since(t0).Seconds(), err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// meanTempQuery is an instant PromQL query: the mean temperature of each
// room over the readings.
func (c *compat) meanTempQuery() string {
	return `avg_over_time(climate_temp_c{db="demo"}[` + strconv.Itoa(c.o.Minutes) + `m])`
}

func (c *compat) meanTemperature() (int, int, error) {
	var res promVector
	if err := getJSON(c.ctx, c.hc, c.base+"/api/v1/query?"+url.Values{"query": {c.meanTempQuery()}, "time": {promTime(c.endMs)}}.Encode(), &res); err != nil {
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
	writeIndented(c.w, tb)
	for _, room := range rooms {
		want := avg(c.climate.temp[room])
		if g, ok := got[room]; !ok || math.Abs(g-want) > 1e-9 {
			return len(got), len(got), fmt.Errorf("room %s: answered %v (present %v), want %v", room, g, ok, want)
		}
	}
	return len(got), len(got), nil
}

// kitchenHumidityQuery is a range query: the kitchen's highest humidity
// per minute.
const kitchenHumidityQuery = `max_over_time(climate_humidity_pct{db="demo",room="kitchen"}[1m])`

func (c *compat) kitchenHumidity() (int, int, error) {
	var res promMatrix
	startMs := c.endMs - int64(c.o.Minutes-1)*60_000
	v := url.Values{"query": {kitchenHumidityQuery}, "start": {promTime(startMs)}, "end": {promTime(c.endMs)}, "step": {"60"}}
	if err := getJSON(c.ctx, c.hc, c.base+"/api/v1/query_range?"+v.Encode(), &res); err != nil {
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
		tb.Add(fmtTime(tMs, c.o.Location, "15:04:05"), report.Float(got, 0))
		// Prometheus windows are (t-1m, t].
		want := math.Inf(-1)
		for i, ts := range c.climate.ts {
			if ts > tMs-60_000 && ts <= tMs {
				want = math.Max(want, c.climate.humi["kitchen"][i])
			}
		}
		if got != want {
			return 1, len(vals), fmt.Errorf("minute ending %s: answered %v, want %v", fmtTime(tMs, c.o.Location, "15:04:05"), got, want)
		}
	}
	writeIndented(c.w, tb)
	if len(vals) != c.o.Minutes {
		return 1, len(vals), fmt.Errorf("%d minutes answered, want %d", len(vals), c.o.Minutes)
	}
	return 1, len(vals), nil
}

// newestTempQuery asks OpenTSDB for the newest temperature of every room.
const newestTempQuery = "climate_temp_c{db=demo}"

// lastPoint is one answer of OpenTSDB's /api/query/last.
type lastPoint struct {
	Timestamp int64             `json:"timestamp"`
	Value     string            `json:"value"`
	Tags      map[string]string `json:"tags"`
}

func (c *compat) newestTemperature() (int, int, error) {
	var res []lastPoint
	if err := getJSON(c.ctx, c.hc, c.base+"/api/query/last?"+url.Values{"timeseries": {newestTempQuery}}.Encode(), &res); err != nil {
		return 0, 0, err
	}
	slices.SortFunc(res, func(a, b lastPoint) int {
		return slices.Index(rooms, a.Tags["room"]) - slices.Index(rooms, b.Tags["room"])
	})
	tb := report.Table{Header: []string{"room", "time", "°C"}, RightAlign: []bool{false, false, true}}
	for _, r := range res {
		tb.Add(r.Tags["room"], fmtTime(r.Timestamp, c.o.Location, "15:04:05"), r.Value)
		want := c.climate.temp[r.Tags["room"]]
		if len(want) == 0 || r.Timestamp != c.endMs || r.Value != strconv.FormatFloat(want[len(want)-1], 'f', -1, 64) {
			return len(res), len(res), fmt.Errorf("room %q: answered %s at %d, want the reading at %d", r.Tags["room"], r.Value, r.Timestamp, c.endMs)
		}
	}
	writeIndented(c.w, tb)
	if len(res) != len(rooms) {
		return len(res), len(res), fmt.Errorf("%d rooms answered, want %d", len(res), len(rooms))
	}
	return len(res), len(res), nil
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
