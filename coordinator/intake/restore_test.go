package intake_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/intake"
	"github.com/tributarydb/tributary/node/labels"
	segbuild "github.com/tributarydb/tributary/node/segment"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// fakeRestore gives one file of raw points per export call, from the
// coordinators not listed in failing, and records who was asked.
type fakeRestore struct {
	mu      sync.Mutex
	failing map[string]bool
	asked   []string
}

func (f *fakeRestore) ExportRaw(_ context.Context, coord, edge string, minT, _ int64, lastSeq uint64, maxFileBytes int64, fn func(intake.RestoreFile) error) error {
	f.mu.Lock()
	f.asked = append(f.asked, coord)
	fail := f.failing[coord]
	f.mu.Unlock()
	if fail {
		return errors.New("replica store unreachable")
	}
	b, err := segbuild.NewBuilder(edge, maxFileBytes)
	if err != nil {
		return err
	}
	if _, err := b.Add(labels.FromStrings("__name__", "temp"), []int64{minT}, []float64{1}); err != nil {
		return err
	}
	data, info, err := b.Finish(lastSeq, 0)
	if err != nil {
		return err
	}
	return fn(intake.RestoreFile{Data: data, CRC: info.CRC, Points: info.Points, MinT: info.MinT, MaxT: info.MaxT})
}

func (f *fakeRestore) ExportRollups(context.Context, string, string, int64, int64, func(intake.RollupSeries) error) error {
	return nil
}

func (f *fakeRestore) RetentionStart() (raw, oldest int64) { return 0, 0 }

// restore calls Restore and reads the whole answer.
func restore(t *testing.T, c pb.ReplicationServiceClient, node string) ([]*pb.RestoreResponse, error) {
	t.Helper()
	s, err := c.Restore(context.Background(), &pb.RestoreRequest{NodeId: node})
	if err != nil {
		return nil, err
	}
	var out []*pb.RestoreResponse
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m)
	}
}

// Only the edge itself may restore, as only it may ship: its certificate
// names it. Revoked edges, coordinators and unknown nodes are refused.
func TestRestore_RefusesAnotherIdentity(t *testing.T) {
	identity := "pi-1"
	e := startEnv(t, func(o *intake.Options) {
		o.Restore = &fakeRestore{}
		o.Identity = func(context.Context) (string, error) { return identity, nil }
	})
	cl := dial(t, e.addr)
	c := open(t, cl, "pi-1")
	c.welcome() // registers pi-1
	if _, err := restore(t, cl, "pi-2"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("pi-1 restoring pi-2: %v, want PERMISSION_DENIED", err)
	}
	identity = coordID
	if _, err := restore(t, cl, coordID); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("restore of a coordinator: %v, want PERMISSION_DENIED", err)
	}
	identity = "pi-9"
	if _, err := restore(t, cl, "pi-9"); status.Code(err) != codes.NotFound {
		t.Fatalf("restore of an unknown edge: %v, want NOT_FOUND", err)
	}
	identity = "pi-1"
	msgs, err := restore(t, cl, "pi-1")
	if err != nil || len(msgs) != 2 || msgs[0].GetHeader().GetNextSeq() != 1 || msgs[1].GetDone() == nil {
		t.Fatalf("restore of an edge that shipped nothing: %v, %v; want a header with next_seq 1, then done", msgs, err)
	}
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.SetRevoked{ID: "pi-1", Revoked: true})); err != nil {
		t.Fatal(err)
	}
	if _, err := restore(t, cl, "pi-1"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("restore of a revoked edge: %v, want PERMISSION_DENIED", err)
	}
}

// Without a restore source the call is not served.
func TestRestore_UnimplementedWithoutSource(t *testing.T) {
	e := startEnv(t, nil)
	if _, err := restore(t, dial(t, e.addr), "pi-1"); status.Code(err) != codes.Unimplemented {
		t.Fatalf("restore without a source: %v, want UNIMPLEMENTED", err)
	}
}

// A replica that fails is replaced by the next one that holds the part;
// the answer's counts add up.
func TestRestore_FallsBackToTheNextReplica(t *testing.T) {
	src := &fakeRestore{failing: map[string]bool{coordID: true}}
	e := startEnv(t, func(o *intake.Options) { o.Restore = src })
	// A second coordinator, a raft learner (the single voter keeps the
	// quorum), so that the edge is placed on both.
	if err := e.raft.AddLearner(context.Background(), 2, "127.0.0.1:2"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.RegisterNode{
		ID: "coord-2", Role: catalog.RoleCoordinator, RaftID: 2, Addr: "127.0.0.1:2"})); err != nil {
		t.Fatal(err)
	}
	cl := dial(t, e.addr)
	c := open(t, cl, "pi-1")
	c.welcome()
	for _, s := range makeSegments(t, "pi-1", 2, 1) {
		c.send(s.parts...)
		if a := c.recv().GetAck(); a == nil {
			t.Fatal("segment refused")
		}
	}
	if p, _ := e.fsm.Placement("pi-1"); !slices.Equal(p.Replicas, []string{coordID, "coord-2"}) {
		t.Fatalf("placement %v, want both coordinators", p.Replicas)
	}
	msgs, err := restore(t, cl, "pi-1")
	if err != nil {
		t.Fatal(err)
	}
	h, done := msgs[0].GetHeader(), msgs[len(msgs)-1].GetDone()
	if h == nil || done == nil || h.NextSeq != 3 || h.AckedThrough != 2 || h.HeldPoints != 400 {
		t.Fatalf("answer %v", msgs)
	}
	if files := int64(len(msgs) - 2); done.Files != files || done.RawPoints != files || files == 0 {
		t.Fatalf("done %v after %d files", done, files)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if len(src.asked) < 2 || src.asked[0] != coordID || src.asked[1] != "coord-2" {
		t.Fatalf("asked %v: want this coordinator first, then coord-2 for each window", src.asked)
	}
	if st := e.in.Stats(); st.Restores != 1 {
		t.Fatalf("stats %+v, want 1 restore", st)
	}
}
