package auth

import (
	"context"

	"google.golang.org/grpc/credentials"
)

// BearerCredentials are gRPC per-call credentials that send token with
// every call as "authorization: Bearer <token>", what GRPCServerOptions
// checks. With secure false they are sent over a plaintext connection
// too: only for one the caller has vetted (loopback, or allowed
// explicitly).
func BearerCredentials(token string, secure bool) credentials.PerRPCCredentials {
	return bearer{token: func() string { return token }, secure: secure}
}

// BearerCredentials are BearerCredentials that send the first of t's
// tokens, read at every call: after a reload of t's file the next call
// sends the new one.
func (t Tokens) BearerCredentials(secure bool) credentials.PerRPCCredentials {
	return bearer{token: t.First, secure: secure}
}

type bearer struct {
	token  func() string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token()}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }
