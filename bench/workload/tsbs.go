package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
)

// The TSBS "cpu-only" workload, written as InfluxDB line protocol.
//
// Each host is one line per timestamp:
//
//	cpu,hostname=host_0,region=eu-west-1,datacenter=eu-west-1b,rack=41,os=Ubuntu16.04LTS,arch=x64,team=NYC,service=7,service_version=1,service_environment=staging usage_user=58i,usage_system=2i,usage_idle=24i,usage_nice=61i,usage_iowait=22i,usage_irq=63i,usage_softirq=6i,usage_steal=44i,usage_guest=80i,usage_guest_nice=38i 1700000000000000000
//
// The measurement is always `cpu`; the ten tags come in the order of
// TSBSCPUTagKeys and the ten integer fields in the order of
// TSBSCPUFieldNames; the timestamp is in nanoseconds. Nothing in a line
// needs escaping. A node that maps each field to a series
// `<measurement>_<field>` stores ten series per host.
//
// Tag values are drawn once per host from the same value sets as TSBS's
// devops use case (nine regions with their datacenters, 100 racks, three
// OS versions, two architectures, four teams, 20 services, two service
// versions, three environments). Each field is a random walk clamped to
// [0, 100]: it starts at a uniform value and moves by a standard normal
// step at every row; a line carries the walk's value truncated to an
// integer.
//
// Every host draws from its own random stream seeded by (seed, host), so a
// host's tags and values do not depend on how hosts are split between
// clients.

// TSBSCPUTagKeys are the tag keys of every cpu line, in line order.
var TSBSCPUTagKeys = [...]string{
	"hostname", "region", "datacenter", "rack", "os", "arch",
	"team", "service", "service_version", "service_environment",
}

// TSBSCPUFieldNames are the fields of every cpu line, in line order.
var TSBSCPUFieldNames = [TSBSCPUFields]string{
	"usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait",
	"usage_irq", "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice",
}

// TSBSCPUMeasurement is the measurement of every line.
const TSBSCPUMeasurement = "cpu"

// TSBSCPUFields is the number of fields, and so of points, in a line.
const TSBSCPUFields = 10

// Bounds of the cpu fields' clamped random walks.
const (
	tsbsMinValue = 0.0
	tsbsMaxValue = 100.0
)

// tsbsRegions are the regions hosts are placed in, each with its
// datacenters.
var tsbsRegions = [...]struct {
	name        string
	datacenters []string
}{
	{"us-east-1", []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1e"}},
	{"us-west-1", []string{"us-west-1a", "us-west-1b"}},
	{"us-west-2", []string{"us-west-2a", "us-west-2b", "us-west-2c"}},
	{"eu-west-1", []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}},
	{"eu-central-1", []string{"eu-central-1a", "eu-central-1b"}},
	{"ap-southeast-1", []string{"ap-southeast-1a", "ap-southeast-1b"}},
	{"ap-southeast-2", []string{"ap-southeast-2a", "ap-southeast-2b"}},
	{"ap-northeast-1", []string{"ap-northeast-1a", "ap-northeast-1c"}},
	{"sa-east-1", []string{"sa-east-1a", "sa-east-1b", "sa-east-1c"}},
}

var (
	tsbsOSes         = []string{"Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"}
	tsbsArches       = []string{"x64", "x86"}
	tsbsTeams        = []string{"SF", "NYC", "LON", "CHI"}
	tsbsEnvironments = []string{"production", "staging", "test"}
)

const (
	tsbsRacks           = 100
	tsbsServices        = 20
	tsbsServiceVersions = 2
)

// TSBSCPUOptions configures the TSBS cpu-only workload.
type TSBSCPUOptions struct {
	// Hosts is the number of hosts, named host_0 … host_{Hosts-1}.
	Hosts int
	// Rows is the number of lines (timestamps) per host.
	Rows int
	// StartNs is the timestamp of every host's first line, in Unix
	// nanoseconds.
	StartNs int64
	// IntervalNs is the time between two lines of a host.
	IntervalNs int64
	// Seed selects the random streams; equal options give equal lines.
	Seed uint64
}

