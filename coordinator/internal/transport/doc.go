// Package transport carries raft messages between Tributary's cloud
// coordinators: a gRPC client-streaming RPC (tributary.cluster.v1
// RaftService.Send) over mutual TLS.
//
// # Sending
//
// Transport implements raftnode.Transport. Send never blocks: it sorts each
// message into a bounded per-peer queue and returns. Every peer has two
// long-lived workers, each with its own gRPC connection:
//
//   - the message worker drains the peer's queue in order onto one stream,
//     packing the messages it finds waiting into one envelope (up to
//     Options.MaxBatchBytes);
//   - the snapshot worker sends each MsgSnap on a stream of its own
//     (RaftService.SendSnapshot: the message without its snapshot data,
//     then the data in chunks of Options.SnapshotChunkBytes, so that no
//     gRPC message limit bounds a snapshot; Options.MaxSnapshotBytes does)
//     and waits for the receiver to acknowledge it, then reports the
//     outcome with Reporter.ReportSnapshot. A snapshot of many megabytes
//     thus never sits in front of heartbeats, neither in a queue nor in a
//     TCP buffer. A receiver of an earlier version answers UNIMPLEMENTED;
//     it then gets the whole MsgSnap in one Send envelope, up to
//     LegacySnapshotBytes.
//
// A message that finds its queue full, or whose peer is unknown, is dropped
// and counted (raft retransmits) and the peer is reported unreachable. When
// a stream fails, the messages it held and those still queued are dropped,
// the peer is reported unreachable, and the worker reconnects after a
// jittered exponential backoff (Options.MinBackoff to MaxBackoff). Messages
// to one peer arrive in the order Send was given them, except that a
// MsgSnap travels separately (raft does not need order between them).
//
// The address book (member id → Peer{Addr, Name}) changes at runtime with
// AddPeer, UpdatePeer and RemovePeer; changing or removing a peer drops
// what was queued for it.
//
// # Admission
//
// Every stream on the Server's listener, of RaftService and of every
// service registered beside it, passes a gRPC tap (grpc.InTapHandle)
// before gRPC reads anything of it: with TLS, the caller must have
// presented a verified client certificate (else UNAUTHENTICATED) one of
// whose DNS or URI names ServerOptions.Members says is a current member
// (else PERMISSION_DENIED). A raft stream carries its sender in its
// headers (HeaderClusterID, HeaderMemberID): the tap also refuses another
// cluster (FAILED_PRECONDITION), a member id not in the address book, and
// a certificate without that member's Name (PERMISSION_DENIED). A refused
// stream costs the server its headers only: its messages, however large,
// are never buffered. gRPC has one receive limit per server, not one per
// method, so admission before reading is what bounds what a non-member can
// make the server hold, not a smaller limit on first messages.
//
// Serve caps the connections it keeps (ServerOptions.MaxConns, per remote
// address MaxConnsPerIP) and bounds the TLS handshake (HandshakeTimeout);
// MaxStreams bounds the streams per connection.
//
// # Receiving
//
// Server serves RaftService. Before handing any message on it checks every
// envelope: on a stream whose headers named the sender, that the envelope
// names the same cluster and sender; on a stream without them (a sender of
// an earlier version, admitted by its certificate alone), the first
// envelope is checked as the headers would have been, and every later one
// must name the same cluster and sender. Every message must come from the
// envelope's sender and be addressed to this member. Accepted messages go,
// in order, to ServerOptions.Step (raftnode's Node.Step). A Step error
// drops the message (raft retransmits) except for a MsgSnap, whose failure
// ends the stream so that the sender reports it.
//
// A SendSnapshot stream must name its sender in its headers. Its first
// chunk's message must be a MsgSnap from that sender to this member
// without data, announcing at most ServerOptions.MaxSnapshotBytes of data;
// the chunks must then add up to exactly that. At most
// MaxSnapshotsInflight snapshots are received at once, and a stream on
// which no chunk arrives for SnapshotIdleTimeout is ended. The data is
// held in memory, in a buffer that grows with what arrived, and the
// whole MsgSnap goes to Step once the sender closed its side.
//
// # Identity
//
// A member's Name is matched against its certificate's subject alternative
// names: the certificate matches when one of its DNS names or URIs equals
// Name exactly (for example "coord-1.tributary.svc" or
// "spiffe://tributary/coordinator/1"). The subject common name is not used.
// The same check applies in the other direction: a Transport refuses a
// server whose certificate does not carry the Name of the member it dials,
// so a misconfigured address cannot divert raft traffic to another member.
//
// # TLS
//
// Both sides take a *tls.Config (certificates and CA pools are loaded by
// the caller). Without one, New and NewServer fail unless Insecure is set,
// which is meant for tests and loopback only; an insecure server checks
// the cluster id but cannot authenticate senders.
//
// # Concurrency
//
// Every exported method of Transport and Server is safe for concurrent use.
// Send is called from raftnode's Process; Reporter methods are called from
// the transport's own goroutines and from Send, which raftnode allows.
// Close stops every worker and waits for it.
package transport
