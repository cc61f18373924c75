package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/rollup"
	"github.com/tributarydb/tributary/node/wal"
	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
)

// serve runs a ReplicaService over s on an in-memory listener and returns
// a client of it; everything stops when the test ends.
func serve(t *testing.T, o ServerOptions) *Client {
	t.Helper()
	return serveWith(t, o, ClientOptions{})
}

// serveWith is serve with a client of options co; extra are more dial
// options.
func serveWith(t *testing.T, o ServerOptions, co ClientOptions, extra ...grpc.DialOption) *Client {
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
	cc, err := grpc.NewClient("passthrough:///bufnet", append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials())}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		g.Stop()
		<-done
	})
	return NewClientWith(cc, co)
}

// compressionSeen records the compression of the store requests a client
// sends, the export requests it makes and the export files it receives.
type compressionSeen struct {
	mu                   sync.Mutex
	store, asked, served map[clusterv1.Compression]int
}

func (c *compressionSeen) add(m map[clusterv1.Compression]int, k clusterv1.Compression) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m[k]++
}

// dialOptions are the interceptors that record.
func (c *compressionSeen) dialOptions() []grpc.DialOption {
	c.store, c.asked, c.served = map[clusterv1.Compression]int{}, map[clusterv1.Compression]int{}, map[clusterv1.Compression]int{}
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if r, ok := req.(*clusterv1.StoreRequest); ok {
			c.add(c.store, r.GetCompression())
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		return &seenStream{ClientStream: s, c: c}, err
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)}
}

type seenStream struct {
	grpc.ClientStream
	c *compressionSeen
}

func (s *seenStream) SendMsg(m any) error {
	if r, ok := m.(*clusterv1.ExportRequest); ok {
		s.c.add(s.c.asked, r.GetCompression())
	}
	return s.ClientStream.SendMsg(m)
}