// Validate reports every problem with the options.
func (o TSBSCPUOptions) Validate() error {
	errs := []error{positive("hosts", o.Hosts, ""), positive("rows", o.Rows, ""), positive("interval", o.IntervalNs, " ns")}
	if o.StartNs < 0 {
		errs = append(errs, fmt.Errorf("start must not be before 1970, got %d ns", o.StartNs))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if o.Rows > 1 && o.IntervalNs > (maxInt64-o.StartNs)/int64(o.Rows-1) {
		return fmt.Errorf("%d rows every %d ns from %d ns overflow int64 nanoseconds", o.Rows, o.IntervalNs, o.StartNs)
	}
	return nil
}

// TSBSCPU is the TSBS cpu-only workload: a fixed set of hosts, each with
// ten tags and ten integer fields sampled at a regular interval. Build one
// with NewTSBSCPU; read its lines through TSBSCPUStreams.
//
// A TSBSCPU is immutable and safe for concurrent use.
type TSBSCPU struct {
	opts TSBSCPUOptions
	// hosts[h] is host h's tags and line prefix.
	// INVARIANT: never modified after construction.
	hosts []tsbsHost
}

// tsbsHost is what stays fixed for a host.
type tsbsHost struct {
	index int
	tags  [len(TSBSCPUTagKeys)]string
	// prefix is "cpu,<tags> ": everything before the first field.
	prefix []byte
}

// NewTSBSCPU returns the workload that opts describes.
func NewTSBSCPU(opts TSBSCPUOptions) (*TSBSCPU, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("tsbs cpu workload: %w", err)
	}
	g := &TSBSCPU{opts: opts, hosts: make([]tsbsHost, opts.Hosts)}
	for h := range g.hosts {
		st := newTSBSHostState(opts.Seed, h)
		g.hosts[h] = st.host
	}
	return g, nil
}

const maxInt64 = 1<<63 - 1

// Hosts is the number of hosts.
func (g *TSBSCPU) Hosts() int { return g.opts.Hosts }

// Rows is the number of lines per host.
func (g *TSBSCPU) Rows() int { return g.opts.Rows }

// StartNs is the timestamp of every host's first line.
func (g *TSBSCPU) StartNs() int64 { return g.opts.StartNs }

// IntervalNs is the time between two lines of a host.
func (g *TSBSCPU) IntervalNs() int64 { return g.opts.IntervalNs }

// TimestampNs is the timestamp of row r.
func (g *TSBSCPU) TimestampNs(r int) int64 { return g.opts.StartNs + int64(r)*g.opts.IntervalNs }

// Lines is the number of lines of all hosts together.
func (g *TSBSCPU) Lines() int64 { return int64(g.opts.Hosts) * int64(g.opts.Rows) }

// Points is the number of points (field values) of all hosts together.
func (g *TSBSCPU) Points() int64 { return g.Lines() * TSBSCPUFields }

// HostName is host h's hostname tag, "host_<h>".
func (g *TSBSCPU) HostName(h int) string { return g.hosts[h].tags[0] }

// HostTags returns host h's tags as key/value pairs in line order.
func (g *TSBSCPU) HostTags(h int) [][2]string {
	out := make([][2]string, len(TSBSCPUTagKeys))
	for i, k := range TSBSCPUTagKeys {
		out[i] = [2]string{k, g.hosts[h].tags[i]}
	}
	return out
}

// MaxLineBytes bounds the length of any line of host h, newline included:
// a buffer of n times this holds n of its lines.
func (g *TSBSCPU) MaxLineBytes(h int) int {
	n := len(g.hosts[h].prefix)
	for _, f := range TSBSCPUFieldNames {
		n += len(f) + len("=100i,")
	}
	n += len(strconv.FormatInt(g.TimestampNs(g.opts.Rows-1), 10)) + 1 // the last ',' became ' '; +1 for '\n'
	return n
}

// FieldValues regenerates every value of field f (an index into
// TSBSCPUFieldNames) of host h, one per row: what the host's lines carry,
// for checking query answers. It costs a pass over the host's rows.
func (g *TSBSCPU) FieldValues(h, f int) []int64 {
	if f < 0 || f >= TSBSCPUFields {
		panic(fmt.Sprintf("BUG: field index %d out of range", f))
	}
	st := newTSBSHostState(g.opts.Seed, h)
	out := make([]int64, g.opts.Rows)
	for r := range out {
		out[r] = int64(st.walks[f])
		st.advance()
	}
	return out
}

// tsbsHostState is a host and its walks' current values.
type tsbsHostState struct {
	host  tsbsHost
	rng   *rand.Rand
	walks [TSBSCPUFields]float64
}

