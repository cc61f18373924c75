package intake_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tributarydb/tributary/coordinator/catalog"
	"github.com/tributarydb/tributary/coordinator/intake"
)

// countingRaft counts the proposals that reach raft, by kind.
type countingRaft struct {
	intake.Raft
	proposals, batches atomic.Int64
}

func (r *countingRaft) Propose(ctx context.Context, cmd []byte) (any, error) {
	r.proposals.Add(1)
	if len(cmd) > 1 && catalog.Kind(cmd[1]) == catalog.KindRecordBatch {
		r.batches.Add(1)
	}
	return r.Raft.Propose(ctx, cmd)
}

// Segments shipped at once on many streams are recorded with far fewer
// raft proposals than segments, every one acknowledged only once held.
func TestIntake_ConcurrentStreamsShareCatalogProposals(t *testing.T) {
	var counter *countingRaft
	e := startEnv(t, func(o *intake.Options) {
		counter = &countingRaft{Raft: o.Raft}
		o.Raft = counter
	})
	const edges, perEdge = 8, 12
	cl := dial(t, e.addr)
	var cs []*client
	var segs [][]segment
	for i := range edges {
		node := fmt.Sprintf("pi-%d", i)
		c := open(t, cl, node)
		c.welcome()
		cs = append(cs, c)
		segs = append(segs, makeSegments(t, node, perEdge, float64(i)))
	}
	before := counter.proposals.Load()
	for i, c := range cs {
		for _, s := range segs[i] {
			c.send(s.parts...)
		}
	}
	for i, c := range cs {
		through := uint64(0)
		for range perEdge {
			a := c.recv().GetAck()
			if a == nil {
				t.Fatalf("edge %d: a refusal, want acks", i)
			}
			through = max(through, a.AckedThrough)
		}
		if through != perEdge {
			t.Fatalf("edge %d: acked through %d, want %d", i, through, perEdge)
		}
	}
	proposals := counter.proposals.Load() - before
	const segments = edges * perEdge
	for i := range edges {
		p, _ := e.fsm.Progress(fmt.Sprintf("pi-%d", i))
		if p.AckedThrough() != perEdge {
			t.Fatalf("edge %d: the catalog holds through %d", i, p.AckedThrough())
		}
	}
	st := e.in.Stats()
	t.Logf("%d segments, %d catalog records, %d proposals (%d record batches)", segments, st.CatalogRecords, proposals, counter.batches.Load())
	if st.SegmentsStored != segments || st.CatalogRecords < segments {
		t.Fatalf("stats %+v", st)
	}
	if proposals != st.CatalogProposals || counter.batches.Load() == 0 || proposals*3 > segments {
		t.Fatalf("%d proposals (the intake counted %d, %d batches) for %d segments; want at most a third",
			proposals, st.CatalogProposals, counter.batches.Load(), segments)
	}
}

// Until every member applies RecordBatch, the records are proposed one
// command each, as before, and recorded all the same.
func TestIntake_NoRecordBatchUntilEveryMemberAppliesIt(t *testing.T) {
	var counter *countingRaft
	e := startEnv(t, func(o *intake.Options) {
		counter = &countingRaft{Raft: o.Raft}
		o.Raft = counter
		o.CatalogLinger = 20 * time.Millisecond
	})
	// coord-1 registers again as a coordinator of the version before.
	if _, err := e.raft.Propose(context.Background(), catalog.EncodeCommand(catalog.RegisterNode{
		ID: coordID, Role: catalog.RoleCoordinator, RaftID: 1, Addr: "127.0.0.1:1"})); err != nil {
		t.Fatal(err)
	}
	const edges, perEdge = 3, 4
	var cs []*client
	cl := dial(t, e.addr)
	for i := range edges {
		node := fmt.Sprintf("pi-%d", i)
		c := open(t, cl, node)
		c.welcome()
		for _, s := range makeSegments(t, node, perEdge, 1) {
			c.send(s.parts...)
		}
		cs = append(cs, c)
	}
	for i, c := range cs {
		for range perEdge {
			if c.recv().GetAck() == nil {
				t.Fatalf("edge %d: a refusal, want acks", i)
			}
		}
		if p, _ := e.fsm.Progress(fmt.Sprintf("pi-%d", i)); p.AckedThrough() != perEdge {
			t.Fatalf("edge %d: the catalog holds through %d", i, p.AckedThrough())
		}
	}
	if n := counter.batches.Load(); n != 0 {
		t.Fatalf("%d record batches proposed while a member cannot apply them", n)
	}
	if st := e.in.Stats(); st.CatalogProposals != st.CatalogRecords {
		t.Fatalf("%d proposals for %d records, want one each", st.CatalogProposals, st.CatalogRecords)
	}
}
