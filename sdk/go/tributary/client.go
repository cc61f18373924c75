package tributary

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/tributarydb/tributary/internal/auth"
	pb "github.com/tributarydb/tributary/proto/tributary/v1"
)

// Client talks to one Tributary server. It is safe for concurrent use;
// share one per address.
type Client struct {
	addr  string
	conn  *grpc.ClientConn
	write pb.WriteServiceClient
	query pb.QueryServiceClient
	opts  options
}

// ErrTokenOverPlaintext is returned by Dial when a token would be sent in
// clear text to an address that is not loopback.
var ErrTokenOverPlaintext = errors.New("refusing to send a token without TLS to a non-loopback address (use TLS, or WithTokenOverPlaintext to accept the risk)")

// Dial returns a Client for addr ("host:port", or any gRPC target such as
// "dns:///host:port" or "unix:///path"). It does not wait for the
// connection unless WithBlock is given, in which case ctx bounds the wait.
func Dial(ctx context.Context, addr string, opts ...Option) (*Client, error) {
	if addr == "" {
		return nil, errors.New("dial: empty address")
	}
	o := defaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
	}
	host := targetHost(addr)
	tlsCfg, err := o.buildTLS(host)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	if o.token != "" && tlsCfg == nil && !o.tokenPlaintext && !isLoopback(addr) {
		return nil, fmt.Errorf("dial %s: %w", addr, ErrTokenOverPlaintext)
	}
	dopts := []grpc.DialOption{
		grpc.WithUserAgent(o.userAgent),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(o.maxRecvBytes)),
	}
	if tlsCfg != nil {
		dopts = append(dopts, grpc.WithTransportCredentials(credentials.NewTLS(tlsCfg)))
	} else {
		dopts = append(dopts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if o.token != "" {
		dopts = append(dopts, grpc.WithPerRPCCredentials(auth.BearerCredentials(o.token, tlsCfg != nil)))
	}
	if o.keepaliveTime > 0 {
		dopts = append(dopts, grpc.WithKeepaliveParams(keepalive.ClientParameters{
			Time: o.keepaliveTime, Timeout: o.keepaliveWait, PermitWithoutStream: true,
		}))
	}
	if o.tracer != nil {
		dopts = append(dopts, grpc.WithStatsHandler(otelgrpc.NewClientHandler(
			otelgrpc.WithTracerProvider(o.tracer), otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
			otelgrpc.WithPropagators(propagation.TraceContext{}))))
	}
	dopts = append(dopts, o.dialOptions...)
	conn, err := grpc.NewClient(addr, dopts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c := &Client{addr: addr, conn: conn, write: pb.NewWriteServiceClient(conn), query: pb.NewQueryServiceClient(conn), opts: o}
	if o.block {
		if err := c.waitReady(ctx); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *Client) waitReady(ctx context.Context) error {
	c.conn.Connect()
	for {
		s := c.conn.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if !c.conn.WaitForStateChange(ctx, s) {
			return fmt.Errorf("dial %s: connection %s: %w", c.addr, strings.ToLower(s.String()), ctx.Err())
		}
	}
}

// Addr returns the address the client was dialled with.
func (c *Client) Addr() string { return c.addr }

// Close releases the connection. Calls in progress fail; Writers made from
// the client must be closed first.
func (c *Client) Close() error { return c.conn.Close() }

// targetHost extracts the host of a gRPC target for TLS server names.
func targetHost(target string) string {
	if i := strings.Index(target, ":///"); i >= 0 {
		target = target[i+4:]
	} else if i := strings.Index(target, "://"); i >= 0 {
		target = target[i+3:]
		if j := strings.IndexByte(target, '/'); j >= 0 {
			target = target[j+1:]
		}
	}
	if h, _, err := net.SplitHostPort(target); err == nil {
		return h
	}
	return target
}

// isLoopback reports whether a target certainly stays on this machine: a
// Unix socket, "localhost" or a loopback IP.
func isLoopback(target string) bool {
	if strings.HasPrefix(target, "unix:") || strings.HasPrefix(target, "unix-abstract:") {
		return true
	}
	h := targetHost(target)
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}
