// Package compat holds the compatibility tests of `make compat`: each
// top-level test TestCompat_<Client> starts the real tributary binary on
// loopback ports and drives it with a real third-party client (Debian's
// prometheus, collectd, mosquitto and python3-influxdb, grpcurl built from
// its Go module, TSBS's InfluxDB loader and query runner built from
// bench/tsbs's module) or with requests recorded from one (Grafana 11's,
// under testdata/grafana), and checks the answers.
//
// The tests are skipped unless TRIBUTARY_COMPAT=1 (they need those
// programs, which scripts/deps.sh compat installs). TestMain builds the
// tributary and grpcurl binaries once into a temporary directory; the
// TSBS tools are taken from TRIBUTARY_TSBS_BIN (make compat builds them
// into bin/tsbs) or built by their test.
// compat/report turns `go test -json` output into the table and the
// summary line `make compat` prints.
//
// The tests start processes and use only loopback addresses; they are
// not run in parallel with each other.
package compat
