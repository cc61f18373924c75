package auth

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"
)

// ClientCredentials are gRPC transport credentials for cfg that also check
// the server's certificate against the address dialled when it is an IP
// address. NB: the client configurations MutualTLS returns verify the
// server themselves (to follow a rotated CA bundle), and crypto/tls hands
// them no name for an IP address; without this check a server at an IP
// address would be taken on its chain alone. A name is checked by the
// configuration itself (cfg.ServerName, or the host dialled).
func ClientCredentials(cfg *tls.Config) credentials.TransportCredentials {
	return clientCreds{TransportCredentials: credentials.NewTLS(cfg), cfg: cfg}
}

type clientCreds struct {
	credentials.TransportCredentials
	cfg *tls.Config
}

func (c clientCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	host := c.cfg.ServerName
	if host == "" {
		host = authority
		if h, _, err := net.SplitHostPort(authority); err == nil {
			host = h
		}
	}
	if net.ParseIP(host) == nil {
		return c.TransportCredentials.ClientHandshake(ctx, authority, conn)
	}
	cfg := c.cfg.Clone()
	prev := cfg.VerifyConnection
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if prev != nil {
			if err := prev(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("tls: the server at %s presented no certificate", host)
		}
		if err := cs.PeerCertificates[0].VerifyHostname(host); err != nil {
			return fmt.Errorf("tls: the server's certificate does not name the address dialled: %w", err)
		}
		return nil
	}
	return credentials.NewTLS(cfg).ClientHandshake(ctx, authority, conn)
}

func (c clientCreds) Clone() credentials.TransportCredentials {
	return clientCreds{TransportCredentials: c.TransportCredentials.Clone(), cfg: c.cfg.Clone()}
}
