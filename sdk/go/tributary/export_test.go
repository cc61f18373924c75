package tributary

import (
	"context"
	"time"

	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// SendFunc is the Writer's seam to the network, for tests.
type SendFunc = func(ctx context.Context, req *pb.WriteRequest, onRetry func(error)) (*pb.WriteResponse, error)

// NewWriterWithSend starts a Writer over send instead of a Client.
func NewWriterWithSend(send SendFunc, opts WriterOptions) (*Writer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return newWriter(send, opts), nil
}

// Backoff exposes the policy's wait after the attempt-th failure.
func (p RetryPolicy) Backoff(attempt int) time.Duration { return p.backoff(attempt) }

// IsLoopback exposes the loopback test of Dial.
var IsLoopback = isLoopback

// Request exposes the API request a Query becomes.
func (q Query) Request(now time.Time) (*pb.QueryRequest, error) { return q.request(now) }
