// Package cluster runs a Tributary fleet as real processes for the
// end-to-end tests: coordinators and edges started from the built binary,
// stopped with SIGTERM or killed with SIGKILL, restarted on the same data
// directory and ports; plus a load generator that keeps a ledger of every
// acknowledged point, a checker that compares what a coordinator answers
// with that ledger, and FaultProxy, an in-process TCP proxy (toxiproxy as
// a library) that cuts, heals and degrades the link between an edge and a
// coordinator's intake.
//
// Every process writes its log to a file under the test's temporary
// directory; when the test fails, the last lines of each log are printed.
// On Linux a child is killed by the kernel when the test process dies, so
// a timed-out test leaves no coordinator running.
//
// Concurrency: a Process and a Cluster are safe for concurrent use (the
// writer goroutine reads addresses while the test kills and restarts
// processes). A Ledger and a FaultProxy are safe for concurrent use. A
// Writer is started once and stopped once.
package cluster