func (s *seenStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if r, ok := m.(*clusterv1.ExportResponse); ok && err == nil && !r.GetDone() {
		s.c.add(s.c.served, r.GetCompression())
	}
	return err
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
	segs := edgeSegments(t, "e", []model.Batch{
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
	for _, q := range []model.Query{
		rawQuery(t),
		{Matchers: sel(t, `temp`), Start: from, End: testNow.UnixMilli(), Mode: model.ModeDownsample, Step: 3_600_000, Downsample: rollup.FuncMax, Offset: 1_800_000},
		{Matchers: sel(t, `temp`), Start: from, End: testNow.UnixMilli(), Mode: model.ModeDownsample, Step: 600_000, Downsample: rollup.FuncAvg, Aggregate: rollup.FuncSum, GroupBy: []string{"room"}},
		{Matchers: sel(t, `temp`), End: testNow.UnixMilli(), Mode: model.ModeLastPoint},
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
	seg := edgeSegments(t, "e", []model.Batch{{Labels: lbl("__name__", "temp"), Ts: ts, Vs: vs}})[0]
	other := edgeSegments(t, "e", []model.Batch{{Labels: lbl("__name__", "temp"), Ts: ts[:3], Vs: vs[:3]}})[0]
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
	_, err = c.Query(ctx, nil, rawQuery(t), func(string, model.Series) error { return nil })
	if !errors.Is(err, model.ErrBadQuery) || status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad query: %v (code %s)", err, status.Code(err))
	}
	// An emit error ends the query with that error.
	stop := errors.New("enough")
	if _, err := c.Query(ctx, []string{"e"}, rawQuery(t), func(string, model.Series) error { return stop }); !errors.Is(err, stop) {
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
	seg := edgeSegments(t, "e", []model.Batch{{Labels: lbl("__name__", "temp"), Ts: ts, Vs: vs}})[0]
	s := openStore(t, t.TempDir())
	defer s.Close()
	denied := serve(t, ServerOptions{Store: s, Authorize: func(context.Context) error { return errors.New("not a member") }})
	if _, err := denied.Store(context.Background(), "e", seg.seq, seg.crc, seg.file); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("unauthorized store: %v", err)
	}
	if _, err := denied.Query(context.Background(), []string{"e"}, rawQuery(t), func(string, model.Series) error { return nil }); status.Code(err) != codes.PermissionDenied {
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
		"s2":             {Edge: "e", Seq: 1, Compression: clusterv1.Compression_COMPRESSION_S2, UncompressedBytes: 100, Data: s2.Encode(nil, big[:100])},
	} {
		if _, err := srv.Store(context.Background(), req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, err)
		}
	}
	if st := s.Stats(); st.Points != 0 {
		t.Fatalf("refused requests stored points: %+v", st)
	}
}

// TestGRPC_CopyFromAPeer: a Copy whose source is a peer's store behind
// the service ends with exactly the peer's answer; Holdings over the wire
// is the store's; an unauthorised caller gets PermissionDenied for both
// methods and nothing is read for it. Both with S2-compressed files and,
// for a client of ClientOptions.Uncompressed, files as they are.
func TestGRPC_CopyFromAPeer(t *testing.T) {
	for _, uncompressed := range []bool{false, true} {
		t.Run(fmt.Sprintf("uncompressed=%v", uncompressed), func(t *testing.T) { testCopyFromAPeer(t, uncompressed) })
	}
}

func testCopyFromAPeer(t *testing.T, uncompressed bool) {
	peer := openStore(t, t.TempDir())
	defer peer.Close()
	o := oracle{}
	writeEdge(t, peer, o, "e", rand.New(rand.NewPCG(8, 8)), 10, 4, 500, 10*time.Hour)
	if err := peer.RecordCopy("e", 1, 40); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	var seen compressionSeen
	c := serveWith(t, ServerOptions{Store: peer, Authorize: func(context.Context) error { calls.Add(1); return nil }},
		ClientOptions{Uncompressed: uncompressed}, seen.dialOptions()...)
	minT, maxT := testNow.Add(-10*time.Hour).UnixMilli(), testNow.UnixMilli()

	local := exportAll(t, peer, "e", minT, maxT, 1, 40, MinExportFileBytes)
	remote := exportAll(t, c, "e", minT, maxT, 1, 40, MinExportFileBytes)
	if len(local) != len(remote) || len(local) < 2 {
		t.Fatalf("%d files over the wire, %d locally", len(remote), len(local))
	}
	for i := range local {
		if !bytes.Equal(local[i].Data, remote[i].Data) || local[i].Info.CRC != remote[i].Info.CRC || local[i].Info.Points != remote[i].Info.Points ||
			local[i].Info.MinT != remote[i].Info.MinT || local[i].Info.Seq != remote[i].Info.Seq || local[i].Info.PrevSeq != remote[i].Info.PrevSeq {
			t.Fatalf("file %d differs over the wire: %+v vs %+v", i, remote[i].Info, local[i].Info)
		}
	}

	dst := openStore(t, t.TempDir())
	defer dst.Close()
	st, err := dst.Copy(context.Background(), c, "e", 1, 40, minT, maxT, CopyOptions{MaxFileBytes: MinExportFileBytes})
	if err != nil {
		t.Fatal(err)
	}
	if err := sameAnswer(answer(t, dst, "e", minT, maxT), o.answer(minT, maxT)); err != nil {
		t.Fatalf("copy over gRPC: %v (%+v)", err, st)
	}
	want := clusterv1.Compression_COMPRESSION_S2
	if uncompressed {
		want = clusterv1.Compression_COMPRESSION_NONE
	}
	seen.mu.Lock()
	if len(seen.asked) != 1 || seen.asked[want] == 0 || len(seen.served) != 1 || seen.served[want] == 0 {
		t.Errorf("exports asked for %v and got files in %v; want %v only", seen.asked, seen.served, want)
	}
	seen.mu.Unlock()
	// A segment stored through the same client: zstd, or as it is.
	segs := edgeSegments(t, "f", []model.Batch{{Labels: lbl("__name__", "temp"), Ts: []int64{testNow.UnixMilli()}, Vs: []float64{1}}})
	if a, err := c.Store(context.Background(), "f", segs[0].seq, segs[0].crc, segs[0].file); err != nil || a.Points != 1 {
		t.Fatalf("store through the client: %+v, %v", a, err)
	}
	want = clusterv1.Compression_COMPRESSION_ZSTD
	if uncompressed {
		want = clusterv1.Compression_COMPRESSION_NONE
	}
	seen.mu.Lock()
	if len(seen.store) != 1 || seen.store[want] != 1 {
		t.Errorf("store requests in %v; want one in %v", seen.store, want)
	}
	seen.mu.Unlock()
	runs, truncated, err := c.Holdings(context.Background(), "e")
	if err != nil || truncated || !slices.Equal(runs, []SeqRange{{First: 1, Last: 40}}) {
		t.Fatalf("holdings over the wire: %v %v %v", runs, truncated, err)
	}
	if _, _, err := c.Holdings(context.Background(), ""); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("holdings of the empty edge id: %v", err)
	}
	err = c.Export(context.Background(), "e", maxT, minT, 1, 40, MinExportFileBytes, func(ExportedFile) error { return nil })
	if !errors.Is(err, model.ErrBadQuery) {
		t.Fatalf("export with an inverted time range: %v", err)
	}
	stop := errors.New("enough")
	if err := c.Export(context.Background(), "e", minT, maxT, 1, 40, MinExportFileBytes, func(ExportedFile) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("fn error: %v", err)
	}
	if calls.Load() == 0 {
		t.Fatal("Authorize was not called")
	}

	denied := serve(t, ServerOptions{Store: peer, Authorize: func(context.Context) error { return errors.New("not a member") }})
	err = denied.Export(context.Background(), "e", minT, maxT, 1, 40, MinExportFileBytes, func(ExportedFile) error {
		t.Fatal("a file reached an unauthorised caller")
		return nil
	})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("unauthorised export: %v", err)
	}
	if _, _, err := denied.Holdings(context.Background(), "e"); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("unauthorised holdings: %v", err)
	}
}

