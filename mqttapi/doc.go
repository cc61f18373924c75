// Package mqttapi ingests MQTT: it subscribes to a broker (MQTT 5) and
// writes the points of the messages it receives into a backend.Backend,
// a storage node in practice. docs/mqtt.md is the user-facing
// specification; this comment is the summary the code is held to.
//
// # Delivery
//
// Subscriptions are QoS 1 in a persistent session (clean start off, a
// session expiry interval), so the broker keeps the subscriptions and
// queues messages while the node is away. Acknowledgements are manual: a
// PUBLISH is acknowledged (PUBACK) only after Backend.Write returned
// without error for its points, which on a node means they are in an
// fsynced WAL record. A node killed at any moment therefore loses nothing
// the broker holds: what was not acknowledged is sent again when the
// session resumes. What was stored but not yet acknowledged is stored a
// second time; the points are the same (series, timestamp, value) and
// the node keeps one sample per series and timestamp (last write wins),
// so nothing is duplicated.
//
// While the backend refuses writes for now (overloaded, unavailable,
// timeout) the messages at hand are kept unacknowledged and the write is
// retried with exponential backoff; the broker's flow control (Receive
// Maximum) holds further messages back meanwhile.
//
// A message that cannot be stored because of what it holds (a payload
// that is not its format, a value that is not a number, a series over the
// limits, points the node refuses as too old) is counted, logged at most
// every few seconds per kind of problem with its topic and reason, and
// acknowledged: redelivering it would fail the same way forever and hold
// back every message after it.
//
// # Flow
//
//	paho routing goroutine ──► in (capacity ReceiveMaximum) ──► ingest goroutine:
//	  take the messages at hand ─► decode each (format of the first matching
//	  subscription) ─► one Backend.Write ─► acknowledge each, in arrival order
//
// Acknowledgements leave in the order the messages arrived (MQTT requires
// it; paho holds back an acknowledgement until those before it are
// released).
//
// # Formats
//
// InfluxDB line protocol (the parser and limits of httpapi/influx), JSON
// with a configurable mapping (JSONMapping), and Sparkplug B (protobuf
// payloads read field by field; aliases learnt from NBIRTH and DBIRTH).
// Every decoder is bounded: payload bytes (MaxPayloadBytes, also
// announced to the broker as the Maximum Packet Size and enforced on the
// connection before a packet is allocated), points per message
// (MaxPointsPerMessage), labels per series (Limits), and Sparkplug alias
// tables (MaxAliasBytes).
//
// # Concurrency
//
// An Adapter is run once (Run); its decoders and the Sparkplug alias
// tables are used by its ingest goroutine only. Connected and Pending are
// safe for concurrent use.
package mqttapi
