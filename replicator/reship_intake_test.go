package replicator_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/tributarydb/tributary/coordinator/catalog"
	coordintake "github.com/tributarydb/tributary/coordinator/intake"
	"github.com/tributarydb/tributary/node/labels"
	"github.com/tributarydb/tributary/node/record"
	"github.com/tributarydb/tributary/node/wal"
	"github.com/tributarydb/tributary/replicator"
)

// The test below runs the real intake (coordinator/intake) over a real
// catalog (coordinator/catalog): proposals are applied to the catalog
// directly, in order, as a single-member raft would; the replica stores
// are in memory.

// catalogRaft applies every proposal to the catalog at once.
type catalogRaft struct {
	mu  sync.Mutex
	idx uint64
	fsm *catalog.FSM
}

func (r *catalogRaft) Propose(_ context.Context, cmd []byte) (any, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.idx++
	return r.fsm.Apply(r.idx, cmd)
}

func (r *catalogRaft) LinearizableRead(context.Context) error { return nil }

func (r *catalogRaft) propose(t *testing.T, c catalog.Command) {
	t.Helper()
	if _, err := r.Propose(context.Background(), catalog.EncodeCommand(c)); err != nil {
		t.Fatalf("propose %T: %v", c, err)
	}
}

// memReplicas are the coordinators' replica stores: per coordinator, the
// segments stored by sequence.
type memReplicas struct {
	mu   sync.Mutex
	segs map[string]map[uint64]memSeg
	down map[string]bool // Store fails
}

type memSeg struct {
	prev uint64
	crc  uint32
	ts   []int64
}

func (m *memReplicas) Store(_ context.Context, coord, edge string, seq uint64, crc uint32, file []byte) (coordintake.Stored, error) {
	var dec record.Decoder
	var series []labels.Labels
	var ts []int64
	info, err := wal.VerifySegment("stored", file, func(r wal.Record) error {
		return dec.Decode(r.Data, func(_ uint64, key []byte) error {
			ls, err := labels.DecodeKey(key)
			series = append(series, ls)
			return err
		}, func(_ uint64, t []int64, _ []float64) error {
			ts = append(ts, t...)
			return nil
		})
	})
	if err != nil {
		return coordintake.Stored{}, fmt.Errorf("replica %s: %w", coord, err)
	}
	if info.Seq != seq || info.CRC != crc || info.NodeID != edge {
		return coordintake.Stored{}, fmt.Errorf("replica %s: file is %s/%d crc %08x, asked for %s/%d %08x", coord, info.NodeID, info.Seq, info.CRC, edge, seq, crc)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down[coord] {
		return coordintake.Stored{}, fmt.Errorf("replica %s is down (injected)", coord)
	}
	if m.segs[coord] == nil {
		m.segs[coord] = map[uint64]memSeg{}
	}
	if old, ok := m.segs[coord][seq]; ok {
		if old.crc != crc {
			return coordintake.Stored{}, fmt.Errorf("replica %s holds %d with %08x: %w", coord, seq, old.crc, coordintake.ErrConflict)
		}
		return coordintake.Stored{Series: series, Duplicate: true}, nil
	}
	m.segs[coord][seq] = memSeg{prev: info.PrevSeq, crc: crc, ts: ts}
	return coordintake.Stored{Series: series, Points: info.Points}, nil
}

func (m *memReplicas) CRC(_ context.Context, coord, _ string, seq uint64) (uint32, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.segs[coord][seq]
	return s.crc, ok, nil
}

func (m *memReplicas) setDown(coords ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = map[string]bool{}
	for _, c := range coords {
		m.down[c] = true
	}
}

func (m *memReplicas) of(coord string) map[uint64]memSeg {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[uint64]memSeg{}
	for k, v := range m.segs[coord] {
		out[k] = v
	}
	return out
}

// startCatalogIntake starts a real intake for three coordinators, write
// quorum 1, asking for reships every 100 ms.
func startCatalogIntake(t *testing.T) (*catalogRaft, *memReplicas, *coordintake.Server, string) {
	t.Helper()
	fsm := catalog.New()
	r := &catalogRaft{fsm: fsm}
	r.idx++
	if err := fsm.ApplyMembership(r.idx, catalog.Membership{Voters: []uint64{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	for id := uint64(1); id <= 3; id++ {
		r.propose(t, catalog.RegisterNode{ID: fmt.Sprint("coord-", id), Role: catalog.RoleCoordinator, RaftID: id, Addr: "127.0.0.1:1"})
	}
	cfg := fsm.Config()
	cfg.WriteQuorum = 1
	r.propose(t, catalog.SetConfig{Config: cfg})
	reps := &memReplicas{segs: map[string]map[uint64]memSeg{}}
	in, err := coordintake.New(coordintake.Options{CoordinatorID: "coord-1", Catalog: fsm, Raft: r, Replicas: reps,
		ConfigPollInterval: 20 * time.Millisecond, ReshipInterval: 100 * time.Millisecond, QuorumGrace: 10 * time.Millisecond,
		ProposalTimeout: 2 * time.Second,
		Logger:          slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})).With("side", "intake")})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: time.Second, PermitWithoutStream: true}))
	in.Register(g)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = g.Serve(lis)
	}()
	t.Cleanup(func() {
		g.Stop()
		<-served
		in.Close()
	})
	return r, reps, in, lis.Addr().String()
}

