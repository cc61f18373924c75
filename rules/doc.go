// Package rules evaluates Prometheus recording and alerting rules over a
// process's own data and sends the alerts to Alertmanagers.
//
// Rule files are in Prometheus's format (groups of recording and alerting
// rules with for, keep_firing_for, labels, annotations and templates) and
// are evaluated by the upstream Prometheus rules package
// (github.com/prometheus/prometheus/rules): the expressions run on the
// PromQL engine and storage.Queryable of the Prometheus query API
// (httpapi/prom), and the samples they produce (a recording rule's series,
// an alerting rule's ALERTS and ALERTS_FOR_STATE) are written through
// backend.Backend.Write like any other write, so on a storage node they
// are in the WAL, replicate to the cloud and get rollups like every
// series.
//
// # Evaluation
//
// Every group is evaluated every --rules-evaluation-interval (or its own
// interval) at slots aligned to the interval, as Prometheus does. In a
// group where no rule reads another's results, the samples of all its
// rules are written together at the end of the evaluation (one backend
// write, one WAL fsync on a node); otherwise each rule's results are one
// write, made before the rules after it run. Rules that neither read nor
// feed another rule run up to Options.MaxConcurrentEvals at a time. An
// evaluation that was due while the process was down is not made up
// afterwards: the first evaluation after a start is the next slot. A slot
// missed while the process runs (an evaluation that took longer than the
// interval) is skipped and counted.
//
// # State across restarts
//
// An alerting rule writes, at each evaluation, ALERTS{alertname, alertstate,
// ...} = 1 for each pending or firing alert and ALERTS_FOR_STATE{alertname,
// ...} = the Unix time in seconds at which the alert became active. After
// a start, once a group has been evaluated twice, the upstream manager
// reads ALERTS_FOR_STATE of the last Options.OutageTolerance back from the
// store and restores the active time of each alert that is still active,
// shifted by the time the process was down, so an alert does not restart
// its `for` from zero (Prometheus's semantics; rules whose `for` is
// shorter than Options.ForGracePeriod are not restored, and an alert whose
// remaining `for` is shorter than the grace period is given the grace
// period). With Options.ExactForRestore (a coordinator that became the raft
// leader and takes over the rules of the one before), the active time is
// then set, at the next evaluation, to the one ALERTS_FOR_STATE stored, as
// it is: a hand-over is not an outage.
//
// # Notification
//
// With Options.Alertmanagers, alerts go to each Alertmanager's v2 API
// (POST /api/v2/alerts) through the upstream notifier: one bounded queue
// per Alertmanager (Options.NotificationQueueCapacity alerts; when it is
// full the oldest are dropped and counted), batches of at most 256
// alerts, a timeout per request. A failed send is not retried by the
// notifier; instead every active alert is sent again every
// Options.ResendDelay until it is resolved (and resolved ones for 15
// minutes), which is how Prometheus retries, so an Alertmanager that was
// unreachable gets the alerts still active when it is back.
//
// # Fleet rule groups
//
// Besides its rule files, a node evaluates the rule groups the fleet's
// catalog pushes to it (those whose edge selector matches its labels;
// package rules/selector): ApplyFleetRules takes the whole set, with the
// version (a raft index) the coordinators sent, and applies it only when
// that version is higher than the one in force. The set is written
// first, atomically (temporary file, fsync, rename, fsync of the
// directory), to Options.FleetRulesFile, which is then loaded with the
// rule files, so that a restarted node evaluates the fleet's groups with
// no coordinator reachable. A set equal to the one in force (a new
// stream's welcome) only moves the version: the rule files are not read
// again. The file is a Prometheus rule file whose
// first line carries the version:
//
//	# tributary fleet rule groups version <decimal raft index>
//	# Written by the node from the fleet's catalog (tributary cluster rules); do not edit.
//	groups:
//	  - name: ...
//
// A file whose first line is not that is not loaded (logged; the next set
// from the coordinators replaces it). The fleet's groups are groups of
// that file: a group of a local rule file with the same name is another
// group (Prometheus keys groups by file and name), evaluated as well.
//
// # Backfill
//
// Backfill evaluates the recording rules of rule files over a past range
// (range queries at the multiples of each group's interval, through an
// Evaluator: the engine in process, or a node's Prometheus API) and writes
// their samples through a WriteFunc. It writes nothing when a series a
// rule can write already holds samples in or after the range.
//
// # Concurrency
//
// A Manager is safe for concurrent use. Each group evaluates in its own
// goroutine (its independent rules up to Options.MaxConcurrentEvals at
// once); Reload, ApplyFleetRules and Stop are serialised.
package rules
