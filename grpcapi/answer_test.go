package grpcapi

import (
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

func ramp(n int) ([]int64, []float64) {
	ts, vs := make([]int64, n), make([]float64, n)
	for i := range n {
		ts[i], vs[i] = int64(i)*1000, float64(i)/4
	}
	return ts, vs
}

// sendAll frames an answer as a Server would and returns the messages.
func sendAll(t *testing.T, source string, series []model.Series, info model.QueryInfo) []*pb.QueryResponse {
	t.Helper()
	var msgs []*pb.QueryResponse
	a := answerSender{send: func(m *pb.QueryResponse) error { msgs = append(msgs, m); return nil }, source: source}
	for _, s := range series {
		if err := a.series(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.finish(info); err != nil {
		t.Fatal(err)
	}
	return msgs
}

func replay(msgs []*pb.QueryResponse) func() (*pb.QueryResponse, error) {
	return func() (*pb.QueryResponse, error) {
		if len(msgs) == 0 {
			return nil, io.EOF
		}
		m := msgs[0]
		msgs = msgs[1:]
		return m, nil
	}
}

func TestAnswer_WhatIsSentReadsBack(t *testing.T) {
	long := model.Series{Labels: labels.FromStrings(labels.MetricName, "a", "k", "1")}
	long.Ts, long.Vs = ramp(2*maxPointsPerResponse + 5)
	short := model.Series{Labels: labels.FromStrings(labels.MetricName, "b")}
	short.Ts, short.Vs = ramp(3)
	empty := model.Series{Labels: labels.FromStrings(labels.MetricName, "c")}
	for _, tc := range []struct {
		name   string
		series []model.Series
		msgs   int
	}{
		{"one short series", []model.Series{short}, 1},
		{"a series split over messages", []model.Series{long}, 3},
		{"several, one without points", []model.Series{short, long, empty, short}, 6},
		{"no series", nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info := model.QueryInfo{Source: "rollup_1h", Warnings: []string{"edge e1 did not answer", "replica r2 is behind"}, FreshThroughMs: 1_700_000_000_123}
			msgs := sendAll(t, "raw", tc.series, info)
			if len(msgs) != tc.msgs {
				t.Fatalf("%d messages, want %d", len(msgs), tc.msgs)
			}
			for i, m := range msgs {
				if len(m.TimestampsMs) > maxPointsPerResponse {
					t.Fatalf("message %d holds %d points", i, len(m.TimestampsMs))
				}
				if i < len(msgs)-1 && len(m.Warnings) > 0 {
					t.Fatalf("warnings on message %d of %d", i, len(msgs))
				}
			}
			var got []model.Series
			ri, err := ReadAnswer(replay(msgs), func(s model.Series) error { got = append(got, s); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.series) || ri.Series != len(tc.series) {
				t.Fatalf("read %d series (info %d), sent %d", len(got), ri.Series, len(tc.series))
			}
			var points int64
			for i, s := range tc.series {
				g := got[i]
				if labels.Compare(g.Labels, s.Labels) != 0 || !slices.Equal(g.Ts, s.Ts) || !slices.Equal(g.Vs, s.Vs) {
					t.Fatalf("series %d: read %v (%d points), sent %v (%d points)", i, g.Labels, len(g.Ts), s.Labels, len(s.Ts))
				}
				points += int64(len(s.Ts))
			}
			// A non-empty answer says what the query is answered from;
			// an empty one what the backend said.
			wantSource := "raw"
			if len(tc.series) == 0 {
				wantSource = info.Source
			}
			if ri.Points != points || ri.Source != wantSource || !slices.Equal(ri.Warnings, info.Warnings) || ri.FreshThroughMs != info.FreshThroughMs {
				t.Fatalf("info %+v, want %d points, source %q, warnings %q, fresh through %d", ri, points, wantSource, info.Warnings, info.FreshThroughMs)
			}
			if last := msgs[len(msgs)-1]; last.FreshThroughMs != info.FreshThroughMs {
				t.Fatalf("last message fresh through %d, want %d", last.FreshThroughMs, info.FreshThroughMs)
			}
		})
	}
}

func TestAnswer_ReadStopsAtTheFirstError(t *testing.T) {
	s := model.Series{Labels: labels.FromStrings(labels.MetricName, "a")}
	s.Ts, s.Vs = ramp(2)
	msgs := sendAll(t, "raw", []model.Series{s, s}, model.QueryInfo{})

	bad := []*pb.QueryResponse{{SeriesIndex: 0, Series: msgs[0].Series, TimestampsMs: []int64{1, 2}, Values: []float64{1}}}
	if _, err := ReadAnswer(replay(bad), func(model.Series) error { return nil }); !errors.Is(err, ErrMalformedAnswer) {
		t.Fatalf("2 timestamps and 1 value: %v, want ErrMalformedAnswer", err)
	}

	stop := errors.New("enough")
	calls := 0
	_, err := ReadAnswer(replay(msgs), func(model.Series) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Fatalf("emit error: %v after %d calls, want it returned as is after 1", err, calls)
	}

	broken := errors.New("connection reset")
	n := 0
	recv := func() (*pb.QueryResponse, error) {
		if n++; n > 1 {
			return nil, broken
		}
		return msgs[0], nil
	}
	if _, err := ReadAnswer(recv, func(model.Series) error { return nil }); err != broken {
		t.Fatalf("recv error: %v, want it returned as is", err)
	}
}
