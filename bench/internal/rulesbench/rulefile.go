package rulesbench

import (
	"fmt"
	"strings"
	"time"
)

// The live series are the sensor workload's (bench/workload): eight
// sensors to a device, their metric names cycling through these four, and
// the label edge=LiveEdge that the live feed adds.
const (
	sensorsPerDevice = 8
	LiveEdge         = "live"
	// QueryOffset is the group's query_offset: a rule evaluated at t reads
	// the data as of t-QueryOffset and records its samples at that time,
	// by which the live feed (one write a second) has written everything
	// up to it, so a recorded value can be checked against its expression.
	QueryOffset = 5 * time.Second
)

var metricNames = [...]string{"temperature", "humidity", "pressure", "voltage"}

// RecordName is the series a rule over metric writes.
func RecordName(metric string) string { return "device:" + metric + ":avg1m" }

// Plan lays out the rules over the live series: rule i averages, per
// device, the one-minute average of metric metricNames[i%4] of the devices
// d with d % (rules/4) == i/4. Every live series is read by exactly one
// rule, and every rule reads the same number of series, give or take a
// device.
type Plan struct {
	Rules   int
	Devices int
}

// NewPlan checks that rules and series fit the layout: series whole
// devices of eight, rules a multiple of four and at most four per device.
func NewPlan(rules, series int) (Plan, error) {
	switch {
	case series <= 0 || series%sensorsPerDevice != 0:
		return Plan{}, fmt.Errorf("series must be a positive multiple of %d (whole devices), got %d", sensorsPerDevice, series)
	case rules <= 0 || rules%len(metricNames) != 0:
		return Plan{}, fmt.Errorf("rules must be a positive multiple of %d (one per metric name), got %d", len(metricNames), rules)
	case rules/len(metricNames) > series/sensorsPerDevice:
		return Plan{}, fmt.Errorf("%d rules over %d devices: at most %d rules (four per device)", rules, series/sensorsPerDevice, 4*series/sensorsPerDevice)
	}
	return Plan{Rules: rules, Devices: series / sensorsPerDevice}, nil
}

func (p Plan) blocks() int { return p.Rules / len(metricNames) }

// Device names device d as the sensor workload does.
func Device(d int) string { return fmt.Sprintf("dev-%04d", d) }

// RuleDevices are the devices rule i reads.
func (p Plan) RuleDevices(i int) []int {
	var ds []int
	for d := i / len(metricNames); d < p.Devices; d += p.blocks() {
		ds = append(ds, d)
	}
	return ds
}

// Expr is rule i's expression.
func (p Plan) Expr(i int) string {
	var names []string
	for _, d := range p.RuleDevices(i) {
		names = append(names, Device(d))
	}
	return p.expr(metricNames[i%len(metricNames)], `device=~"`+strings.Join(names, "|")+`"`)
}

// DeviceExpr is the expression of the rule that records metric for
// device d, restricted to that device: what its recorded series must
// equal.
func (p Plan) DeviceExpr(metric string, d int) string {
	return p.expr(metric, `device="`+Device(d)+`"`)
}

func (p Plan) expr(metric, deviceMatcher string) string {
	return fmt.Sprintf(`avg by (device) (avg_over_time(%s{edge=%q,%s}[1m]))`, metric, LiveEdge, deviceMatcher)
}

// OutputSeries is how many series the rules record: one per device and
// metric name.
func (p Plan) OutputSeries() int { return p.Devices * len(metricNames) }

// GroupName is the one rule group's name.
const GroupName = "bench"

// File is the rule file: one group of p.Rules recording rules evaluated
// every interval.
func (p Plan) File(interval time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "groups:\n  - name: %s\n    interval: %s\n    query_offset: %s\n    rules:\n", GroupName, interval, QueryOffset)
	for i := range p.Rules {
		fmt.Fprintf(&b, "      - record: %s\n        expr: '%s'\n", RecordName(metricNames[i%len(metricNames)]), p.Expr(i))
	}
	return b.String()
}
