package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tributarydb/tributary/coordinator"
	"github.com/tributarydb/tributary/internal/loopback"
	"github.com/tributarydb/tributary/sdk/go/tributary"
)

// Fleet states, worst first.
const (
	stateOffline   = "offline"
	stateUnhealthy = "unhealthy" // the edge's store cannot flush or is damaged
	stateBehind    = "behind"
	stateGaps      = "gaps"
	stateOnline    = "online"
)

func stateRank(s string) int {
	switch s {
	case stateOffline:
		return 0
	case stateUnhealthy:
		return 1
	case stateBehind:
		return 2
	case stateGaps:
		return 3
	}
	return 4
}

// fleetRow is one node of the fleet table. Figures the status command
// could not learn are nil (JSON null, "-" in the table).
type fleetRow struct {
	Node  string `json:"node"`
	Role  string `json:"role"`           // edge or coordinator
	Raft  string `json:"raft,omitempty"` // coordinators: leader, follower, learner or removed
	State string `json:"state"`          // offline, unhealthy, behind, gaps or online
	// Placement is a coordinator's placement state in the catalog:
	// active, draining or down.
	Placement string `json:"placement,omitempty"`
	// Store is the edge's store health reason when it said it is not
	// healthy (corruption, no_space, io_error, store_error), with the
	// error in StoreError.
	Store      string `json:"store,omitempty"`
	StoreError string `json:"store_error,omitempty"`
	Addr       string `json:"addr,omitempty"`
	// LastSeenSeconds is the age of the node's last heartbeat in the
	// catalog (-1: never), judged against the answering coordinator's clock.
	LastSeenSeconds float64 `json:"last_seen_seconds"`
	Series          int     `json:"series,omitempty"`

	// IngestPointsPerSec is the edge's ingest rate; IngestSource says how
	// it was measured: "edge" (points the edge accepted between two
	// refreshes), "edge-average" (accepted since the edge started over
	// its uptime), "cloud" (points the cloud took into its held segments
	// between two refreshes) or "cloud-average" (points of the newest
	// held run over the time its data spans).
	IngestPointsPerSec *float64 `json:"ingest_points_per_sec"`
	IngestSource       string   `json:"ingest_source,omitempty"`
	// LagSeconds is the replication lag: now minus the newest data time
	// the cloud holds of the edge, when the edge has newer data. LagSource
	// says how it was learnt: "edge" (the edge answered, and the catalog
	// holds every segment it sealed: the edge's own figure, the age of the
	// oldest data of its backlog), "cloud" (the edge answered and has
	// sealed segments past what the catalog holds contiguously: now minus
	// the catalog's watermark time, or the edge's figure when larger) or
	// "watermark" (the edge was not asked or did not answer: now minus the
	// watermark time, which also grows while an edge writes nothing).
	LagSeconds      *float64 `json:"lag_seconds"`
	LagSource       string   `json:"lag_source,omitempty"`
	BacklogBytes    *int64   `json:"backlog_bytes"`
	BacklogSegments *int64   `json:"backlog_segments"`
	Connected       *bool    `json:"connected,omitempty"` // the edge's own view of its link
	HeldPoints      uint64   `json:"held_points,omitempty"`
	AckedThrough    uint64   `json:"acked_through,omitempty"`
	GapSegments     uint64   `json:"gap_segments"`
	// GapPoints is -1 when a gap's point count is unknown.
	GapPoints int64 `json:"gap_points"`
	// UnderReplicatedSegments counts the edge's held segments an active
	// replica lacks (once per replica); UnsourcedSegments those no live
	// replica can give (the edge must ship them again).
	UnderReplicatedSegments uint64 `json:"under_replicated_segments"`
	UnsourcedSegments       uint64 `json:"unsourced_segments"`
	ProbeError              string `json:"probe_error,omitempty"`
}

// fleetSummary is the one-line summary above the table.
type fleetSummary struct {
	Coordinator     string `json:"coordinator"` // who answered
	RaftLeader      uint64 `json:"raft_leader"`
	RaftTerm        uint64 `json:"raft_term"`
	Series          int    `json:"series"`
	Edges           int    `json:"edges"`
	Coordinators    int    `json:"coordinators"`
	Offline         int    `json:"offline"`
	Behind          int    `json:"behind"`
	WithGaps        int    `json:"with_gaps"`
	UnderReplicated int    `json:"under_replicated"` // edges with under-replicated segments
	// Coordinators down (silent past the fleet's dead-after) and draining.
	CoordinatorsDown     int     `json:"coordinators_down"`
	CoordinatorsDraining int     `json:"coordinators_draining"`
	WorstLagSeconds      float64 `json:"worst_lag_seconds"`
	WorstLagNode         string  `json:"worst_lag_node,omitempty"`
	TimeMs               int64   `json:"time_ms"`
}

