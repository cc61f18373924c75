package restart

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tributarydb/tributary/bench/internal/fakenode"
	"github.com/tributarydb/tributary/bench/internal/nodeclient"
	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// fakeWAL is a naive stand-in for a node's WAL: one text line per accepted
// batch ("name=value,name=value<TAB>ts,ts,...") in numbered *.seg files. It
// writes without fsync: a SIGKILL leaves what was written in the page cache.
type fakeWAL struct {
	dir     string
	seq     int
	f       *os.File
	size    int64
	maxSize int64
}

func openFakeWAL(dir string, maxSegmentBytes int64) (*fakeWAL, error) {
	// Files the size measurement must leave out.
	if err := os.MkdirAll(filepath.Join(dir, "quarantine"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "quarantine", "00000000000000000001.seg"), make([]byte, 1<<20), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "wal.state"), make([]byte, 1<<20), 0o644); err != nil {
		return nil, err
	}
	w := &fakeWAL{dir: dir, maxSize: maxSegmentBytes}
	segs, err := w.segments()
	if err != nil {
		return nil, err
	}
	if len(segs) > 0 {
		last := strings.TrimSuffix(filepath.Base(segs[len(segs)-1]), ".seg")
		w.seq, _ = strconv.Atoi(last)
	}
	return w, w.cut()
}

func (w *fakeWAL) segments() ([]string, error) {
	segs, err := filepath.Glob(filepath.Join(w.dir, "*.seg"))
	slices.Sort(segs)
	return segs, err
}

func (w *fakeWAL) cut() error {
	if w.f != nil {
		if err := w.f.Close(); err != nil {
			return err
		}
	}
	w.seq++
	f, err := os.OpenFile(filepath.Join(w.dir, fmt.Sprintf("%020d.seg", w.seq)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	w.f, w.size = f, 0
	return err
}

func (w *fakeWAL) append(b *tributaryv1.SeriesBatch) error {
	var sb strings.Builder
	for i, l := range b.GetSeries().GetLabels() {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(l.GetName() + "=" + l.GetValue())
	}
	sb.WriteByte('\t')
	for i, ts := range b.GetTimestampsMs() {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strconv.FormatInt(ts, 10))
	}
	sb.WriteByte('\n')
	n, err := w.f.WriteString(sb.String())
	w.size += int64(n)
	if err == nil && w.size >= w.maxSize {
		err = w.cut()
	}
	return err
}

// replay reads every segment into h. lossy drops the last line of each
// segment, as a node that lost acknowledged writes would.
func (w *fakeWAL) replay(h *fakeHead, lossy bool) (points int64, err error) {
	segs, err := w.segments()
	if err != nil {
		return 0, err
	}
	for _, path := range segs {
		f, err := os.Open(path)
		if err != nil {
			return points, err
		}
		var lines []string
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return points, err
		}
		if lossy && len(lines) > 0 {
			lines = lines[:len(lines)-1]
		}
		for _, line := range lines {
			lset, tss, ok := strings.Cut(line, "\t")
			if !ok {
				return points, fmt.Errorf("%s: bad line %q", path, line)
			}
			s := &tributaryv1.Series{}
			for pair := range strings.SplitSeq(lset, ",") {
				name, value, _ := strings.Cut(pair, "=")
				s.Labels = append(s.Labels, &tributaryv1.Label{Name: name, Value: value})
			}
			b := &tributaryv1.SeriesBatch{Series: s}
			for t := range strings.SplitSeq(tss, ",") {
				ts, err := strconv.ParseInt(t, 10, 64)
				if err != nil {
					return points, fmt.Errorf("%s: bad timestamp %q", path, t)
				}
				b.TimestampsMs = append(b.TimestampsMs, ts)
			}
			h.add(b)
			points += int64(len(b.TimestampsMs))
		}
	}
	return points, nil
}

