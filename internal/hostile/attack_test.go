package hostile

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRefusal_JudgeClassifies(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Refusal
		err  error
		want Verdict
	}{
		{"success is accepted", NoToken, nil, Accepted},
		{"the documented code and word", NoToken, status.Error(codes.Unauthenticated, "authentication required: send a Token"), Refused},
		{"the code without the word", NoToken, status.Error(codes.Unauthenticated, "go away"), Unclear},
		{"another code", NoToken, status.Error(codes.DeadlineExceeded, "token"), Unclear},
		{"a handshake alert where one is expected", NotAMember, status.Error(codes.Unavailable, "remote error: tls: unknown certificate authority"), Refused},
		{"a connection closed in the handshake", NotAMember, status.Error(codes.Unavailable, "write tcp: write: broken pipe"), Refused},
		{"a handshake alert where none is expected", TooLarge, status.Error(codes.Unavailable, "remote error: tls: bad certificate"), Unclear},
		{"unavailable for another reason", NotAMember, status.Error(codes.Unavailable, "connection refused"), Unclear},
		{"a plain error", Revoked, errors.New("revoked"), Unclear},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, detail := tc.r.Judge(tc.err); got != tc.want {
				t.Errorf("Judge(%v) = %v (%s), want %v", tc.err, got, detail, tc.want)
			}
		})
	}
}

func TestSummarize_CountsByAttackAndTarget(t *testing.T) {
	outs := []Outcome{
		{Attack: "a", Target: "x", Verdict: Refused, Detail: "no", Took: time.Second},
		{Attack: "a", Target: "x", Verdict: Unclear, Detail: "eh", Took: 2 * time.Second},
		{Attack: "a", Target: "y", Verdict: Refused, Detail: "no"},
		{Attack: "b", Target: "x", Verdict: Accepted, Detail: "OK"},
	}
	got := Summarize(outs)
	want := []Tally{
		{Attack: "a", Target: "x", Refused: 1, Unclear: 1, Slowest: 2 * time.Second, Example: "eh"},
		{Attack: "a", Target: "y", Refused: 1, Example: "no"},
		{Attack: "b", Target: "x", Accepted: 1, Example: "OK"},
	}
	if len(got) != len(want) {
		t.Fatalf("Summarize = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("tally %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestLongLineBody_TenBytesAField(t *testing.T) {
	if got, want := string(LongLineBody(3)), "hostile_line 0000000=0,0000001=0,0000002=0\n"; got != want {
		t.Errorf("LongLineBody(3) = %q, want %q", got, want)
	}
	if n := len(LongLineBody(100_000)); n < 1_000_000 || n > 1_000_100 {
		t.Errorf("100,000 fields make %d bytes, want about 1 MB", n)
	}
}

// capListener holds at most keep connections at once, each for hold, and
// closes any other as soon as it is accepted.
func capListener(t *testing.T, keep int, hold time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(func() { l.Close(); close(done); wg.Wait() })
	slots := make(chan struct{}, keep)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			select {
			case slots <- struct{}{}:
				wg.Go(func() {
					defer func() { <-slots }()
					select {
					case <-time.After(hold):
					case <-done:
					}
					c.Close()
				})
			default:
				c.Close()
			}
		}
	})
	return l.Addr().String()
}

func TestHalfOpenHandshakes_CountsWhatTheServerClosed(t *testing.T) {
	addr := capListener(t, 2, 500*time.Millisecond)
	r := HalfOpenHandshakes(context.Background(), HalfOpen{Addr: addr, Conns: 6, Parallel: 1, Hold: 5 * time.Second, AtOnce: 200 * time.Millisecond})
	if r.ClosedAtOnce != 4 || r.ClosedLater != 2 || r.StillOpen != 0 || r.DialFailed != 0 || r.PeakHeld != 2 {
		t.Errorf("got %+v, want 4 closed at once, 2 later, at most 2 held, none open", r)
	}
	if r.Refused() != 6 {
		t.Errorf("Refused() = %d, want 6", r.Refused())
	}
	if r.LongestHeld < 400*time.Millisecond || r.LongestHeld > 3*time.Second {
		t.Errorf("longest held %v, want about 500ms", r.LongestHeld)
	}
}

func TestHalfOpenHandshakes_ReportsWhatTheServerKeeps(t *testing.T) {
	addr := capListener(t, 10, time.Minute)
	start := time.Now()
	r := HalfOpenHandshakes(context.Background(), HalfOpen{Addr: addr, Conns: 3, Hold: 300 * time.Millisecond, AtOnce: 100 * time.Millisecond})
	if r.StillOpen != 3 || r.Refused() != 0 {
		t.Errorf("got %+v, want all 3 still open", r)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %v with a 300ms hold", took)
	}
}

// tapServer is a gRPC server whose tap refuses every call before its
// message is read, as the token check does.
func tapServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.InTapHandle(func(ctx context.Context, _ *tap.Info) (context.Context, error) {
		return ctx, status.Error(codes.Unauthenticated, "authentication required: send a token")
	}))
	go s.Serve(l)
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

func TestGRPC_JudgesEveryCall(t *testing.T) {
	addr := tapServer(t)
	outs, err := GRPC(context.Background(), "write", Target{Addr: addr, Conns: 2}, CallWrite, 10, 8<<20, NoToken, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if o.Verdict != Refused || !strings.Contains(o.Detail, "Unauthenticated") {
			t.Errorf("%+v, want refused Unauthenticated", o)
		}
	}
	outs, err = GRPC(context.Background(), "raft", Target{Addr: addr}, CallRaftSend, 3, 8<<20, TooLarge, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if o.Verdict != Unclear {
			t.Errorf("%+v: refused with another code than expected, want unclear", o)
		}
	}
}

func TestPlan_ValidateNamesBadAttacks(t *testing.T) {
	p := Plan{GRPC: []GRPCAttack{{Name: "x", Method: "delete", Want: "no-token"}, {Name: "y", Method: "write", Want: "please", CertFile: "c"}}}
	err := p.Validate()
	for _, want := range []string{`"x": unknown method "delete"`, `"y": unknown refusal "please"`, `"y": a certificate needs its key`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %s", err, want)
		}
	}
	if err := (Plan{GRPC: []GRPCAttack{{Method: "ship", Want: "too-large"}}}).Validate(); err != nil {
		t.Errorf("a good plan: %v", err)
	}
}
