package replica

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/tributarydb/tributary/node"
	"github.com/tributarydb/tributary/node/rollup"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
)

// serve runs a ReplicaService over s on an in-memory listener and returns
// a client of it; everything stops when the test ends.
func serve(t *testing.T, o ServerOptions) *Client {
	t.Helper()
	srv, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	lis := bufconn.Listen(1 << 20)
	g := grpc.NewServer(GRPCServerOptions(o.MaxSegmentBytes)...)
	srv.Register(g)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(lis) }()
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		g.Stop()
		<-done
	})
	return NewClient(cc)
}

func TestGRPC_StoreAndQueryRoundTrip(t *testing.T) {
	// A series longer than one response part, so parts are reassembled.
	n := maxQueryPartPoints + 1000
	ts, vs := make([]int64, n), make([]float64, n)
	start := testNow.Add(-20 * 24 * time.Hour).UnixMilli()
	for i := range n {
		ts[i], vs[i] = start+int64(i)*1000, float64(i%1000)*0.25
	}
	ts2, vs2 := points(testNow, 100, func(i int) float64 { return float64(i) })
	segs := edgeSegments(t, "e", []node.Batch{
		{Labels: lbl("__name__", "temp", "room", "1"), Ts: ts, Vs: vs},
		{Labels: lbl("__name__", "temp", "room", "2"), Ts: ts2, Vs: vs2},
	})
	s := openStore(t, t.TempDir())
	defer s.Close()
	c := serve(t, ServerOptions{Store: s})
	ctx := context.Background()

	a, err := c.Store(ctx, "e", segs[0].seq, segs[0].crc, segs[0].file)
	if err != nil {
		t.Fatal(err)
	}
	if a.Points != int64(n+100) || a.Duplicate || len(a.Series) != 2 || a.Series[0].String() != `temp{room="1"}` || a.MinTimeMs != ts[0] {
		t.Fatalf("stored %+v", a)
	}
	if a, err := c.Store(ctx, "e", segs[0].seq, segs[0].crc, segs[0].file); err != nil || !a.Duplicate {
		t.Fatalf("resend: %+v, %v; want a duplicate", a, err)
	}

	from := testNow.Add(-30 * 24 * time.Hour).UnixMilli()
	for _, q := range []node.Query{
		rawQuery(t),
		{Matchers: sel(t, `temp`), Start: from, End: testNow.UnixMilli(), Mode: node.ModeDownsample, Step: 3_600_000, Downsample: rollup.FuncMax, Offset: 1_800_000},
		{Matchers: sel(t, `temp`), Start: from, End: testNow.UnixMilli(), Mode: node.ModeDownsample, Step: 600_000, Downsample: rollup.FuncAvg, Aggregate: rollup.FuncSum, GroupBy: []string{"room"}},
		{Matchers: sel(t, `temp`), End: testNow.UnixMilli(), Mode: node.ModeLastPoint},
	} {
		local, linfo := queryAll(t, s, []string{"e"}, q)
		remote, rinfo := queryAll(t, c, []string{"e"}, q)
		if linfo.Source != rinfo.Source || linfo.Series != rinfo.Series || linfo.Points != rinfo.Points || !slices.Equal(linfo.Warnings, rinfo.Warnings) || len(local) != len(remote) {
			t.Fatalf("query %+v: local %d series %+v, remote %d series %+v", q, len(local), linfo, len(remote), rinfo)
		}
		for i := range local {
			l, r := local[i], remote[i]
			if l.edge != r.edge || l.s.Labels.String() != r.s.Labels.String() || !slices.Equal(l.s.Ts, r.s.Ts) || !slices.Equal(l.s.Vs, r.s.Vs) {
				t.Fatalf("query %+v series %d: local %s@%s (%d points), remote %s@%s (%d points)", q, i,
					l.s.Labels, l.edge, len(l.s.Ts), r.s.Labels, r.edge, len(r.s.Ts))
			}
		}
	}
	if local, _ := queryAll(t, c, []string{"e"}, rawQuery(t)); len(local) != 2 || len(local[0].s.Ts) != n {
		t.Fatalf("raw over the wire: %d series", len(local))
	}
}

