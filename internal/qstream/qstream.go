// Package qstream reads the streamed answers of a query, as a client of
// the QueryService (tributary.v1) or of a coordinator's ReplicaService
// (tributary.cluster.v1) sees them, into runs of points named by one label
// of their series. The end-to-end tests and the benchmarks check answers
// with it; the product's own clients do not use it.
//
// A QueryService answer names a series by its index, with the labels in
// the first message of the index; a ReplicaService answer carries the
// labels in every part that does not continue the one before. Both readers
// refuse an answer whose messages break those rules or carry a different
// number of timestamps and values.
package qstream

import (
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"

	clusterv1 "github.com/tributarydb/tributary/proto/tributary/cluster/v1"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Info is what an answer says about itself.
type Info struct {
	// Warnings are every warning of the answer, in order.
	Warnings []string
	// Source is the last source the answer named ("" if none).
	Source string
}

// Points receives one run of points of the series named name (the value
// of the reader's label; a series without it is named by that fact and
// its labels). The slices belong to the message; copy what is kept.
type Points func(name string, timestampsMs []int64, values []float64) error

// Query reads a QueryService answer to its end, naming series by label.
// It stops at the first error, of the stream or of points.
func Query(stream grpc.ServerStreamingClient[pb.QueryResponse], label string, points Points) (Info, error) {
	var info Info
	names := map[int64]string{}
	err := each(stream, func(msg *pb.QueryResponse) error {
		info.Warnings = append(info.Warnings, msg.Warnings...)
		if msg.Source != "" {
			info.Source = msg.Source
		}
		name, ok := names[msg.SeriesIndex]
		if !ok && msg.Series != nil {
			name = nameOf(label, msg.Series.Labels, func(l *pb.Label) (string, string) { return l.Name, l.Value })
			names[msg.SeriesIndex] = name
			ok = true
		}
		if err := check(name, msg.TimestampsMs, msg.Values); err != nil {
			return err
		}
		if !ok && len(msg.TimestampsMs) > 0 {
			return fmt.Errorf("points for series index %d before its labels", msg.SeriesIndex)
		}
		return points(name, msg.TimestampsMs, msg.Values)
	})
	return info, err
}

// Replica reads a ReplicaService answer to its end, naming series by
// label. When edge is not "", a series of another edge is an error. It
// stops at the first error, of the stream or of points.
func Replica(stream grpc.ServerStreamingClient[clusterv1.QueryResponse], label, edge string, points Points) (Info, error) {
	var info Info
	name, named := "", false
	err := each(stream, func(msg *clusterv1.QueryResponse) error {
		if msg.Info != nil {
			info.Warnings = append(info.Warnings, msg.Info.Warnings...)
			info.Source = msg.Info.Source
		}
		for _, s := range msg.Series {
			if edge != "" && s.Edge != edge {
				return fmt.Errorf("a series of edge %q in an answer about %q", s.Edge, edge)
			}
			switch {
			case !s.Continued:
				name = nameOf(label, s.Labels, func(l *clusterv1.Label) (string, string) { return l.Name, l.Value })
				named = true
			case !named:
				return errors.New("a continued part before any series")
			}
			if err := check(name, s.TimestampsMs, s.Values); err != nil {
				return err
			}
			if err := points(name, s.TimestampsMs, s.Values); err != nil {
				return err
			}
		}
		return nil
	})
	return info, err
}

// each calls fn with every message of stream, to its end or the first
// error.
func each[T any](stream grpc.ServerStreamingClient[T], fn func(*T) error) error {
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		if err := fn(msg); err != nil {
			return err
		}
	}
}

// nameOf is the value of label among labels, or a name that says the
// series has none.
func nameOf[L any](label string, labels []L, nv func(L) (string, string)) string {
	for _, l := range labels {
		if n, v := nv(l); n == label {
			return v
		}
	}
	return fmt.Sprintf("(a series without a %s label: %v)", label, labels)
}

// check refuses a run whose timestamps and values do not pair up.
func check(name string, ts []int64, vs []float64) error {
	if len(ts) != len(vs) {
		return fmt.Errorf("series %q: %d timestamps and %d values in one message", name, len(ts), len(vs))
	}
	return nil
}