// newTSBSHostState draws host h's tags and its walks' starting values from
// the host's own stream.
func newTSBSHostState(seed uint64, h int) *tsbsHostState {
	rng := rand.New(newRand(seed, h))
	region := tsbsRegions[rng.IntN(len(tsbsRegions))]
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	st := &tsbsHostState{rng: rng}
	st.host.index = h
	st.host.tags = [...]string{
		"host_" + strconv.Itoa(h),
		region.name,
		pick(region.datacenters),
		strconv.Itoa(rng.IntN(tsbsRacks)),
		pick(tsbsOSes),
		pick(tsbsArches),
		pick(tsbsTeams),
		strconv.Itoa(rng.IntN(tsbsServices)),
		strconv.Itoa(rng.IntN(tsbsServiceVersions)),
		pick(tsbsEnvironments),
	}
	p := []byte(TSBSCPUMeasurement)
	for i, k := range TSBSCPUTagKeys {
		p = append(p, ',')
		p = append(p, k...)
		p = append(p, '=')
		p = append(p, st.host.tags[i]...)
	}
	st.host.prefix = append(p, ' ')
	for f := range st.walks {
		st.walks[f] = tsbsMinValue + rng.Float64()*(tsbsMaxValue-tsbsMinValue)
	}
	return st
}

// advance moves every walk one step.
func (st *tsbsHostState) advance() {
	for f := range st.walks {
		v := st.walks[f] + st.rng.NormFloat64()
		st.walks[f] = min(max(v, tsbsMinValue), tsbsMaxValue)
	}
}

// tsbsFieldKeys[f] is ",<field>=" (without the comma for the first field).
var tsbsFieldKeys = func() [TSBSCPUFields][]byte {
	var out [TSBSCPUFields][]byte
	for f, name := range TSBSCPUFieldNames {
		if f > 0 {
			out[f] = append(out[f], ',')
		}
		out[f] = append(append(out[f], name...), '=')
	}
	return out
}()

// appendLine appends the host's current line at timestamp ts.
func (st *tsbsHostState) appendLine(dst []byte, ts int64) []byte {
	dst = append(dst, st.host.prefix...)
	for f, v := range st.walks {
		dst = append(dst, tsbsFieldKeys[f]...)
		dst = strconv.AppendInt(dst, int64(v), 10)
		dst = append(dst, 'i')
	}
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, ts, 10)
	return append(dst, '\n')
}

// TSBSCPUStream yields the lines of a contiguous group of hosts in time
// order, as TSBS writes them: every host's line of the first row, then of
// the second, and so on. Each host belongs to one stream, so a writer per
// stream writes each series in time order.
//
// A TSBSCPUStream is not safe for concurrent use; distinct streams share no
// mutable state.
type TSBSCPUStream struct {
	g      *TSBSCPU
	states []*tsbsHostState
	row    int // row of the next line
	next   int // index in states of the next line's host
}

// Stream returns a stream of the lines of hosts [first, end).
func (g *TSBSCPU) Stream(first, end int) *TSBSCPUStream {
	if first < 0 || end > g.opts.Hosts || first >= end {
		panic(fmt.Sprintf("BUG: host range [%d, %d) of %d hosts", first, end, g.opts.Hosts))
	}
	s := &TSBSCPUStream{g: g, states: make([]*tsbsHostState, end-first)}
	for i := range s.states {
		s.states[i] = newTSBSHostState(g.opts.Seed, first+i)
	}
	return s
}

// Remaining is the number of lines the stream has not yet yielded.
func (s *TSBSCPUStream) Remaining() int64 {
	return int64(s.g.opts.Rows-s.row)*int64(len(s.states)) - int64(s.next)
}

// MaxLineBytes bounds the length of any line of the stream.
func (s *TSBSCPUStream) MaxLineBytes() int {
	n := 0
	for _, st := range s.states {
		n = max(n, s.g.MaxLineBytes(st.host.index))
	}
	return n
}

// AppendLines appends the stream's next n lines (fewer at its end) to dst
// and returns dst and the number of lines appended, 0 once the stream is
// exhausted. It allocates only when dst must grow.
func (s *TSBSCPUStream) AppendLines(dst []byte, n int) ([]byte, int) {
	done := 0
	for done < n && s.row < s.g.opts.Rows {
		st := s.states[s.next]
		dst = st.appendLine(dst, s.g.TimestampNs(s.row))
		st.advance()
		done++
		if s.next++; s.next == len(s.states) {
			s.next = 0
			s.row++
		}
	}
	return dst, done
}
