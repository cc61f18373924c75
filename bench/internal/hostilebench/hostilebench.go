// Package hostilebench measures what hostile clients cost a fleet run as
// production runs it: one coordinator and one edge node as processes, TLS
// on every listener with a peer CA and an edge CA, tokens, every limit at
// its default. A legitimate writer writes 4,000 points/s to the node over
// gRPC (TLS and the token) throughout; after a quiet window of the same
// length as the attacks, the hostile-clients scenario of package hostile
// (FleetPlan: unauthenticated 64 MB writes, 200 MB first messages on the
// cluster listener and the intake, 20 MB lines of 2 M fields with a valid
// token, 10,000 half-open TLS handshakes) is run against both processes
// at once.
//
// The figures: every process's peak resident size during the attacks
// against its peak in the quiet window (the largest growth is
// rss_growth_mib; target at most 64), the writer's p99 latency during
// the attacks (legit_write_p99_ms; target at most 100), and how many
// hostile requests and connections were refused, accepted (the target is
// none) and refused without their documented error.
//
// The attacker runs as a child process at nice 19 by default
// (Options.AttackerCmd), as if it were another machine: on a small shared
// machine, an attacker in the writer's own process at the same priority
// makes the writer's latency measure the attacker's CPU (encrypting 400
// MB of line bodies, 10,000 dials) rather than the servers'.
//
// Run is not safe for concurrent use (it starts processes).
package hostilebench

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tributarydb/tributary/bench/internal/nodeproc"
	"github.com/tributarydb/tributary/bench/internal/report"
	"github.com/tributarydb/tributary/bench/internal/runopt"
	"github.com/tributarydb/tributary/bench/internal/tick"
	"github.com/tributarydb/tributary/internal/hostile"
	"github.com/tributarydb/tributary/internal/procstat"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Targets of the issue.
const (
	TargetRSSGrowthMiB = 64
	TargetP99Ms        = 100
)

// Options configure a run.
type Options struct {
	// Procs says how the coordinator and the node are started (only
	// Binary, WorkDir, KeepDataDir, which also keeps the certificates, and
	// the timeouts are used); Output where the figures go.
	runopt.Procs
	runopt.Output
	// Sizes of the attacks (default hostile.DefaultSizes()).
	Sizes hostile.Sizes
	// Quiet is the window before the attacks whose peaks are the
	// baseline (default 10s).
	Quiet time.Duration
	// The legitimate writer: Series × PointsPerSeries points every
	// Interval (default 20 × 10 every 50 ms: 4,000 points/s).
	Series, PointsPerSeries int
	Interval                time.Duration
	// AttackerCmd is the command line of a process that runs the plan
	// (it calls hostile.ServePlan); empty: the attacks run in this
	// process. AttackerNice runs it at nice 19.
	AttackerCmd  []string
	AttackerNice bool
}

