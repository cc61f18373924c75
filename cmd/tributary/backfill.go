package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/httpapi/prom"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/rules"
)

const backfillUsage = `usage: tributary rules backfill --rules FILE --start T --end T (--node URL | --data-dir DIR) [flags]

Evaluates the recording rules of FILE at every multiple of their group's
interval from --start to --end and writes the samples into a node: a running
one through its HTTP API (--node http://host:7071; queries and remote_write)
or a stopped one's data directory (--data-dir). Alerting rules are skipped.
Before writing anything it looks for samples of the rules' series in the
range (which it would overwrite or duplicate) and after it (the node refuses
points older than a series' newest by more than its out-of-order window): if
there are any, it writes nothing and says which series hold them. Backfill a
new rule before adding it to the node's --rules.

Times: RFC 3339, a date, Unix seconds or milliseconds, "now", or relative
("-30d", "now-2h").
`

// backfillFlags are the flags of `rules backfill`.
type backfillFlags struct {
	files              []string
	start, end         string
	nodeURL            string
	dataDir, nodeID    string
	evaluationInterval time.Duration
	stepsPerQuery      int
	token, tlsCA       string
	timeout            time.Duration
}

func runRulesBackfill(args []string, stdout, stderr io.Writer) error {
	var f backfillFlags
	fs := newFlagSet("rules backfill", stderr, backfillUsage)
	fs.Var(listFlag{&f.files}, "rules", "rule file (a glob pattern; repeatable)")
	fs.StringVar(&f.start, "start", "", "first evaluation time (included)")
	fs.StringVar(&f.end, "end", "", "last evaluation time (included)")
	fs.StringVar(&f.nodeURL, "node", "", "HTTP base URL of a running node, e.g. http://127.0.0.1:7071")
	fs.StringVar(&f.dataDir, "data-dir", "", "data directory of a stopped node (instead of --node)")
	fs.StringVar(&f.nodeID, "node-id", "", "the stopped node's --node-id, if it was given one")
	fs.DurationVar(&f.evaluationInterval, "evaluation-interval", rules.DefaultEvaluationInterval, "interval of groups without one of their own (the node's --rules-evaluation-interval)")
	fs.IntVar(&f.stepsPerQuery, "steps-per-query", 720, "evaluation times of one rule per range query (bounds memory)")
	fs.StringVar(&f.token, "token", "", "bearer token for --node (default: $"+tokenEnv+")")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "PEM CA bundle to verify an https --node with")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Minute, "timeout of one request to --node")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	o, err := f.options(time.Now())
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	o.Logger = log
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	var rep rules.BackfillReport
	if f.dataDir != "" {
		rep, err = backfillDataDir(ctx, f, o, log)
	} else {
		var c *nodeHTTP
		if c, err = f.client(); err == nil {
			rep, err = rules.Backfill(ctx, c, c.write, o)
		}
	}
	if err != nil {
		return err
	}
	span := "no evaluation time in the range"
	if !rep.First.IsZero() {
		span = "evaluated from " + rep.First.UTC().Format(time.RFC3339) + " to " + rep.Last.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(stdout, "backfilled %d recording rules of %d groups (%d alerting rules skipped): %d samples in %d series, %s\n",
		rep.Rules, rep.Groups, rep.AlertingSkipped, rep.Samples, rep.Series, span)
	return nil
}

// options checks the flags and turns them into BackfillOptions.
func (f backfillFlags) options(now time.Time) (rules.BackfillOptions, error) {
	var o rules.BackfillOptions
	switch {
	case len(f.files) == 0:
		return o, fmt.Errorf("%w: --rules is required", errUsage)
	case f.start == "" || f.end == "":
		return o, fmt.Errorf("%w: --start and --end are required", errUsage)
	case (f.nodeURL == "") == (f.dataDir == ""):
		return o, fmt.Errorf("%w: give one of --node (a running node) and --data-dir (a stopped one)", errUsage)
	case f.evaluationInterval <= 0 || f.stepsPerQuery <= 0:
		return o, fmt.Errorf("%w: --evaluation-interval and --steps-per-query must be positive", errUsage)
	}
	start, err := parseTime(f.start, now, 0)
	if err != nil {
		return o, fmt.Errorf("%w: --start %v", errUsage, err)
	}
	end, err := parseTime(f.end, now, 0)
	if err != nil {
		return o, fmt.Errorf("%w: --end %v", errUsage, err)
	}
	return rules.BackfillOptions{Files: f.files, Start: time.UnixMilli(start), End: time.UnixMilli(end),
		EvaluationInterval: f.evaluationInterval, StepsPerQuery: f.stepsPerQuery}, nil
}