func TestGRPC_ErrorClassesSurviveTheWire(t *testing.T) {
	ts, vs := points(testNow, 20, func(i int) float64 { return 1 })
	seg := edgeSegments(t, "e", []node.Batch{{Labels: lbl("__name__", "temp"), Ts: ts, Vs: vs}})[0]
	other := edgeSegments(t, "e", []node.Batch{{Labels: lbl("__name__", "temp"), Ts: ts[:3], Vs: vs[:3]}})[0]
	s := openStore(t, t.TempDir())
	defer s.Close()
	c := serve(t, ServerOptions{Store: s})
	ctx := context.Background()
	if _, err := c.Store(ctx, "e", seg.seq, seg.crc, seg.file); err != nil {
		t.Fatal(err)
	}

	_, err := c.Store(ctx, "e", other.seq, other.crc, other.file)
	if !errors.Is(err, ErrConflict) || status.Code(err) != codes.AlreadyExists {
		t.Fatalf("conflict: %v (code %s)", err, status.Code(err))
	}
	bad := slices.Clone(seg.file)
	bad[20] ^= 1
	_, err = c.Store(ctx, "e", seg.seq+1, seg.crc, bad)
	if !errors.Is(err, ErrInvalidSegment) || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("corrupt: %v (code %s)", err, status.Code(err))
	}
	_, err = c.Query(ctx, nil, rawQuery(t), func(string, node.Series) error { return nil })
	if !errors.Is(err, node.ErrBadQuery) || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad query: %v (code %s)", err, status.Code(err))
	}
	// An emit error ends the query with that error.
	stop := errors.New("enough")
	if _, err := c.Query(ctx, []string{"e"}, rawQuery(t), func(string, node.Series) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("emit error: %v", err)
	}

	// A closed store: the engine's error is retryable (Unavailable).
	s.Close()
	_, err = c.Store(ctx, "e", seg.seq+5, seg.crc, seg.file)
	if status.Code(err) != codes.InvalidArgument { // other seq: refused as invalid before the engine
		t.Fatalf("closed store, invalid segment: %v", err)
	}
	_, err = c.Store(ctx, "e", seg.seq, seg.crc, seg.file)
	if status.Code(err) != codes.Unavailable || errors.Is(err, ErrConflict) {
		t.Fatalf("closed store: %v (code %s), want Unavailable", err, status.Code(err))
	}
}

func TestGRPC_AuthorizeAndBoundedDecompression(t *testing.T) {
	ts, vs := points(testNow, 20, func(i int) float64 { return 1 })
	seg := edgeSegments(t, "e", []node.Batch{{Labels: lbl("__name__", "temp"), Ts: ts, Vs: vs}})[0]
	s := openStore(t, t.TempDir())
	defer s.Close()
	denied := serve(t, ServerOptions{Store: s, Authorize: func(context.Context) error { return errors.New("not a member") }})
	if _, err := denied.Store(context.Background(), "e", seg.seq, seg.crc, seg.file); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("unauthorized store: %v", err)
	}
	if _, err := denied.Query(context.Background(), []string{"e"}, rawQuery(t), func(string, node.Series) error { return nil }); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("unauthorized query: %v", err)
	}

	srv, err := NewServer(ServerOptions{Store: s, MaxSegmentBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(nil) // only for its encoder
	big := make([]byte, 1<<20)
	for name, req := range map[string]*clusterv1.StoreRequest{
		"bomb": {Edge: "e", Seq: 1, Compression: clusterv1.Compression_COMPRESSION_ZSTD, UncompressedBytes: 4000,
			Data: zstdFrame(c.enc, big)},
		"over the limit": {Edge: "e", Seq: 1, Compression: clusterv1.Compression_COMPRESSION_NONE, UncompressedBytes: 5000, Data: big[:5000]},
		"size mismatch":  {Edge: "e", Seq: 1, Compression: clusterv1.Compression_COMPRESSION_NONE, UncompressedBytes: 100, Data: big[:99]},
		"no compression": {Edge: "e", Seq: 1, UncompressedBytes: 100, Data: big[:100]},
		"not zstd":       {Edge: "e", Seq: 1, Compression: clusterv1.Compression_COMPRESSION_ZSTD, UncompressedBytes: 100, Data: big[:100]},
	} {
		if _, err := srv.Store(context.Background(), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if st := s.Stats(); st.Points != 0 {
		t.Fatalf("refused requests stored points: %+v", st)
	}
}