// WithDefaults returns o with every unset field given its default.
func (o Options) WithDefaults() Options {
	if o.Sizes == (hostile.Sizes{}) {
		o.Sizes = hostile.DefaultSizes()
	}
	o.Quiet = cmp.Or(o.Quiet, 10*time.Second)
	o.Series = cmp.Or(o.Series, 20)
	o.PointsPerSeries = cmp.Or(o.PointsPerSeries, 10)
	o.Interval = cmp.Or(o.Interval, 50*time.Millisecond)
	o.ReadyTimeout = cmp.Or(o.ReadyTimeout, 60*time.Second)
	o.StopTimeout = cmp.Or(o.StopTimeout, 30*time.Second)
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Validate reports every bad field of o (after defaults).
func (o Options) Validate() error {
	bad := append(o.Procs.Problems(), o.Output.Problems()...)
	s := o.Sizes
	if s.Writes < 0 || s.WriteBytes < 0 || s.Streams < 0 || s.StreamBytes < 0 || s.Lines < 0 || s.LineFields < 0 || s.HalfOpen < 0 || s.Hold <= 0 {
		bad = append(bad, fmt.Errorf("attack sizes must not be negative and the hold must be positive: %+v", s))
	}
	if o.Series < 1 || o.PointsPerSeries < 1 || o.Interval <= 0 || o.Quiet <= 0 {
		bad = append(bad, errors.New("series, points per series, interval and quiet window must be positive"))
	}
	return errors.Join(bad...)
}

// ProcessResult is one process's resident size.
type ProcessResult struct {
	Name          string        `json:"name"`
	QuietPeakMiB  report.Number `json:"quiet_peak_mib"`
	AttackPeakMiB report.Number `json:"attack_peak_mib"`
	GrowthMiB     report.Number `json:"growth_mib"`
}

// AttackResult is one attack on one listener.
type AttackResult struct {
	Attack    string  `json:"attack"`
	Target    string  `json:"target"`
	Refused   int     `json:"refused"`
	Accepted  int     `json:"accepted"`
	Unclear   int     `json:"unclear"`
	SlowestMs float64 `json:"slowest_ms"`
	Example   string  `json:"example"`
}

// Result is the report's JSON line; its first four fields are the issue's.
type Result struct {
	RSSGrowthMiB    report.Number `json:"rss_growth_mib"`
	LegitWriteP99Ms report.Number `json:"legit_write_p99_ms"`
	Refused         int           `json:"refused"`
	AcceptedHostile int           `json:"accepted_hostile"`

	Bench string `json:"bench"`
	// Unclear: refused or failed, but not with the documented error.
	Unclear               int             `json:"unclear"`
	LegitWriteP99QuietMs  report.Number   `json:"legit_write_p99_quiet_ms"`
	LegitWriteMaxMs       report.Number   `json:"legit_write_max_ms"`
	LegitPointsPerS       report.Number   `json:"legit_points_per_s"`
	LegitFailed           int             `json:"legit_failed"`
	AttackS               report.Number   `json:"attack_s"`
	HalfOpen              int             `json:"half_open"`
	HalfOpenHeldPeak      int             `json:"half_open_held_peak"`
	HalfOpenLongestS      report.Number   `json:"half_open_longest_held_s"`
	AttackerNice          bool            `json:"attacker_nice"`
	AttackerProcess       bool            `json:"attacker_process"`
	LoadAvgBefore         string          `json:"load_avg_before"`
	LoadAvgAfter          string          `json:"load_avg_after"`
	Processes             []ProcessResult `json:"processes"`
	Attacks               []AttackResult  `json:"attacks"`
	TargetRSSGrowthMiB    float64         `json:"target_rss_growth_mib"`
	TargetLegitWriteP99Ms float64         `json:"target_legit_write_p99_ms"`
	Met                   bool            `json:"met"`
	Commit                string          `json:"commit"`
	Machine               report.Machine  `json:"machine"`
}

// proc is one started process and its addresses.
type proc struct {
	name                        string
	node                        *nodeproc.Node
	grpc, http, cluster, intake string
}

// targets names the processes for the resident-size watch.
func targets(ps []*proc) []procstat.Target {
	ts := make([]procstat.Target, len(ps))
	for i, p := range ps {
		ts[i] = procstat.Target{Name: p.name, PID: p.node.PID()}
	}
	return ts
}

// peaks is each process's peak: the larger of the sampled peak and VmHWM.
func peaks(ps []procstat.RSSPeak) []int64 {
	out := make([]int64, len(ps))
	for i, p := range ps {
		out[i] = p.Peak()
	}
	return out
}

// Run starts the fleet, runs the quiet window and the attacks, stops the
// fleet and writes the report to o.Out.
func Run(ctx context.Context, o Options) (Result, error) {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("hostile bench: %w", err)
	}
	log := o.Logger
	bin, err := nodeproc.FindBinary(o.Binary)
	if err != nil {
		return Result{}, err
	}
	if err := raiseOpenFiles(uint64(o.Sizes.HalfOpen + 4096)); err != nil {
		return Result{}, fmt.Errorf("hostile bench: %w", err)
	}
	dir, err := os.MkdirTemp(o.WorkDir, "tribench-hostile-")
	if err != nil {
		return Result{}, fmt.Errorf("hostile bench: %w", err)
	}
	if !o.KeepDataDir {
		defer os.RemoveAll(dir)
	} else {
		log.Info("keeping the run's files", "dir", dir)
	}
	f, err := makeFleet(dir)
	if err != nil {
		return Result{}, fmt.Errorf("hostile bench: %w", err)
	}
	res := Result{Bench: "hostile", AttackerNice: o.AttackerNice && len(o.AttackerCmd) > 0, AttackerProcess: len(o.AttackerCmd) > 0,
		TargetRSSGrowthMiB: TargetRSSGrowthMiB, TargetLegitWriteP99Ms: TargetP99Ms, Commit: o.Commit, Machine: report.DetectMachine(),
		HalfOpen: o.Sizes.HalfOpen}
	co, edge, err := f.start(ctx, bin, dir, o, log)
	defer func() {
		for _, p := range []*proc{edge, co} {
			if p != nil && p.node != nil {
				if _, err := p.node.Stop(o.StopTimeout); err != nil {
					log.Warn("stop", "process", p.name, "err", err)
				}
			}
		}
	}()
	if err != nil {
		return Result{}, fmt.Errorf("hostile bench: %w", err)
	}
	client := clientTLS(f.peerCA, f.edgeCA)
	w, err := startWriter(edge.grpc, client, f.token, o)
	if err != nil {
		return Result{}, fmt.Errorf("hostile bench: %w", err)
	}
	defer w.stop()
	if err := waitShipping(ctx, edge, client, f.token, 60*time.Second); err != nil {
		return Result{}, fmt.Errorf("hostile bench: %w", err)
	}
	procs := []*proc{co, edge}
	watch := procstat.WatchRSS(100*time.Millisecond, targets(procs)...)
	res.LoadAvgBefore = loadAvg()
	log.Info("quiet window", "for", o.Quiet)
	quietFrom := time.Now()
	watch.Reset()
	sleep(ctx, o.Quiet)
	quiet := peaks(watch.Reset())
	quietTo := time.Now()

	hf := f.hostileFleet(co, edge)
	plan, _ := hostile.FleetPlan(hf, o.Sizes)
	log.Info("attacking", "grpc_attacks", len(plan.GRPC), "http_attacks", len(plan.HTTP), "half_open_listeners", len(plan.HalfOpen),
		"attacker_process", res.AttackerProcess, "nice", res.AttackerNice)
	attackFrom := time.Now()
	var rep hostile.Report
	if len(o.AttackerCmd) > 0 {
		rep, err = hostile.RunPlanProcess(ctx, plan, dir, o.AttackerNice, o.AttackerCmd)
	} else {
		rep, err = plan.Run(ctx)
	}
	attackTo := time.Now()
	attack := peaks(watch.Stop())
	sleep(ctx, 2*time.Second)
	lat, failed, points, elapsed := w.stop()
	res.LoadAvgAfter = loadAvg()
	if err != nil {
		return Result{}, fmt.Errorf("hostile bench: %w", err)
	}
	if len(rep.Errors) > 0 {
		return Result{}, fmt.Errorf("hostile bench: attacks not run: %s", strings.Join(rep.Errors, "; "))
	}

	res.Refused, res.AcceptedHostile, res.Unclear = rep.Totals()
	for _, t := range rep.Tallies {
		res.Attacks = append(res.Attacks, AttackResult{Attack: t.Attack, Target: t.Target, Refused: t.Refused, Accepted: t.Accepted,
			Unclear: t.Unclear, SlowestMs: ms(t.Slowest), Example: t.Example})
	}
	for _, h := range rep.HalfOpen {
		res.HalfOpenHeldPeak += h.PeakHeld
		res.HalfOpenLongestS = report.Number(math.Max(float64(res.HalfOpenLongestS), h.LongestHeld.Seconds()))
		res.Attacks = append(res.Attacks, AttackResult{Attack: "half-open TLS handshake", Target: h.Name, Refused: h.Refused(),
			Accepted: h.StillOpen, Unclear: h.DialFailed, SlowestMs: ms(h.LongestHeld),
			Example: fmt.Sprintf("%d closed at accept, %d at the handshake timeout (held at most %d at once)", h.ClosedAtOnce, h.ClosedLater, h.PeakHeld)})
	}
	growth := math.Inf(-1)
	for i, p := range procs {
		g := float64(attack[i]-quiet[i]) / (1 << 20)
		growth = math.Max(growth, g)
		res.Processes = append(res.Processes, ProcessResult{Name: p.name, QuietPeakMiB: mib(quiet[i]), AttackPeakMiB: mib(attack[i]), GrowthMiB: report.Number(g)})
	}
	res.RSSGrowthMiB = report.Number(growth)
	res.LegitWriteP99Ms = report.Number(quantileMs(lat, 0.99, attackFrom, attackTo))
	res.LegitWriteP99QuietMs = report.Number(quantileMs(lat, 0.99, quietFrom, quietTo))
	res.LegitWriteMaxMs = report.Number(quantileMs(lat, 1, attackFrom, attackTo))
	res.LegitPointsPerS = report.Number(float64(points) / elapsed.Seconds())
	res.LegitFailed = failed
	res.AttackS = report.Number(attackTo.Sub(attackFrom).Seconds())
	res.Met = growth <= TargetRSSGrowthMiB && float64(res.LegitWriteP99Ms) <= TargetP99Ms && res.AcceptedHostile == 0 && res.Unclear == 0 && failed == 0
	return res, write(o.Out, res)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(b int64) report.Number { return report.Number(float64(b) / (1 << 20)) }

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// write prints the tables, notes and the JSON line.
func write(w io.Writer, r Result) error {
	fmt.Fprintf(w, "hostile clients against 1 coordinator and 1 node (TLS, peer and edge CA, tokens, default limits); machine: %s; commit %s\n", r.Machine, r.Commit)
	fmt.Fprintf(w, "load average before %s, after %s; attacker: %s\n\n", r.LoadAvgBefore, r.LoadAvgAfter, attackerDesc(r))
	at := report.Table{Header: []string{"attack", "target", "refused", "accepted", "unclear", "slowest ms", "example"}, RightAlign: []bool{false, false, true, true, true, true, false}}
	for _, a := range r.Attacks {
		at.Add(a.Attack, a.Target, report.Int(int64(a.Refused)), report.Int(int64(a.Accepted)), report.Int(int64(a.Unclear)), report.Float(a.SlowestMs, 0), clip(a.Example, 90))
	}
	if err := at.Write(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	pt := report.Table{Header: []string{"process", "quiet peak MiB", "attack peak MiB", "growth MiB"}, RightAlign: []bool{false, true, true, true}}
	for _, p := range r.Processes {
		pt.Add(p.Name, p.QuietPeakMiB.Text(1), p.AttackPeakMiB.Text(1), p.GrowthMiB.Text(1))
	}
	if err := pt.Write(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	report.KeyValues(w, [][2]string{
		{"largest resident growth", fmt.Sprintf("%s MiB (target ≤ %d)", r.RSSGrowthMiB.Text(1), TargetRSSGrowthMiB)},
		{"writer p99 during the attacks", fmt.Sprintf("%s ms (target ≤ %d; quiet window %s ms; max %s ms)", r.LegitWriteP99Ms.Text(1), TargetP99Ms,
			r.LegitWriteP99QuietMs.Text(1), r.LegitWriteMaxMs.Text(1))},
		{"writer", fmt.Sprintf("%s points/s, %d failed writes", report.Whole(float64(r.LegitPointsPerS)), r.LegitFailed)},
		{"hostile requests and connections", fmt.Sprintf("%d refused, %d accepted, %d refused without their documented error", r.Refused, r.AcceptedHostile, r.Unclear)},
		{"half-open handshakes", fmt.Sprintf("%d, held at most %d at once, the longest %ss", r.HalfOpen, r.HalfOpenHeldPeak, r.HalfOpenLongestS.Text(1))},
		{"targets met", strconv.FormatBool(r.Met)},
	})
	return report.WriteNotesAndJSONLine(w, []string{"the machine is shared: read the figures with the load averages above"}, r)
}

func attackerDesc(r Result) string {
	switch {
	case r.AttackerNice:
		return "a child process at nice 19 (as if on another machine)"
	case r.AttackerProcess:
		return "a child process at normal priority"
	}
	return "goroutines of this process"
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "..."
	}
	return s
}

// loadAvg is /proc/loadavg's first three fields, or "unknown".
func loadAvg() string { return report.LoadAveragesText("unknown") }

func raiseOpenFiles(n uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur >= n {
		return nil
	}
	if lim.Max < n {
		return fmt.Errorf("RLIMIT_NOFILE hard limit %d is below the %d files the half-open handshakes need", lim.Max, n)
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", n, err)
	}
	return nil
}

// fleet is the TLS material of the run.
type fleet struct {
	peerCA, edgeCA            *ca
	coord, edge               hostile.CertFiles
	stolen, stranger, unknown hostile.CertFiles
	token, tokenFile          string
}

func makeFleet(dir string) (*fleet, error) {
	f := &fleet{token: "tribench-hostile-token-0123456789", tokenFile: filepath.Join(dir, "tokens")}
	var err error
	if f.peerCA, err = newCA(dir, "peer-ca"); err != nil {
		return nil, err
	}
	if f.edgeCA, err = newCA(dir, "edge-ca"); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		ca   *ca
		name string
		out  *hostile.CertFiles
	}{{f.peerCA, "c1", &f.coord}, {f.edgeCA, "edge-1", &f.edge}, {f.edgeCA, "edge-1", &f.stolen}, {f.peerCA, "c9", &f.stranger}, {f.edgeCA, "edge-9", &f.unknown}} {
		sub := filepath.Join(dir, fmt.Sprintf("cert-%p", c.out))
		if err := os.Mkdir(sub, 0o700); err != nil {
			return nil, err
		}
		if *c.out, err = c.ca.issue(sub, c.name); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(f.tokenFile, []byte(f.token+"\n"), 0o600); err != nil {
		return nil, err
	}
	return f, nil
}

// start starts the coordinator (a one-member raft cluster) and then the
// node shipping to it.
func (f *fleet) start(ctx context.Context, bin, dir string, o Options, log *slog.Logger) (co, edge *proc, err error) {
	addrs := make([]string, 6)
	for i := range addrs {
		if addrs[i], err = nodeproc.FreeLoopbackAddr(); err != nil {
			return nil, nil, err
		}
	}
	co = &proc{name: "c1", grpc: addrs[0], http: addrs[1], cluster: addrs[2], intake: addrs[3]}
	edge = &proc{name: "edge-1", grpc: addrs[4], http: addrs[5]}
	common := func(c hostile.CertFiles) []string {
		return []string{"--tls-cert", c.Cert, "--tls-key", c.Key, "--token-file", f.tokenFile}
	}
	coArgs := append(common(f.coord), "--http-listen", co.http, "--id", "c1", "--raft-id", "1", "--peers", "1=c1@"+co.cluster,
		"--cluster-listen", co.cluster, "--intake-listen", co.intake,
		"--peer-cert", f.coord.Cert, "--peer-key", f.coord.Key, "--peer-ca", f.peerCA.file, "--edge-ca", f.edgeCA.file, "--edge-token-file", f.tokenFile)
	co.node, err = nodeproc.Start(ctx, nodeproc.Options{Binary: bin, Command: "coordinator", DataDir: filepath.Join(dir, "c1"), ListenAddr: co.grpc,
		LogPath: filepath.Join(dir, "c1.log"), ExtraArgs: coArgs, ReadyTimeout: o.ReadyTimeout, Logger: log})
	if err != nil {
		return nil, nil, fmt.Errorf("coordinator: %w", err)
	}
	edgeArgs := append(common(f.edge), "--http-listen", edge.http, "--replicate-to", co.intake,
		"--replicate-cert", f.edge.Cert, "--replicate-key", f.edge.Key, "--replicate-ca", f.peerCA.file, "--wal-segment-age", "1s")
	edge.node, err = nodeproc.Start(ctx, nodeproc.Options{Binary: bin, DataDir: filepath.Join(dir, "edge-1"), ListenAddr: edge.grpc, NodeID: "edge-1",
		LogPath: filepath.Join(dir, "edge-1.log"), ExtraArgs: edgeArgs, ReadyTimeout: o.ReadyTimeout, Logger: log})
	if err != nil {
		return co, nil, fmt.Errorf("node: %w", err)
	}
	return co, edge, nil
}

func (f *fleet) hostileFleet(co, edge *proc) hostile.Fleet {
	return hostile.Fleet{
		Nodes:        []hostile.NodeListeners{{Name: edge.name, GRPC: edge.grpc, HTTP: edge.http}},
		Coordinators: []hostile.CoordinatorListeners{{Name: co.name, GRPC: co.grpc, HTTP: co.http, Cluster: co.cluster, Intake: co.intake}},
		Token:        f.token, StolenEdge: f.stolen, Stranger: f.stranger, UnknownEdge: f.unknown,
	}
}

// clientTLS trusts both CAs (the coordinator's client listeners present
// a peer CA certificate, the node's an edge CA one).
func clientTLS(cas ...*ca) *tls.Config {
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c.cert)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// waitShipping waits until the node's replication to the coordinator has
// acknowledged a segment of the writer's (the mutual-TLS link works).
func waitShipping(ctx context.Context, edge *proc, cfg *tls.Config, token string, timeout time.Duration) error {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	var last string
	for time.Now().Before(deadline) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+edge.http+"/metrics", nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, "tributary_replication_acked_through_seq "); ok {
					last = v
					if n, err := strconv.ParseFloat(v, 64); err == nil && n > 0 {
						return nil
					}
				}
			}
		} else {
			last = err.Error()
		}
		sleep(ctx, 200*time.Millisecond)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("the node shipped nothing to the coordinator within %v (last: %s)", timeout, last)
}

