package tributary

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RetryPolicy says how often and how patiently a call is retried after a
// retryable failure (see IsRetryable). The wait before attempt n+1 is drawn
// uniformly from [b/2, b] where b = min(InitialBackoff × 2^(n-1),
// MaxBackoff): exponential backoff with jitter, so that many clients
// failing together do not retry together.
type RetryPolicy struct {
	// MaxAttempts counts the first attempt: 1 never retries. A negative
	// value retries until the caller's context ends. 0 means the default.
	MaxAttempts    int
	InitialBackoff time.Duration // 0: default
	MaxBackoff     time.Duration // 0: default
}

// DefaultRetryPolicy is used when WithRetry is not given: five attempts
// spread over about ten seconds.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 5, InitialBackoff: 250 * time.Millisecond, MaxBackoff: 5 * time.Second}

// Validate fills in defaults and rejects impossible values.
func (p *RetryPolicy) Validate() error {
	p.MaxAttempts = cmp.Or(p.MaxAttempts, DefaultRetryPolicy.MaxAttempts)
	p.InitialBackoff = cmp.Or(p.InitialBackoff, DefaultRetryPolicy.InitialBackoff)
	p.MaxBackoff = cmp.Or(p.MaxBackoff, max(DefaultRetryPolicy.MaxBackoff, p.InitialBackoff))
	switch {
	case p.InitialBackoff < 0 || p.MaxBackoff < 0:
		return fmt.Errorf("negative backoff (initial %s, max %s)", p.InitialBackoff, p.MaxBackoff)
	case p.MaxBackoff < p.InitialBackoff:
		return fmt.Errorf("max backoff %s is below initial backoff %s", p.MaxBackoff, p.InitialBackoff)
	}
	return nil
}

// backoff returns the wait after the attempt-th failed attempt (1-based).
func (p RetryPolicy) backoff(attempt int) time.Duration {
	b := p.InitialBackoff
	for i := 1; i < attempt && b < p.MaxBackoff; i++ {
		b *= 2
	}
	b = min(b, p.MaxBackoff)
	if b <= 1 {
		return b
	}
	return b/2 + rand.N(b/2+1)
}

// IsRetryable reports whether a failed call may succeed if sent again: the
// server was unavailable or overloaded. DEADLINE_EXCEEDED is not included:
// this package retries it for reads only (see the package documentation).
func IsRetryable(err error) bool { return retryable(err, false) }

func retryable(err error, read bool) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Unavailable:
		return true
	case codes.ResourceExhausted:
		// gRPC reports an oversized message with this code too; sending it
		// again cannot help.
		return !strings.Contains(st.Message(), "larger than max")
	case codes.DeadlineExceeded:
		return read
	}
	return false
}

// call runs one logical call: attempts of f, each bounded by the client's
// timeout, retried per the policy while the failure is retryable and ctx
// is alive. read marks an idempotent read (DEADLINE_EXCEEDED is retried).
// onRetry, when not nil, is called before each retry.
func (c *Client) call(ctx context.Context, p RetryPolicy, read bool, op string, onRetry func(error), f func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if c.opts.timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, c.opts.timeout)
		}
		err := f(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return callError(op, attempt, ctxError(ctx, err))
		}
		if !retryable(err, read) || (p.MaxAttempts > 0 && attempt >= p.MaxAttempts) {
			return callError(op, attempt, err)
		}
		if onRetry != nil {
			onRetry(err)
		}
		if !sleep(ctx, p.backoff(attempt)) {
			return callError(op, attempt, ctxError(ctx, err))
		}
	}
}

func callError(op string, attempts int, err error) error {
	if attempts > 1 {
		return fmt.Errorf("%s (gave up after %d attempts): %w", op, attempts, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// ctxError reports that the caller's context ended (so that errors.Is(err,
// context.Canceled) holds), keeping the last attempt's error for the record.
func ctxError(ctx context.Context, last error) error {
	if errors.Is(last, ctx.Err()) {
		return last
	}
	return fmt.Errorf("%w (last attempt: %w)", ctx.Err(), last)
}

// sleep waits d or until ctx ends; it reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