// backfillDataDir opens the stopped node's data directory and backfills
// into it with a PromQL engine in process; the node replays the samples
// from its WAL at its next start and ships them like any write.
func backfillDataDir(ctx context.Context, f backfillFlags, o rules.BackfillOptions, log *slog.Logger) (_ rules.BackfillReport, err error) {
	if _, err := os.Stat(f.dataDir); err != nil {
		return rules.BackfillReport{}, fmt.Errorf("data dir: %w", err)
	}
	n, err := node.Open(node.Options{DataDir: f.dataDir, NodeID: f.nodeID, Logger: log})
	if err != nil {
		return rules.BackfillReport{}, err
	}
	defer func() {
		if cerr := n.Close(); err == nil {
			err = cerr
		}
	}()
	api, err := prom.New(n, &httpapi.Config{}, prom.Options{Logger: log})
	if err != nil {
		return rules.BackfillReport{}, err
	}
	return rules.Backfill(ctx, rules.EngineEvaluator{Engine: api.Engine(), Queryable: api.Queryable()}, rules.BackendWriteFunc(n), o)
}

// nodeHTTP is a running node's Prometheus API: rules.Evaluator over its
// query endpoints, and writes through its remote_write endpoint.
type nodeHTTP struct {
	base   string
	token  string
	client *http.Client
}