// TestHoldingsResponse_IsBoundedAndChecked: more runs than one answer
// carries are truncated (the lowest kept, flagged); runs that are not
// ascending, disjoint and apart are refused by the client.
func TestHoldingsResponse_IsBoundedAndChecked(t *testing.T) {
	runs := make([]SeqRange, maxHoldingsRanges+5)
	for i := range runs {
		runs[i] = SeqRange{First: uint64(3*i + 1), Last: uint64(3*i + 2)}
	}
	r := holdingsToProto(runs)
	if !r.GetTruncated() || len(r.GetRanges()) != maxHoldingsRanges {
		t.Fatalf("%d runs, truncated %v", len(r.GetRanges()), r.GetTruncated())
	}
	if sz := proto.Size(r); sz > 4<<20 {
		t.Fatalf("a full answer is %d bytes, over gRPC's default limit", sz)
	}
	back, err := holdingsFromProto(r)
	if err != nil || !slices.Equal(back, runs[:maxHoldingsRanges]) {
		t.Fatalf("round trip: %v", err)
	}
	for name, rs := range map[string][][2]uint64{
		"zero":     {{0, 1}},
		"inverted": {{5, 4}},
		"overlap":  {{1, 5}, {5, 6}},
		"adjacent": {{1, 5}, {6, 7}},
		"order":    {{10, 12}, {1, 2}},
	} {
		m := &clusterv1.HoldingsResponse{}
		for _, x := range rs {
			m.Ranges = append(m.Ranges, &clusterv1.SeqRange{FirstSeq: x[0], LastSeq: x[1]})
		}
		if _, err := holdingsFromProto(m); !errors.Is(err, ErrInvalidSegment) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzExportFileFromProto: whatever a peer sends, decoding never panics
// and never makes more than the limit; a file encoded by the server's
// side decodes back to the same bytes.
func FuzzExportFileFromProto(f *testing.F) {
	c := NewClient(nil)
	const limit = MinExportFileBytes
	file := bytes.Repeat([]byte("tributary segment "), limit/16)[:limit-100]
	for _, comp := range []clusterv1.Compression{clusterv1.Compression_COMPRESSION_ZSTD, clusterv1.Compression_COMPRESSION_S2} {
		good := exportFileToProto(c.enc, comp, ExportedFile{Data: file, Info: wal.SegmentInfo{CRC: 7, Points: 3, MinT: 1, MaxT: 2}})
		if good.GetCompression() != comp {
			f.Fatalf("a compressible file was sent as %v, not %v", good.GetCompression(), comp)
		}
		f.Add(int32(good.GetCompression()), good.GetUncompressedBytes(), good.GetData(), int64(3), int64(1), int64(2))
	}
	f.Add(int32(clusterv1.Compression_COMPRESSION_S2), uint64(limit), s2.Encode(nil, make([]byte, 1<<20)), int64(0), int64(0), int64(0))
	f.Add(int32(clusterv1.Compression_COMPRESSION_ZSTD), uint64(limit), zstdFrame(c.enc, make([]byte, 1<<20)), int64(0), int64(0), int64(0))
	f.Add(int32(clusterv1.Compression_COMPRESSION_NONE), uint64(4), []byte("abcd"), int64(-1), int64(5), int64(4))
	f.Fuzz(func(t *testing.T, comp int32, n uint64, data []byte, points, minT, maxT int64) {
		m := &clusterv1.ExportResponse{Compression: clusterv1.Compression(comp), UncompressedBytes: n, Data: data,
			Points: points, MinTimeMs: minT, MaxTimeMs: maxT}
		got, err := exportFileFromProto(c.dec, m, "e", 3, 9, limit)
		if err != nil {
			if !errors.Is(err, ErrInvalidSegment) {
				t.Fatalf("error of another class: %v", err)
			}
			return
		}
		if int64(len(got.Data)) > limit || uint64(len(got.Data)) != n || got.Info.Seq != 9 || got.Info.PrevSeq != 2 || got.Info.NodeID != "e" {
			t.Fatalf("decoded %d bytes (limit %d, said %d), info %+v", len(got.Data), limit, n, got.Info)
		}
		// Round trip: what decoded, encoded again, decodes to the same.
		again, err := exportFileFromProto(c.dec, exportFileToProto(c.enc, clusterv1.Compression(comp), got), "e", 3, 9, limit)
		if err != nil || !bytes.Equal(again.Data, got.Data) || again.Info != got.Info {
			t.Fatalf("round trip: %v", err)
		}
	})
}
