package auth

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// GRPCOptions configure GRPCServerOptions.
type GRPCOptions struct {
	// Tokens, when enabled, must carry the call's "authorization: Bearer
	// <token>" metadata.
	Tokens Tokens
	// RequireClientCert refuses calls on connections without a verified
	// client certificate. The listener's TLS configuration (a client CA)
	// is what demands one; this checks it again per call.
	RequireClientCert bool
	// OnDeny, when not nil, is called with the method of each refused
	// call.
	OnDeny func(method string)
	// NoTokenServices are full service names (e.g. "grpc.health.v1.Health")
	// whose calls need no token, as /readyz needs none: a probe (the
	// kubelet's gRPC probe) cannot send metadata. A client certificate,
	// when required, is still checked.
	NoTokenServices []string
}

// GRPCServerOptions returns gRPC server options that authenticate every
// call from its headers before its first message is read, or none when
// there is nothing to check.
//
// The check runs as the server's tap handle (grpc.InTapHandle), on the
// connection's reader goroutine as soon as a stream's HEADERS frame is
// decoded: a refused call is answered and reset without its message being
// received, so an unauthenticated client cannot make the server buffer a
// request. Unary and stream interceptors repeat the check, a second line
// should the tap ever be bypassed. Only one tap handle may be installed on
// a server; this is it.
func GRPCServerOptions(o GRPCOptions) []grpc.ServerOption {
	if !o.Tokens.Enabled() && !o.RequireClientCert {
		return nil
	}
	deny := func(m string) {
		if o.OnDeny != nil {
			o.OnDeny(m)
		}
	}
	return []grpc.ServerOption{
		grpc.InTapHandle(func(ctx context.Context, info *tap.Info) (context.Context, error) {
			if err := o.check(ctx, info.FullMethodName, info.Header); err != nil {
				deny(info.FullMethodName)
				return nil, err
			}
			return ctx, nil
		}),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			if err := o.check(ctx, info.FullMethod, md); err != nil {
				deny(info.FullMethod)
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			md, _ := metadata.FromIncomingContext(ss.Context())
			if err := o.check(ss.Context(), info.FullMethod, md); err != nil {
				deny(info.FullMethod)
				return err
			}
			return h(srv, ss)
		}),
	}
}

// check authenticates a call from its connection and its metadata; it
// must not block (it runs on the connection's reader goroutine).
func (o GRPCOptions) check(ctx context.Context, method string, md metadata.MD) error {
	if o.RequireClientCert && !hasVerifiedClientCert(ctx) {
		return status.Error(codes.Unauthenticated, "a verified client certificate is required")
	}
	if o.noToken(method) {
		return nil
	}
	tok := fromMetadata(md)
	if o.Tokens.Valid(tok) {
		return nil
	}
	if tok == "" {
		return status.Error(codes.Unauthenticated, ErrNoToken.Error()+" (gRPC metadata 'authorization')")
	}
	return status.Error(codes.Unauthenticated, ErrBadToken.Error())
}

func hasVerifiedClientCert(ctx context.Context) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	return ok && len(ti.State.VerifiedChains) > 0
}

// fromMetadata extracts the bearer token from gRPC metadata.
func fromMetadata(md metadata.MD) string {
	for _, v := range md.Get("authorization") {
		if scheme, rest, ok := strings.Cut(v, " "); ok && strings.EqualFold(scheme, "bearer") {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// noToken reports whether method ("/service/Method") belongs to one of
// NoTokenServices.
func (o GRPCOptions) noToken(method string) bool {
	for _, svc := range o.NoTokenServices {
		if len(method) > len(svc)+2 && method[0] == '/' && method[1+len(svc)] == '/' && method[1:1+len(svc)] == svc {
			return true
		}
	}
	return false
}