// TestShipper_RealIntakeGetsARunNoLiveReplicaHoldsShippedAgain: with
// write quorum 1, an edge's segments are stored on coord-2 alone; coord-2
// goes down. The intake asks the edge to ship the run again, and the
// active replicas end up holding it, recorded in the catalog: from the
// original WAL files (the same CRCs) while they are on disk, rebuilt from
// the store once they are gone.
func TestShipper_RealIntakeGetsARunNoLiveReplicaHoldsShippedAgain(t *testing.T) {
	for _, source := range []string{"wal", "store"} {
		t.Run(source, func(t *testing.T) {
			r, reps, in, addr := startCatalogIntake(t)
			reps.setDown("coord-1", "coord-3")
			w := openWAL(t, "pi-rs")
			segs := sealN(t, w, 3)
			s := newShipper(t, options(t, cursorPath(t), addr))
			start(t, s, w)
			last := segs[len(segs)-1].Seq
			eventually(t, "every segment acknowledged and released", func() bool {
				return s.Stats().AckedThrough == last && s.RetainFrom() == last+1
			})
			if n := len(reps.of("coord-2")); n != len(segs) || len(reps.of("coord-1"))+len(reps.of("coord-3")) != 0 {
				t.Fatalf("coord-2 holds %d segments, the others %d and %d; want all on coord-2 alone",
					n, len(reps.of("coord-1")), len(reps.of("coord-3")))
			}
			if source == "store" {
				if err := w.l.RemoveBefore(last + 1); err != nil {
					t.Fatal(err)
				}
			}
			reps.setDown()
			r.propose(t, catalog.SetNodeState{ID: "coord-2", State: catalog.NodeDown})
			eventually(t, "the active replicas hold the run", func() bool {
				if len(r.fsm.Unsourced("pi-rs")) != 0 {
					return false
				}
				pl, _ := r.fsm.Placement("pi-rs")
				for _, h := range pl.Holdings {
					if len(h.Lacks) != 0 {
						return false
					}
				}
				return s.Stats().ReshipsQueued == 0
			})
			pl, _ := r.fsm.Placement("pi-rs")
			if !slices.Equal(pl.Replicas, []string{"coord-1", "coord-3"}) {
				t.Fatalf("active replicas %v; want coord-1 and coord-3", pl.Replicas)
			}
			var want []int64
			for t := range w.st.points {
				want = append(want, t)
			}
			slices.Sort(want)
			for _, c := range pl.Replicas {
				held := reps.of(c)
				var ts []int64
				for seq, h := range held {
					ts = append(ts, h.ts...)
					if source == "wal" {
						i := slices.IndexFunc(segs, func(s wal.SegmentInfo) bool { return s.Seq == seq })
						if i < 0 || h.crc != segs[i].CRC || h.prev != segs[i].PrevSeq {
							t.Errorf("%s holds segment %d (prev %d, crc %08x); want the original files", c, seq, h.prev, h.crc)
						}
					}
				}
				slices.Sort(ts)
				ts = slices.Compact(ts)
				if !slices.Equal(ts, want) {
					t.Errorf("%s holds %d distinct timestamps; the edge wrote %d", c, len(ts), len(want))
				}
			}
			st := s.Stats()
			switch {
			case source == "wal" && (st.ReshippedFromWAL != int64(len(segs)) || st.ReshippedRebuilt != 0):
				t.Fatalf("stats %+v; want %d files from the WAL", st, len(segs))
			case source == "store" && (st.ReshippedFromWAL != 0 || st.ReshippedRebuilt == 0):
				t.Fatalf("stats %+v; want files rebuilt from the store", st)
			case st.ReshipsUnavailable != 0 || st.ReshipRequests == 0:
				t.Fatalf("stats %+v", st)
			}
			if ist := in.Stats(); ist.Reships == 0 || ist.Refilled == 0 || ist.ReshipsUnavailable != 0 {
				t.Fatalf("intake stats %+v", ist)
			}
			var _ replicator.RetentionSource = w
		})
	}
}