// latency is one write's start and duration.
type latency struct {
	at   time.Time
	took time.Duration
}

// writer writes the legitimate load and records every request's latency.
type writer struct {
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	lat     []latency
	failed  int
	points  int
	started time.Time
	ended   time.Time
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return true }

func startWriter(addr string, cfg *tls.Config, token string, o Options) (*writer, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)), grpc.WithPerRPCCredentials(bearer(token)))
	if err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{conn: conn, cancel: cancel, done: make(chan struct{}), started: time.Now()}
	cl := pb.NewWriteServiceClient(conn)
	go func() {
		defer close(w.done)
		nextMs := time.Now().UnixMilli()
		tick.Paced(ctx, o.Interval, func() bool {
			req := &pb.WriteRequest{}
			for i := range o.Series {
				b := &pb.SeriesBatch{Series: &pb.Series{Labels: []*pb.Label{{Name: "__name__", Value: "hostile_legit"}, {Name: "series", Value: fmt.Sprintf("s%03d", i)}}}}
				for k := range o.PointsPerSeries {
					b.TimestampsMs = append(b.TimestampsMs, nextMs+int64(k))
					b.Values = append(b.Values, float64(k))
				}
				req.Batches = append(req.Batches, b)
			}
			nextMs += int64(o.PointsPerSeries)
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			began := time.Now()
			_, err := cl.Write(rctx, req)
			took := time.Since(began)
			rcancel()
			w.mu.Lock()
			if ctx.Err() == nil {
				w.lat = append(w.lat, latency{began, took})
				if err != nil {
					w.failed++
				} else {
					w.points += o.Series * o.PointsPerSeries
				}
			}
			w.mu.Unlock()
			return true
		})
	}()
	return w, nil
}

// stop ends the load (once) and returns its latencies, failed writes,
// acknowledged points and duration.
func (w *writer) stop() ([]latency, int, int, time.Duration) {
	if w.cancel != nil {
		w.cancel()
		<-w.done
		w.conn.Close()
		w.cancel = nil
		w.ended = time.Now()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lat, w.failed, w.points, w.ended.Sub(w.started)
}

// quantileMs is the q-quantile (nearest rank) of the latencies of
// requests started in [from, to), in milliseconds (NaN: none).
func quantileMs(lat []latency, q float64, from, to time.Time) float64 {
	var ds []time.Duration
	for _, l := range lat {
		if !l.at.Before(from) && l.at.Before(to) {
			ds = append(ds, l.took)
		}
	}
	slices.Sort(ds)
	p, ok := report.NearestRank(ds, q)
	if !ok {
		return math.NaN()
	}
	return ms(p)
}
