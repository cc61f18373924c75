package hostile

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"
)

// Plan is a set of attacks run at once, written so that another process
// can run it (RunPlan): the e2e scenario and tribench hostile run the
// attacker as a child process at the lowest CPU priority (nice 19), as
// if it were another machine, so that on a small shared machine the
// legitimate writer's latency measures the servers' cost of refusing,
// not the attacker's cost of encrypting its own gigabytes.
type Plan struct {
	GRPC     []GRPCAttack     `json:"grpc,omitempty"`
	HTTP     []HTTPAttack     `json:"http,omitempty"`
	HalfOpen []HalfOpenAttack `json:"half_open,omitempty"`
	// CallTimeout bounds each gRPC call and HTTP request (default 30s).
	CallTimeout time.Duration `json:"call_timeout,omitempty"`
}

// GRPCAttack is Calls concurrent calls of one method on one listener
// (GRPC).
type GRPCAttack struct {
	Name string `json:"name"`
	// Label names the listener in the report (default: Addr).
	Label   string `json:"label,omitempty"`
	Addr    string `json:"addr"`
	LocalIP string `json:"local_ip,omitempty"`
	Conns   int    `json:"conns,omitempty"`
	// TLS: with TLS (the server's certificate is not verified: an
	// attacker does not care), presenting CertFile and KeyFile if set.
	TLS      bool   `json:"tls"`
	CertFile string `json:"cert_file,omitempty"`
	KeyFile  string `json:"key_file,omitempty"`
	// Method is "write", "raft-send", "replica-store" or "ship".
	Method string `json:"method"`
	Calls  int    `json:"calls"`
	Bytes  int    `json:"bytes"`
	// Want is "no-token", "not-a-member", "too-large" or "revoked".
	Want     string            `json:"want"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// HTTPAttack is Requests concurrent POSTs of one LongLineBody of Fields
// fields, each refused with a status of Refuse naming one of Words
// (HTTPPosts).
type HTTPAttack struct {
	Name     string   `json:"name"`
	Label    string   `json:"label,omitempty"` // the listener in the report (default: URL)
	URL      string   `json:"url"`
	LocalIP  string   `json:"local_ip,omitempty"`
	Token    string   `json:"token,omitempty"`
	Requests int      `json:"requests"`
	Fields   int      `json:"fields"`
	Refuse   []int    `json:"refuse"`
	Words    []string `json:"words"`
}

// HalfOpenAttack is HalfOpenHandshakes on one listener.
type HalfOpenAttack struct {
	Name string `json:"name"`
	HalfOpen
}

// Report is what a plan's attacks came to.
type Report struct {
	Started, Ended time.Time
	Tallies        []Tally
	HalfOpen       []HalfOpenReport
	Errors         []string // attacks that could not be run
}

// HalfOpenReport is one listener's HalfOpenResult with its name.
type HalfOpenReport struct {
	Name string
	HalfOpenResult
}

// Totals are the report's counts over every attack: requests and
// connections refused, accepted (and, for half-open handshakes, still
// open after the hold) and not refused clearly.
func (r Report) Totals() (refused, accepted, unclear int) {
	for _, t := range r.Tallies {
		refused += t.Refused
		accepted += t.Accepted
		unclear += t.Unclear
	}
	for _, h := range r.HalfOpen {
		refused += h.Refused()
		accepted += h.StillOpen
		unclear += h.DialFailed
	}
	return refused, accepted, unclear
}

var (
	calls = map[string]Call{"write": CallWrite, "raft-send": CallRaftSend, "replica-store": CallReplicaStore, "ship": CallShip}
	wants = map[string]Refusal{"no-token": NoToken, "not-a-member": NotAMember, "too-large": TooLarge, "revoked": Revoked}
)

// Validate reports every attack that names an unknown method or
// refusal.
func (p Plan) Validate() error {
	var bad []error
	for _, a := range p.GRPC {
		if _, ok := calls[a.Method]; !ok {
			bad = append(bad, fmt.Errorf("attack %q: unknown method %q", a.Name, a.Method))
		}
		if _, ok := wants[a.Want]; !ok {
			bad = append(bad, fmt.Errorf("attack %q: unknown refusal %q", a.Name, a.Want))
		}
		if (a.CertFile == "") != (a.KeyFile == "") {
			bad = append(bad, fmt.Errorf("attack %q: a certificate needs its key", a.Name))
		}
	}
	return errors.Join(bad...)
}

// Run runs every attack of p at once, in this process, and returns when
// all ended.
func (p Plan) Run(ctx context.Context) (Report, error) {
	if err := p.Validate(); err != nil {
		return Report{}, fmt.Errorf("hostile plan: %w", err)
	}
	timeout := p.CallTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	bodies := map[int][]byte{}
	for _, a := range p.HTTP {
		if bodies[a.Fields] == nil {
			bodies[a.Fields] = LongLineBody(a.Fields)
		}
	}
	var (
		mu   sync.Mutex
		outs []Outcome
		rep  = Report{Started: time.Now()}
		wg   sync.WaitGroup
	)
	for _, a := range p.GRPC {
		t := Target{Addr: a.Addr, LocalIP: a.LocalIP, Conns: a.Conns, Metadata: a.Metadata}
		if a.TLS {
			t.TLS = &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // an attacker does not verify
			if a.CertFile != "" {
				cert, err := tls.LoadX509KeyPair(a.CertFile, a.KeyFile)
				if err != nil {
					return Report{}, fmt.Errorf("hostile plan: attack %q: %w", a.Name, err)
				}
				// Presented whatever CAs the server asks for: a Go client
				// would otherwise send no certificate to a server whose
				// CA list does not name its issuer, and the server would
				// not get to refuse it.
				t.TLS.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
			}
		}
		wg.Go(func() {
			o, err := GRPC(ctx, a.Name, t, calls[a.Method], a.Calls, a.Bytes, wants[a.Want], timeout)
			relabel(o, a.Label)
			mu.Lock()
			defer mu.Unlock()
			outs = append(outs, o...)
			if err != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", a.Name, err))
			}
		})
	}
	for _, a := range p.HTTP {
		t := HTTPTarget{URL: a.URL, LocalIP: a.LocalIP, Token: a.Token,
			TLS: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // an attacker does not verify
		wg.Go(func() {
			o := HTTPPosts(ctx, a.Name, t, a.Requests, bodies[a.Fields], a.Refuse, a.Words, timeout)
			relabel(o, a.Label)
			mu.Lock()
			defer mu.Unlock()
			outs = append(outs, o...)
		})
	}
	for _, a := range p.HalfOpen {
		wg.Go(func() {
			r := HalfOpenHandshakes(ctx, a.HalfOpen)
			mu.Lock()
			defer mu.Unlock()
			rep.HalfOpen = append(rep.HalfOpen, HalfOpenReport{a.Name, r})
		})
	}
	wg.Wait()
	rep.Ended = time.Now()
	rep.Tallies = Summarize(outs)
	return rep, nil
}

// relabel names the target of outs label, when set.
func relabel(outs []Outcome, label string) {
	if label == "" {
		return
	}
	for i := range outs {
		outs[i].Target = label
	}
}

// RunPlanProcess runs p in a child process: the command cmd (argv),
// which must call ServePlan, niced to the lowest CPU priority when nice
// is set. It passes the plan and gets the report through files in dir.
func RunPlanProcess(ctx context.Context, p Plan, dir string, nice bool, cmd []string, env ...string) (Report, error) {
	planFile, reportFile := dir+"/hostile-plan.json", dir+"/hostile-report.json"
	b, err := json.Marshal(p)
	if err != nil {
		return Report{}, fmt.Errorf("hostile plan: %w", err)
	}
	if err := os.WriteFile(planFile, b, 0o600); err != nil {
		return Report{}, fmt.Errorf("hostile plan: %w", err)
	}
	argv := cmd
	if nice {
		argv = append([]string{"nice", "-n", "19"}, cmd...)
	}
	c := exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.Env = append(append(os.Environ(), env...), PlanEnv+"="+planFile, ReportEnv+"="+reportFile)
	out, err := c.CombinedOutput()
	if err != nil {
		return Report{}, fmt.Errorf("hostile plan: attacker process %v: %w; output:\n%s", argv, err, clip(string(out), 4000))
	}
	rb, err := os.ReadFile(reportFile)
	if err != nil {
		return Report{}, fmt.Errorf("hostile plan: attacker process wrote no report (%w); output:\n%s", err, clip(string(out), 4000))
	}
	var rep Report
	if err := json.Unmarshal(rb, &rep); err != nil {
		return Report{}, fmt.Errorf("hostile plan: decode report: %w", err)
	}
	return rep, nil
}

// Environment variables through which RunPlanProcess tells the child
// where the plan is and where to write its report.
const (
	PlanEnv   = "TRIBUTARY_HOSTILE_PLAN"
	ReportEnv = "TRIBUTARY_HOSTILE_REPORT"
)

// ServePlan is the child's side of RunPlanProcess: when PlanEnv is set it
// runs the plan, writes the report and returns true; otherwise it returns
// false at once.
func ServePlan(ctx context.Context) (bool, error) {
	planFile, reportFile := os.Getenv(PlanEnv), os.Getenv(ReportEnv)
	if planFile == "" {
		return false, nil
	}
	b, err := os.ReadFile(planFile)
	if err != nil {
		return true, fmt.Errorf("hostile plan: %w", err)
	}
	var p Plan
	if err := json.Unmarshal(b, &p); err != nil {
		return true, fmt.Errorf("hostile plan %s: %w", planFile, err)
	}
	rep, err := p.Run(ctx)
	if err != nil {
		return true, err
	}
	rb, err := json.Marshal(rep)
	if err != nil {
		return true, fmt.Errorf("hostile report: %w", err)
	}
	if err := os.WriteFile(reportFile, rb, 0o600); err != nil {
		return true, fmt.Errorf("hostile report: %w", err)
	}
	return true, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
