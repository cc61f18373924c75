package grpcapi

import (
	"errors"
	"fmt"
	"io"

	"github.com/tributarydb/tributary/model"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// maxPointsPerResponse bounds one streamed QueryResponse message.
const maxPointsPerResponse = 8192

// answerSender sends a Query answer as QueryResponse messages (the
// framing is in the package doc). Not safe for concurrent use.
type answerSender struct {
	send   func(*pb.QueryResponse) error
	source string // the first message's Source
	idx    int64  // the next series' SeriesIndex
	sent   bool   // a message carried Source
	// pending is the newest message, held back so that the warnings,
	// known only at the end, can ride on the last one.
	pending *pb.QueryResponse
}

// series sends s (its slices are only read).
func (a *answerSender) series(s model.Series) error {
	for off := 0; off == 0 || off < len(s.Ts); off += maxPointsPerResponse {
		end := min(off+maxPointsPerResponse, len(s.Ts))
		msg := &pb.QueryResponse{
			SeriesIndex:  a.idx,
			TimestampsMs: s.Ts[off:end],
			Values:       s.Vs[off:end],
		}
		if off == 0 {
			msg.Series = LabelsToProto(s.Labels)
		}
		if !a.sent {
			msg.Source, a.sent = a.source, true
		}
		if err := a.hold(msg); err != nil {
			return err
		}
	}
	a.idx++
	return nil
}

// hold sends the pending message and keeps m in its place.
func (a *answerSender) hold(m *pb.QueryResponse) error {
	if a.pending != nil {
		if err := a.send(a.pending); err != nil {
			return err
		}
	}
	a.pending = m
	return nil
}

// finish sends the last message with info's warnings; an empty answer
// still says where it came from.
func (a *answerSender) finish(info model.QueryInfo) error {
	if a.pending == nil {
		a.pending = &pb.QueryResponse{SeriesIndex: -1, Source: info.Source}
	}
	a.pending.Warnings = info.Warnings
	a.pending.FreshThroughMs = info.FreshThroughMs
	return a.send(a.pending)
}

// ErrMalformedAnswer marks a Query answer that breaks the framing (a
// message whose timestamps and values differ in number).
var ErrMalformedAnswer = errors.New("malformed query answer")

// ReadAnswer reads a Query answer from recv until it returns io.EOF and
// calls emit once per series, with its messages' points joined, in the
// order sent. The QueryInfo holds the answer's Source (from its first
// message), its Warnings and FreshThroughMs (from the last message), and the number of series and points passed to
// emit. recv's and emit's errors are returned as they are; a malformed
// answer's wrap ErrMalformedAnswer.
func ReadAnswer(recv func() (*pb.QueryResponse, error), emit func(model.Series) error) (model.QueryInfo, error) {
	var info model.QueryInfo
	var cur model.Series
	idx := int64(-1)
	flush := func() error {
		if idx < 0 {
			return nil
		}
		s := cur
		cur, idx = model.Series{}, -1
		info.Series++
		info.Points += int64(len(s.Ts))
		return emit(s)
	}
	first := true
	for {
		msg, err := recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return info, err
		}
		if first {
			info.Source, first = msg.Source, false
		}
		info.Warnings = append(info.Warnings, msg.Warnings...)
		if msg.FreshThroughMs != 0 {
			info.FreshThroughMs = msg.FreshThroughMs
		}
		if msg.SeriesIndex < 0 {
			continue
		}
		if msg.SeriesIndex != idx {
			if err := flush(); err != nil {
				return info, err
			}
			idx = msg.SeriesIndex
			cur.Labels = LabelsFromProto(msg.Series)
		}
		if len(msg.TimestampsMs) != len(msg.Values) {
			return info, fmt.Errorf("%w: series %d: %d timestamps and %d values", ErrMalformedAnswer, idx, len(msg.TimestampsMs), len(msg.Values))
		}
		cur.Ts = append(cur.Ts, msg.TimestampsMs...)
		cur.Vs = append(cur.Vs, msg.Values...)
	}
	return info, flush()
}