// fleetView is one refresh of the fleet table.
type fleetView struct {
	Summary fleetSummary `json:"summary"`
	Nodes   []fleetRow   `json:"nodes"`
}

// rateSample is what the previous refresh saw of a node, for rates.
type rateSample struct {
	at          time.Time
	cloudPoints uint64
	accepted    int64
	uptime      time.Duration
	probed      bool
}

// fleetWatcher reads the fleet from a coordinator, refresh after refresh.
// Not safe for concurrent use.
type fleetWatcher struct {
	sf    *statusFlags
	url   string
	token string
	http  *http.Client
	// edgeFlags dial the edges: the connection flags with the edge's
	// address and the probe timeout.
	edgeFlags clientFlags
	edges     map[string]*tributary.Client // by address
	prev      map[string]rateSample
	now       func() time.Time
}

func newFleetWatcher(cf *clientFlags, sf *statusFlags) (*fleetWatcher, error) {
	httpAddr := sf.httpAddr
	if httpAddr == "" {
		host, port, err := net.SplitHostPort(cf.addr)
		if err != nil {
			return nil, fmt.Errorf("%w: --addr %q: %v (give --http-addr)", errUsage, cf.addr, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil || p <= 0 || p >= 65535 {
			return nil, fmt.Errorf("%w: --addr %q: no numeric port to derive the HTTP address from (give --http-addr)", errUsage, cf.addr)
		}
		httpAddr = net.JoinHostPort(host, strconv.Itoa(p+1))
	}
	tlsCfg, err := cf.tlsConfig(httpAddr)
	if err != nil {
		return nil, err
	}
	token := cf.token
	if token == "" {
		token = strings.TrimSpace(cf.getenv(tokenEnv))
	}
	if token != "" && tlsCfg == nil && !cf.tokenOverPlain && !loopback.IsAddr(httpAddr) {
		return nil, fmt.Errorf("%w: refusing to send the token without TLS to %s (use --tls-ca, or --allow-plaintext-token)", errUsage, httpAddr)
	}
	scheme := "http"
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tlsCfg != nil {
		scheme = "https"
		tr.TLSClientConfig = tlsCfg
	}
	ef := *cf
	ef.timeout, ef.maxAttempts = sf.probeTimeout, 1
	return &fleetWatcher{sf: sf, url: scheme + "://" + httpAddr + "/api/v1/fleet", token: token,
		http: &http.Client{Transport: tr}, edgeFlags: ef, edges: map[string]*tributary.Client{},
		prev: map[string]rateSample{}, now: time.Now}, nil
}

// tlsConfig is the TLS configuration the flags ask for to reach addr, or
// nil for plaintext.
func (f *clientFlags) tlsConfig(addr string) (*tls.Config, error) {
	if f.tlsCA == "" && f.tlsCert == "" && f.tlsKey == "" && !f.tlsSkipVerify {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.tlsSkipVerify}
	if h, _, err := net.SplitHostPort(addr); err == nil {
		cfg.ServerName = h
	}
	if f.tlsCA != "" {
		pool, err := caPool("tls-ca", f.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		cfg.RootCAs = pool
	}
	if f.tlsCert != "" || f.tlsKey != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("%w: --tls-cert/--tls-key: %v", errUsage, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

func (w *fleetWatcher) close() {
	for _, c := range w.edges {
		c.Close()
	}
	w.http.CloseIdleConnections()
}

// fetch reads GET /api/v1/fleet.
func (w *fleetWatcher) fetch(ctx context.Context) (coordinator.Fleet, error) {
	var f coordinator.Fleet
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.url, nil)
	if err != nil {
		return f, err
	}
	if w.token != "" {
		req.Header.Set("Authorization", "Bearer "+w.token)
	}
	resp, err := w.http.Do(req)
	if err != nil {
		return f, fmt.Errorf("read the fleet: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return f, fmt.Errorf("read the fleet: GET %s: %s: %s", w.url, resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 256<<20)).Decode(&f); err != nil {
		return f, fmt.Errorf("read the fleet: decode %s: %w", w.url, err)
	}
	return f, nil
}

// probe is what an edge said of itself.
type probe struct {
	st  tributary.Status
	err error
}

// probeEdges asks every edge with an address for its status, at most 16 at
// a time, each within the probe timeout. Edges the catalog has not heard
// from are asked too: one that answers is alive, its link to the cloud is
// what is down, and it is behind rather than offline.
func (w *fleetWatcher) probeEdges(ctx context.Context, rows []fleetRow) map[string]probe {
	out := map[string]probe{}
	if !w.sf.probe {
		return out
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for _, r := range rows {
		if r.Role != "edge" || r.Addr == "" {
			continue
		}
		c := w.edges[r.Addr]
		if c == nil {
			ef := w.edgeFlags
			ef.addr = r.Addr
			var err error
			if c, err = ef.dial(ctx); err != nil {
				out[r.Node] = probe{err: err}
				continue
			}
			w.edges[r.Addr] = c
		}
		wg.Add(1)
		go func(node string, c *tributary.Client) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			pctx, cancel := context.WithTimeout(ctx, w.sf.probeTimeout)
			defer cancel()
			st, err := c.Status(pctx)
			mu.Lock()
			out[node] = probe{st, err}
			mu.Unlock()
		}(r.Node, c)
	}
	wg.Wait()
	return out
}

// read builds one view. target is the answering server's own status: for
// tributary local it carries the in-process edge's figures.
func (w *fleetWatcher) read(ctx context.Context, target tributary.Status) (fleetView, error) {
	f, err := w.fetch(ctx)
	if err != nil {
		return fleetView{}, err
	}
	now := w.now()
	v := fleetView{Summary: fleetSummary{Coordinator: f.Coordinator, RaftLeader: f.Raft.Leader, RaftTerm: f.Raft.Term,
		Series: f.Series, TimeMs: now.UnixMilli()}}
	for _, n := range f.Nodes {
		v.Nodes = append(v.Nodes, w.baseRow(f, n))
	}
	probes := w.probeEdges(ctx, v.Nodes)
	if target.Role == "local" && target.Replication != nil {
		// tributary local: the one edge runs in the answering process and
		// registers no address; its figures came with the status.
		if edges := slices.DeleteFunc(slices.Clone(v.Nodes), func(r fleetRow) bool { return r.Role != "edge" }); len(edges) == 1 {
			probes[edges[0].Node] = probe{st: target}
		}
	}
	next := map[string]rateSample{}
	for i := range v.Nodes {
		r := &v.Nodes[i]
		if r.Role == "edge" {
			w.measure(r, f, probes, now, next)
		}
		r.State = w.state(*r)
		switch r.State {
		case stateOffline:
			v.Summary.Offline++
		case stateBehind:
			v.Summary.Behind++
		}
		if r.Role == "edge" {
			v.Summary.Edges++
			if r.GapSegments > 0 {
				v.Summary.WithGaps++
			}
			if r.UnderReplicatedSegments > 0 {
				v.Summary.UnderReplicated++
			}
			if r.LagSeconds != nil && (v.Summary.WorstLagNode == "" || *r.LagSeconds > v.Summary.WorstLagSeconds) {
				v.Summary.WorstLagSeconds, v.Summary.WorstLagNode = *r.LagSeconds, r.Node
			}
		} else {
			v.Summary.Coordinators++
			switch r.Placement {
			case "down":
				v.Summary.CoordinatorsDown++
			case "draining":
				v.Summary.CoordinatorsDraining++
			}
		}
	}
	w.prev = next
	slices.SortStableFunc(v.Nodes, func(a, b fleetRow) int {
		if c := cmp.Compare(stateRank(a.State), stateRank(b.State)); c != 0 {
			return c
		}
		if c := cmp.Compare(lagOf(b), lagOf(a)); c != 0 {
			return c
		}
		return cmp.Compare(a.Node, b.Node)
	})
	return v, nil
}

func lagOf(r fleetRow) float64 {
	if r.LagSeconds == nil {
		return 0
	}
	return *r.LagSeconds
}

// baseRow is what the catalog says of a node.
func (w *fleetWatcher) baseRow(f coordinator.Fleet, n coordinator.FleetNode) fleetRow {
	r := fleetRow{Node: n.ID, Role: n.Role, Addr: n.Addr, Series: n.Series, LastSeenSeconds: -1,
		HeldPoints: n.HeldPoints, AckedThrough: n.AckedThrough,
		UnderReplicatedSegments: n.UnderReplicatedSegments, UnsourcedSegments: n.UnsourcedSegments}
	if n.LastHeartbeatMs > 0 {
		r.LastSeenSeconds = max(0, n.SecondsSinceHeartbeat)
	}
	if r.LastSeenSeconds < 0 || r.LastSeenSeconds > w.sf.offlineAfter.Seconds() {
		r.State = stateOffline
	}
	if n.Role == "coordinator" {
		r.Placement = n.State
		switch {
		case n.RaftID != 0 && n.RaftID == f.Raft.Leader:
			r.Raft = "leader"
		case slices.Contains(f.Raft.Voters, n.RaftID):
			r.Raft = "follower"
		case slices.Contains(f.Raft.Learners, n.RaftID):
			r.Raft = "learner"
		default:
			r.Raft = "removed"
		}
	}
	for _, g := range n.Gaps {
		r.GapSegments += g.Segments
		if g.Points < 0 || r.GapPoints < 0 {
			r.GapPoints = -1
		} else {
			r.GapPoints += g.Points
		}
	}
	return r
}

// measure fills an edge's rate, lag and backlog from its probe, or from
// the catalog when the edge could not be asked.
func (w *fleetWatcher) measure(r *fleetRow, f coordinator.Fleet, probes map[string]probe, now time.Time, next map[string]rateSample) {
	var fn coordinator.FleetNode
	for _, n := range f.Nodes {
		if n.ID == r.Node {
			fn = n
			break
		}
	}
	prev, havePrev := w.prev[r.Node]
	s := rateSample{at: now, cloudPoints: fn.HeldPoints}
	p, probed := probes[r.Node]
	if probed && p.err != nil {
		r.ProbeError = p.err.Error()
		probed = false
	}
	if probed && p.st.Store != nil && !p.st.Store.Healthy {
		r.Store, r.StoreError = p.st.Store.Reason, p.st.Store.Error
	}
	if probed && p.st.Replication != nil {
		rs := p.st.Replication
		lag, src := rs.Lag.Seconds(), "edge"
		// The edge counts what it was acknowledged; the catalog records
		// what the cloud holds. When the edge has sealed segments past
		// what the catalog holds contiguously, the data after the
		// watermark is not all in the cloud, whatever the edge believes:
		// the lag is at least the watermark's age.
		if rs.NewestSealedSeq > fn.AckedThrough && fn.WatermarkTimeMs > 0 {
			if cloud := float64(now.UnixMilli()-fn.WatermarkTimeMs) / 1000; cloud > lag {
				lag, src = cloud, "cloud"
			}
		}
		r.LagSeconds, r.LagSource = &lag, src
		r.BacklogBytes, r.BacklogSegments = &rs.BacklogBytes, &rs.BacklogSegments
		conn := rs.Connected
		r.Connected = &conn
		s.probed, s.accepted, s.uptime = true, p.st.PointsAccepted, p.st.Uptime
		var rate float64
		switch {
		case havePrev && prev.probed && s.uptime > prev.uptime && s.accepted >= prev.accepted && now.After(prev.at):
			rate, r.IngestSource = float64(s.accepted-prev.accepted)/now.Sub(prev.at).Seconds(), "edge"
		case s.uptime > 0:
			rate, r.IngestSource = float64(s.accepted)/s.uptime.Seconds(), "edge-average"
		}
		if r.IngestSource != "" {
			r.IngestPointsPerSec = &rate
		}
	} else {
		if fn.WatermarkTimeMs > 0 {
			lag := max(0, float64(now.UnixMilli()-fn.WatermarkTimeMs)/1000)
			r.LagSeconds, r.LagSource = &lag, "watermark"
		}
		var rate float64
		switch {
		case havePrev && s.cloudPoints >= prev.cloudPoints && now.After(prev.at):
			rate, r.IngestSource = float64(s.cloudPoints-prev.cloudPoints)/now.Sub(prev.at).Seconds(), "cloud"
		case len(fn.HeldRuns) > 0:
			h := fn.HeldRuns[len(fn.HeldRuns)-1]
			if span := float64(h.MaxTimeMs-h.MinTimeMs) / 1000; span > 0 {
				rate, r.IngestSource = float64(h.Points)/span, "cloud-average"
			}
		}
		if r.IngestSource != "" {
			r.IngestPointsPerSec = &rate
		}
	}
	next[r.Node] = s
}

// state judges a row: offline (no heartbeat within --offline-after, and
// for an edge no answer to its probe either), behind (lag past
// --behind-after, or the edge says its link is down), gaps (the edge
// declared segments it will not ship), else online.
func (w *fleetWatcher) state(r fleetRow) string {
	switch {
	case r.State == stateOffline && r.Connected == nil:
		return stateOffline
	case r.Store != "":
		return stateUnhealthy
	case r.Role == "edge" && r.LagSeconds != nil && *r.LagSeconds > w.sf.behindAfter.Seconds():
		return stateBehind
	case r.Connected != nil && !*r.Connected:
		return stateBehind
	case r.GapSegments > 0:
		return stateGaps
	}
	return stateOnline
}

// printFleet prints a view as a table or as one JSON document.
func printFleet(w io.Writer, format string, v fleetView) error {
	if format == "json" {
		return writeJSON(w, v)
	}
	s := v.Summary
	worst := "worst lag -"
	if s.WorstLagNode != "" {
		worst = fmt.Sprintf("worst lag %s (%s)", fmtSeconds(s.WorstLagSeconds), s.WorstLagNode)
	}
	coords := plural(s.Coordinators, "coordinator")
	if s.CoordinatorsDown > 0 {
		coords += fmt.Sprintf(", %d down", s.CoordinatorsDown)
	}
	if s.CoordinatorsDraining > 0 {
		coords += fmt.Sprintf(", %d draining", s.CoordinatorsDraining)
	}
	fmt.Fprintf(w, "%s: %s, %d offline, %d behind, %d with gaps, %d under-replicated; %s; %s (leader raft id %d, term %d); %s series\n",
		time.UnixMilli(s.TimeMs).UTC().Format(time.DateTime), plural(s.Edges, "edge"), s.Offline, s.Behind, s.WithGaps, s.UnderReplicated, worst,
		coords, s.RaftLeader, s.RaftTerm, commas(int64(s.Series)))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tROLE\tSTATE\tLAST SEEN\tINGEST\tLAG\tBACKLOG\tGAPS\tUNDER-REPL")
	var notes []string
	for _, r := range v.Nodes {
		role := r.Role
		if r.Raft != "" {
			role += "/" + r.Raft
		}
		if r.Placement != "" {
			role += "/" + r.Placement
		}
		seen := "never"
		if r.LastSeenSeconds >= 0 {
			seen = fmtSeconds(r.LastSeenSeconds) + " ago"
		}
		ingest, lag, backlog, gaps, under := "-", "-", "-", "-", "-"
		if r.IngestPointsPerSec != nil {
			ingest = fmt.Sprintf("%s/s", fmtRate(*r.IngestPointsPerSec))
			if strings.HasSuffix(r.IngestSource, "-average") {
				ingest += " avg"
			}
		}
		if r.LagSeconds != nil {
			lag = fmtSeconds(*r.LagSeconds)
			if r.LagSource == "watermark" {
				lag += " wm"
			}
		}
		if r.BacklogBytes != nil {
			backlog = fmt.Sprintf("%s, %d seg", fmtBytes(*r.BacklogBytes), *r.BacklogSegments)
		}
		if r.Role == "edge" {
			gaps = "0"
			if r.GapSegments > 0 {
				pts := "? points"
				if r.GapPoints >= 0 {
					pts = commas(r.GapPoints) + " points"
				}
				gaps = fmt.Sprintf("%d seg, %s", r.GapSegments, pts)
			}
			under = "0"
			if r.UnderReplicatedSegments > 0 {
				under = fmt.Sprintf("%d seg", r.UnderReplicatedSegments)
				if r.UnsourcedSegments > 0 {
					under += fmt.Sprintf(", %d unsourced", r.UnsourcedSegments)
				}
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Node, role, r.State, seen, ingest, lag, backlog, gaps, under)
		if r.ProbeError != "" && r.State != stateOffline {
			// (An offline edge that does not answer either is expected;
			// the JSON keeps its probe error.)
			notes = append(notes, fmt.Sprintf("%s: status not read: %s", r.Node, r.ProbeError))
		}
		if r.Store != "" {
			notes = append(notes, fmt.Sprintf("%s: store unhealthy (%s): %s", r.Node, r.Store, r.StoreError))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	return nil
}

// plural is "1 edge", "3 edges".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// fmtSeconds prints a duration in seconds compactly: 850ms, 12.3s, 4m12s,
// 3h5m, 2d4h.
func fmtSeconds(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", s)
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
	days := int(d / (24 * time.Hour))
	return fmt.Sprintf("%dd%dh", days, int((d-time.Duration(days)*24*time.Hour)/time.Hour))
}

// fmtRate prints a points-per-second figure: 0.25, 12.5, 1,234.
func fmtRate(r float64) string {
	switch {
	case r < 10:
		return strconv.FormatFloat(r, 'f', 2, 64)
	case r < 100:
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return commas(int64(r + 0.5))
}
