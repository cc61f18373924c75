// Package nodeclient holds the small gRPC client pieces the benchmark
// workloads share: dialling a node over plaintext loopback gRPC, checking
// that a Write accepted every point, and collecting a streamed Query answer.
//
// Everything here is safe for concurrent use.
package nodeclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	tributaryv1 "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Dial connects to a node's gRPC address without TLS, which a node allows
// only when asked explicitly (loopback benchmarks, local mode). The
// connection is made lazily, on the first call.
func Dial(addr string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial node %s: %w", addr, err)
	}
	return conn, nil
}

// CheckWrite returns an error unless resp accepted exactly sent points and
// rejected none. The error quotes the node's first rejections.
func CheckWrite(resp *tributaryv1.WriteResponse, sent int) error {
	if resp.GetAccepted() == int64(sent) && resp.GetRejected() == 0 {
		return nil
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "node accepted %d and rejected %d of %d points sent", resp.GetAccepted(), resp.GetRejected(), sent)
	for i, r := range resp.GetRejections() {
		if i == 5 {
			fmt.Fprintf(&sb, "; and %d more rejections", len(resp.GetRejections())-i)
			break
		}
		fmt.Fprintf(&sb, "; batch %d point %d: %s (%d points): %s", r.GetBatchIndex(), r.GetPointIndex(), r.GetReason(), r.GetPoints(), r.GetMessage())
	}
	return errors.New(sb.String())
}

// Series is one series (or group) of a query answer.
type Series struct {
	Labels       []*tributaryv1.Label
	TimestampsMs []int64
	Values       []float64
}

// Label returns the value of label name, or "".
func (s Series) Label(name string) string {
	for _, l := range s.Labels {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// SeriesKey identifies a series by its labels whatever order they come in,
// as "{name=value, ...}" in name order: a map key for comparing what was
// written with what a node answers, and readable in a message.
func SeriesKey(ls []*tributaryv1.Label) string {
	pairs := make([]string, len(ls))
	for i, l := range ls {
		pairs[i] = l.GetName() + "=" + l.GetValue()
	}
	slices.Sort(pairs)
	return "{" + strings.Join(pairs, ", ") + "}"
}

// Answer is a whole query answer.
type Answer struct {
	// Series in series_index order.
	Series []Series
	// Source is where the node says the answer came from ("raw", "rollup_1h").
	Source string
	// Warnings say what is missing from a partial answer.
	Warnings []string
	// FreshThroughMs is how fresh a coordinator's answer given with a
	// staleness allowance (max_staleness_ms) is; 0 when not said.
	FreshThroughMs int64
}

// Query runs req and collects the streamed answer, joining messages that
// continue the same series_index.
func Query(ctx context.Context, qc tributaryv1.QueryServiceClient, req *tributaryv1.QueryRequest) (Answer, error) {
	stream, err := qc.Query(ctx, req)
	if err != nil {
		return Answer{}, fmt.Errorf("query: %w", err)
	}
	var (
		ans   Answer
		index = map[int64]int{} // series_index → position in ans.Series
		first = true
	)
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return ans, nil
		}
		if err != nil {
			return ans, fmt.Errorf("query: %w", err)
		}
		if first {
			ans.Source, first = msg.GetSource(), false
		}
		ans.Warnings = append(ans.Warnings, msg.GetWarnings()...)
		if t := msg.GetFreshThroughMs(); t != 0 {
			ans.FreshThroughMs = t
		}
		if len(msg.GetTimestampsMs()) != len(msg.GetValues()) {
			return ans, fmt.Errorf("query: series %d: %d timestamps but %d values", msg.GetSeriesIndex(), len(msg.GetTimestampsMs()), len(msg.GetValues()))
		}
		pos, ok := index[msg.GetSeriesIndex()]
		if !ok {
			pos = len(ans.Series)
			index[msg.GetSeriesIndex()] = pos
			ans.Series = append(ans.Series, Series{Labels: msg.GetSeries().GetLabels()})
		}
		s := &ans.Series[pos]
		s.TimestampsMs = append(s.TimestampsMs, msg.GetTimestampsMs()...)
		s.Values = append(s.Values, msg.GetValues()...)
	}
}
