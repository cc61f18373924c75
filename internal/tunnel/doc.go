// Package tunnel is the reverse query tunnel
// (tributary.v1.ReplicationService/Tunnel): an edge behind NAT opens a
// stream to each coordinator, and the coordinator queries the edge's
// QueryService back through it. Both ends live here:
//
//	edge (Edge)                                 coordinator (Registry)
//	  dials every intake address, sends a hello   checks the hello against the
//	  naming its node id                          caller's certificate identity
//	  serves its QueryService on the Conn  <===>  opens a gRPC client over the
//	  (one HTTP/2 connection per tunnel)          Conn, registers it per edge
//
// Conn carries one byte-stream connection over the gRPC stream of byte
// messages, so that a gRPC server and client can talk over a stream the
// other side opened. Edge keeps one tunnel open to every coordinator,
// reopening it after a jittered backoff; Registry holds the open tunnels
// by edge node id (a newer tunnel of an edge replaces the older one) and
// hands their client connections to the query front end. The coordinator's
// intake service forwards its Tunnel method to Registry.Serve.
//
// The wire protocol and its limits are in docs/replication.md (query
// tunnels).
//
// Concurrency: a Registry is safe for concurrent use, and Serve runs once
// per stream on the gRPC server's goroutine; an Edge is Run once, and Open
// may be called concurrently with Run; Conn's contract is on its type.
package tunnel