func (f backfillFlags) client() (*nodeHTTP, error) {
	u, err := url.Parse(f.nodeURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: --node %q: want http(s)://host:port", errUsage, f.nodeURL)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if f.tlsCA != "" {
		pool, err := caPool("tls-ca", f.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	token := f.token
	if token == "" {
		token = strings.TrimSpace(os.Getenv(tokenEnv))
	}
	return &nodeHTTP{base: strings.TrimSuffix(f.nodeURL, "/"), token: token, client: &http.Client{Transport: tr, Timeout: f.timeout}}, nil
}

// do sends a request, retrying a few times while the node sheds load
// (429, 503); it returns the body of any other answer with its status.
func (c *nodeHTTP) do(ctx context.Context, path string, body []byte, header http.Header) (int, []byte, error) {
	wait := time.Second
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		req.Header = header.Clone()
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := c.client.Do(req)
		if err != nil {
			return 0, nil, fmt.Errorf("POST %s: %w", path, err)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
		resp.Body.Close()
		if err != nil {
			return 0, nil, fmt.Errorf("POST %s: %w", path, err)
		}
		if (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) || attempt == 5 {
			return resp.StatusCode, b, nil
		}
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// query POSTs a query and decodes the answer's data.
func (c *nodeHTTP) query(ctx context.Context, path string, form url.Values) (promData, error) {
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	status, body, err := c.do(ctx, path, []byte(form.Encode()), h)
	if err != nil {
		return promData{}, err
	}
	var env struct {
		Status string   `json:"status"`
		Error  string   `json:"error"`
		Data   promData `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return promData{}, fmt.Errorf("%s: HTTP %d: %.200s", path, status, body)
	}
	if status != http.StatusOK || env.Status != "success" {
		return promData{}, fmt.Errorf("%s %s: HTTP %d: %s", path, form.Get("query"), status, env.Error)
	}
	return env.Data, nil
}

// promData is the data of a query answer.
type promData struct {
	ResultType string          `json:"resultType"`
	Result     json.RawMessage `json:"result"`
}

type promSeries struct {
	Metric map[string]string    `json:"metric"`
	Value  [2]json.RawMessage   `json:"value"`
	Values [][2]json.RawMessage `json:"values"`
}

// promPoint reads a [time, "value"] pair.
func promPoint(p [2]json.RawMessage) (promql.FPoint, error) {
	var ts float64
	var v string
	if err := json.Unmarshal(p[0], &ts); err != nil {
		return promql.FPoint{}, fmt.Errorf("point time %s: %w", p[0], err)
	}
	if err := json.Unmarshal(p[1], &v); err != nil {
		return promql.FPoint{}, fmt.Errorf("point value %s: %w", p[1], err)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return promql.FPoint{}, fmt.Errorf("point value %q: %w", v, err)
	}
	return promql.FPoint{T: int64(math.Round(ts * 1000)), F: f}, nil
}

func promTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

// Instant implements rules.Evaluator.
func (c *nodeHTTP) Instant(ctx context.Context, expr string, t time.Time) (promql.Vector, error) {
	d, err := c.query(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {promTime(t)}})
	if err != nil {
		return nil, err
	}
	switch d.ResultType {
	case "scalar":
		var p [2]json.RawMessage
		if err := json.Unmarshal(d.Result, &p); err != nil {
			return nil, err
		}
		pt, err := promPoint(p)
		return promql.Vector{{T: pt.T, F: pt.F}}, err
	case "vector":
		var ss []promSeries
		if err := json.Unmarshal(d.Result, &ss); err != nil {
			return nil, err
		}
		v := make(promql.Vector, 0, len(ss))
		for _, s := range ss {
			pt, err := promPoint(s.Value)
			if err != nil {
				return nil, err
			}
			v = append(v, promql.Sample{Metric: labels.FromMap(s.Metric), T: pt.T, F: pt.F})
		}
		return v, nil
	}
	return nil, fmt.Errorf("%s: the node answered a %s, not an instant vector", expr, d.ResultType)
}

// Matrix implements rules.Evaluator.
func (c *nodeHTTP) Matrix(ctx context.Context, expr string, t time.Time) (promql.Matrix, error) {
	d, err := c.query(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {promTime(t)}})
	if err != nil {
		return nil, err
	}
	return matrixOf(expr, d)
}

// Range implements rules.Evaluator.
func (c *nodeHTTP) Range(ctx context.Context, expr string, start, end time.Time, step time.Duration) (promql.Matrix, error) {
	d, err := c.query(ctx, "/api/v1/query_range", url.Values{"query": {expr}, "start": {promTime(start)}, "end": {promTime(end)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}})
	if err != nil {
		return nil, err
	}
	return matrixOf(expr, d)
}

func matrixOf(expr string, d promData) (promql.Matrix, error) {
	if d.ResultType != "matrix" {
		return nil, fmt.Errorf("%s: the node answered a %s, not a matrix", expr, d.ResultType)
	}
	var ss []promSeries
	if err := json.Unmarshal(d.Result, &ss); err != nil {
		return nil, err
	}
	m := make(promql.Matrix, 0, len(ss))
	for _, s := range ss {
		ps := make([]promql.FPoint, 0, len(s.Values))
		for _, p := range s.Values {
			pt, err := promPoint(p)
			if err != nil {
				return nil, err
			}
			ps = append(ps, pt)
		}
		m = append(m, promql.Series{Metric: labels.FromMap(s.Metric), Floats: ps})
	}
	return m, nil
}

// write sends batches as one remote_write request; the node must store
// every sample.
func (c *nodeHTTP) write(ctx context.Context, batches []model.Batch) error {
	req := prompb.WriteRequest{Timeseries: make([]prompb.TimeSeries, 0, len(batches))}
	for _, b := range batches {
		ts := prompb.TimeSeries{Labels: make([]prompb.Label, 0, len(b.Labels)), Samples: make([]prompb.Sample, len(b.Ts))}
		for _, l := range b.Labels {
			ts.Labels = append(ts.Labels, prompb.Label{Name: l.Name, Value: l.Value})
		}
		for i := range b.Ts {
			ts.Samples[i] = prompb.Sample{Timestamp: b.Ts[i], Value: b.Vs[i]}
		}
		req.Timeseries = append(req.Timeseries, ts)
	}
	raw, err := req.Marshal()
	if err != nil {
		return err
	}
	h := http.Header{"Content-Type": {"application/x-protobuf"}, "Content-Encoding": {"snappy"}, "X-Prometheus-Remote-Write-Version": {"0.1.0"}}
	status, body, err := c.do(ctx, "/api/v1/write", snappy.Encode(nil, raw), h)
	if err != nil {
		return err
	}
	if status != http.StatusNoContent && status != http.StatusOK {
		return errors.New("remote_write: HTTP " + strconv.Itoa(status) + ": " + strings.TrimSpace(string(body)))
	}
	return nil
}
