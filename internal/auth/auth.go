// Package auth guards Tributary's listeners: bearer tokens for HTTP and
// gRPC checked before a request's body or message is read, TLS
// configuration from certificate files, and the rule that a plaintext
// listener binds only to loopback unless the operator says otherwise.
//
// Credentials follow their files. Every configuration this package builds
// (TLSFiles.ServerConfig, MutualTLS, LoadTokens) registers its files;
// Watch polls them and Reload (SIGHUP) reads them again, so a rotated
// certificate, CA bundle or token file takes effect for new connections
// and requests without a restart, while established connections keep
// working. A reload that fails keeps the previous material and is logged
// and counted (ReloadStats); it never stops the process.
//
// Concurrency: Tokens values and the TLS configurations returned are safe
// for concurrent use, also while a reload swaps the material under them.
package auth

import (
	"fmt"
	"net"
)

// CheckListen refuses a plaintext listener on a non-loopback address
// unless allowInsecure is set: data and tokens would cross the network in
// clear text. what names the listener in the error ("--http-listen").
func CheckListen(what, addr string, tlsOn, allowInsecure bool) error {
	if tlsOn || allowInsecure {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %w", what, addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s %q: a plaintext listener binds only to loopback; configure TLS, or pass --insecure-listen to serve plaintext on %q anyway", what, addr, host)
}
