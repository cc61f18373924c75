// Package e2e holds the end-to-end tests of the cloud side: they build the
// tributary binary once (TestMain), run three coordinators and an edge as
// real processes on loopback ports, write through the edge like a client,
// inject faults (SIGKILL of a leader or of the edge; link cuts, half-open
// links and lost acknowledgements through a fault proxy; a tiny
// replication budget; a damaged WAL segment) and check the answers of
// every coordinator against a ledger of acknowledged points. The harness is in
// e2e/internal/cluster; the package itself has no non-test code.
//
// The tests are skipped under -short. Each test owns its processes and
// kills them in its cleanup, so tests may not share a fleet; they do not
// run in parallel (a busy two-core machine is the target).
package e2e