// fakeHead is a naive in-memory node: every point of every series, and a
// QueryService that answers raw queries with EQUAL matchers by scanning.
// It streams each series in messages of chunkPoints to exercise answers
// that continue a series over several messages.
type fakeHead struct {
	tributaryv1.UnimplementedQueryServiceServer

	chunkPoints int

	mu     sync.Mutex
	series map[string]*fakeSeries
	points int64
}

type fakeSeries struct {
	labels []*tributaryv1.Label // as written, not sorted
	ts     []int64
}

func newFakeHead() *fakeHead { return &fakeHead{chunkPoints: 50, series: map[string]*fakeSeries{}} }

func (h *fakeHead) add(b *tributaryv1.SeriesBatch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	key := nodeclient.SeriesKey(b.GetSeries().GetLabels())
	s := h.series[key]
	if s == nil {
		s = &fakeSeries{labels: b.GetSeries().GetLabels()}
		h.series[key] = s
	}
	s.ts = append(s.ts, b.GetTimestampsMs()...)
	h.points += int64(len(b.GetTimestampsMs()))
}

func (h *fakeHead) Status(context.Context, *tributaryv1.StatusRequest) (*tributaryv1.StatusResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &tributaryv1.StatusResponse{Series: int64(len(h.series)), HeadSeries: int64(len(h.series)), HeadSamples: h.points}, nil
}

func (h *fakeHead) Query(req *tributaryv1.QueryRequest, stream tributaryv1.QueryService_QueryServer) error {
	if req.GetMode() != tributaryv1.QueryMode_QUERY_MODE_RAW {
		return status.Error(codes.Unimplemented, "the fake answers raw queries only")
	}
	h.mu.Lock()
	var match []*fakeSeries
	var keys []string
	for key, s := range h.series {
		ok := true
		for _, m := range req.GetMatchers() {
			if m.GetType() != tributaryv1.Matcher_EQUAL {
				h.mu.Unlock()
				return status.Error(codes.Unimplemented, "the fake supports = matchers only")
			}
			ok = ok && labelValue(s.labels, m.GetName()) == m.GetValue()
		}
		if ok {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		s := h.series[k]
		match = append(match, &fakeSeries{labels: s.labels, ts: slices.Clone(s.ts)})
	}
	h.mu.Unlock()
	if limit := req.GetLimitSeries(); limit > 0 && int64(len(match)) > limit {
		return status.Errorf(codes.InvalidArgument, "%d series match, limit is %d", len(match), limit)
	}
	if len(match) == 0 {
		return stream.Send(&tributaryv1.QueryResponse{SeriesIndex: -1, Source: "raw"})
	}
	for i, s := range match {
		var ts []int64
		for _, t := range s.ts {
			if t >= req.GetStartMs() && t <= req.GetEndMs() {
				ts = append(ts, t)
			}
		}
		for off := 0; off == 0 || off < len(ts); off += h.chunkPoints {
			end := min(off+h.chunkPoints, len(ts))
			msg := &tributaryv1.QueryResponse{SeriesIndex: int64(i), TimestampsMs: ts[off:end], Values: make([]float64, end-off)}
			if off == 0 {
				msg.Series = &tributaryv1.Series{Labels: s.labels}
			}
			if i == 0 && off == 0 {
				msg.Source = "raw"
			}
			if err := stream.Send(msg); err != nil {
				return err
			}
		}
	}
	return nil
}

func labelValue(ls []*tributaryv1.Label, name string) string {
	for _, l := range ls {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// newFakeWriter is a WriteService that logs every accepted batch to w and
// applies it to h.
func newFakeWriter(w *fakeWAL, h *fakeHead) *fakenode.Writer {
	fw := fakenode.NewWriter()
	fw.OnAccept = func(b *tributaryv1.SeriesBatch) error {
		if err := w.append(b); err != nil {
			return err
		}
		h.add(b)
		return nil
	}
	return fw
}
