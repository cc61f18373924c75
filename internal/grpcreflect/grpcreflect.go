// Package grpcreflect decides where gRPC server reflection is served and
// registers it.
//
// Server reflection (grpc.reflection.v1 and v1alpha) lets generic clients
// such as grpcurl and grpcui list a listener's services and call them
// without the .proto files. It is on by default on a listener bound to a
// loopback address (only the machine itself can reach it) and off
// elsewhere unless asked for (--grpc-reflection): it tells whoever may
// call the listener every method and message, which a production listener
// need not advertise. Reflection is an ordinary gRPC service of its
// listener: it is admitted exactly as the listener's other services are
// (a client listener's token, an intake's edge certificate, a cluster
// listener's member certificate).
//
// A Mode is safe for concurrent reads once parsed.
package grpcreflect

import (
	"fmt"
	"net"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
)

// Mode says where reflection is served. The zero value is Auto.
type Mode int

const (
	// Auto serves reflection on loopback listeners only.
	Auto Mode = iota
	// On serves reflection on every listener.
	On
	// Off serves it nowhere.
	Off
)

// String is the flag form: "auto", "true" or "false".
func (m *Mode) String() string {
	if m == nil {
		return "auto"
	}
	switch *m {
	case On:
		return "true"
	case Off:
		return "false"
	}
	return "auto"
}

// Set parses "auto" or a boolean (a bare --grpc-reflection means true).
func (m *Mode) Set(s string) error {
	if s == "auto" {
		*m = Auto
		return nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("grpc reflection %q: want true, false or auto", s)
	}
	*m = Off
	if b {
		*m = On
	}
	return nil
}

// IsBoolFlag lets the flag stand alone (--grpc-reflection).
func (m *Mode) IsBoolFlag() bool { return true }

// For reports whether a listener bound to addr (host:port, as given to
// net.Listen) serves reflection.
func (m Mode) For(addr string) bool {
	switch m {
	case On:
		return true
	case Off:
		return false
	}
	return IsLoopback(addr)
}

// IsLoopback reports whether addr's host is a loopback address or
// "localhost". An empty host (every interface) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Register adds the reflection services (v1 and v1alpha) to g; call it
// after the listener's own services, before Serve.
func Register(g *grpc.Server) { reflection.Register(g) }
