package prom

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	pmodel "github.com/prometheus/common/model"

	nlabels "github.com/tributarydb/tributary/node/labels"
)

// The status endpoints a Prometheus server answers for Grafana, load
// balancers and dashboards, answered truthfully for Tributary: what it
// knows is reported in Prometheus's shapes, what it does not do (scrape)
// is reported as empty.

// defaultTSDBStatusLimit is how many entries each top list of
// /api/v1/status/tsdb holds unless limit says otherwise (Prometheus's
// default).
const defaultTSDBStatusLimit = 10

// nameCount is one {"name":..,"value":..} entry of a top list.
type nameCount struct {
	name  string
	value int64
}

// tsdbStats are the figures of /api/v1/status/tsdb.
type tsdbStats struct {
	numSeries, numLabelPairs int64
	byMetric, byLabelName    []nameCount // series per metric; values per label name
	memByLabelName, byPair   []nameCount // bytes of values per label name; series per name=value
}

// top sorts counts by value (descending, then name) and keeps limit.
func top(m map[string]int64, limit int) []nameCount {
	out := make([]nameCount, 0, len(m))
	for k, v := range m {
		out = append(out, nameCount{k, v})
	}
	slices.SortFunc(out, func(a, b nameCount) int {
		return cmp.Or(cmp.Compare(b.value, a.value), strings.Compare(a.name, b.name))
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// computeTSDBStats counts the series list as Prometheus's head does.
func computeTSDBStats(list []nlabels.Labels, limit int) tsdbStats {
	byMetric := map[string]int64{}
	byPair := map[string]int64{}
	values := map[string]map[string]struct{}{}
	for _, ls := range list {
		for _, l := range ls {
			if l.Name == "__name__" {
				byMetric[l.Value]++
			}
			byPair[l.Name+"="+l.Value]++
			vs := values[l.Name]
			if vs == nil {
				vs = map[string]struct{}{}
				values[l.Name] = vs
			}
			vs[l.Value] = struct{}{}
		}
	}
	byName := map[string]int64{}
	mem := map[string]int64{}
	for name, vs := range values {
		byName[name] = int64(len(vs))
		for v := range vs {
			mem[name] += int64(len(v))
		}
	}
	return tsdbStats{
		numSeries: int64(len(list)), numLabelPairs: int64(len(byPair)),
		byMetric: top(byMetric, limit), byLabelName: top(byName, limit),
		memByLabelName: top(mem, limit), byPair: top(byPair, limit),
	}
}

func appendNameCounts(b []byte, key string, list []nameCount) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, `":`...)
	return appendArray(b, list, func(b []byte, c nameCount) []byte {
		b = append(b, `{"name":`...)
		b = appendString(b, c.name)
		b = append(b, `,"value":`...)
		b = strconv.AppendInt(b, c.value, 10)
		return append(b, '}')
	})
}

// serveTSDBStatus answers from the series index (a coordinator's catalog):
// every series matching {__name__=~".+"}, up to --max-series-per-query;
// past that the figures are of the first series and a warning says so.
// The head's chunk count and time range are not reported: Tributary's
// index does not keep them.
func (a *API) serveTSDBStatus(w http.ResponseWriter, r *http.Request) {
	if e := a.parseForm(w, r); e != nil {
		a.fail(w, e)
		return
	}
	limit := defaultTSDBStatusLimit
	if s := r.FormValue("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 10_000 {
			a.fail(w, invalidParam("limit", fmt.Errorf("%q is not a number from 1 to 10000", s)))
			return
		}
		limit = n
	}
	all, err := nlabels.NewMatcher(nlabels.MatchRegexp, "__name__", ".+")
	if err != nil {
		panic("BUG: " + err.Error())
	}
	maxSeries := a.cfg.Limits.MaxSeriesPerQuery
	list, err := a.b.Series(r.Context(), []*nlabels.Matcher{all}, maxSeries+1)
	if err != nil {
		a.fail(w, classifyStorage(err))
		return
	}
	var warn []string
	if len(list) > maxSeries {
		list = list[:maxSeries]
		warn = []string{fmt.Sprintf("more than %d series (--max-series-per-query): the figures are those of the first %d", maxSeries, maxSeries)}
	}
	st := computeTSDBStats(list, limit)
	respond(w, r, func(b []byte) []byte {
		b = append(b, `{"headStats":{"numSeries":`...)
		b = strconv.AppendInt(b, st.numSeries, 10)
		b = append(b, `,"numLabelPairs":`...)
		b = strconv.AppendInt(b, st.numLabelPairs, 10)
		b = append(b, '}')
		b = appendNameCounts(b, "seriesCountByMetricName", st.byMetric)
		b = appendNameCounts(b, "labelValueCountByLabelName", st.byLabelName)
		b = appendNameCounts(b, "memoryInBytesByLabelName", st.memByLabelName)
		b = appendNameCounts(b, "seriesCountByLabelValuePair", st.byPair)
		return append(b, '}')
	}, warn, nil)
}

// serveFlags answers the process's command-line flags (Options.Flags),
// every flag with its value in effect, as Prometheus lists its own.
func (a *API) serveFlags(w http.ResponseWriter, r *http.Request) {
	names := slices.Sorted(maps.Keys(a.opts.Flags))
	respond(w, r, func(b []byte) []byte {
		b = append(b, '{')
		for i, n := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, n)
			b = append(b, ':')
			b = appendString(b, a.opts.Flags[n])
		}
		return append(b, '}')
	}, nil, nil)
}

// serveRuntimeInfo answers Prometheus's runtime information fields that
// mean something here. There is no configuration file to reload, so the
// "configuration" is the one the process started with.
func (a *API) serveRuntimeInfo(w http.ResponseWriter, r *http.Request) {
	cwd, err := os.Getwd()
	if err != nil {
		cwd = "<error: " + err.Error() + ">"
	}
	gogc := os.Getenv("GOGC")
	limit := debug.SetMemoryLimit(-1)
	respond(w, r, func(b []byte) []byte {
		b = append(b, `{"startTime":`...)
		b = appendString(b, a.started.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
		b = append(b, `,"CWD":`...)
		b = appendString(b, cwd)
		b = append(b, `,"reloadConfigSuccess":true,"lastConfigTime":`...)
		b = appendString(b, a.started.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
		b = append(b, `,"goroutineCount":`...)
		b = strconv.AppendInt(b, int64(runtime.NumGoroutine()), 10)
		b = append(b, `,"GOMAXPROCS":`...)
		b = strconv.AppendInt(b, int64(runtime.GOMAXPROCS(0)), 10)
		b = append(b, `,"GOMEMLIMIT":`...)
		b = strconv.AppendInt(b, limit, 10)
		b = append(b, `,"GOGC":`...)
		b = appendString(b, gogc)
		b = append(b, `,"GODEBUG":`...)
		b = appendString(b, os.Getenv("GODEBUG"))
		b = append(b, `,"storageRetention":`...)
		b = appendString(b, a.retentionText())
		return append(b, '}')
	}, nil, nil)
}

// retentionText describes the raw retention from the flags, if known.
func (a *API) retentionText() string {
	if v, ok := a.opts.Flags["retention-raw"]; ok {
		return v + " (raw samples; rollups are kept longer, see the retention-1h and retention-1d flags)"
	}
	return "see the coordinator's fleet configuration"
}

// serveConfig answers an honest configuration: Tributary reads no
// Prometheus configuration file and scrapes nothing; the YAML says so,
// lists the rule files being evaluated (--rules) and the query settings
// that apply.
func (a *API) serveConfig(w http.ResponseWriter, r *http.Request) {
	var files []string
	interval := "1m"
	if src := a.ruleSource(); src != nil {
		for _, g := range src.RuleGroups() {
			if !slices.Contains(files, g.File()) {
				files = append(files, g.File())
			}
			interval = pmodel.Duration(g.Interval()).String()
		}
	}
	var y strings.Builder
	y.WriteString("# Tributary reads no Prometheus configuration file: it scrapes nothing.\n")
	y.WriteString("# Samples arrive over remote_write and the other write APIs; queries run on\n")
	y.WriteString("# the PromQL engine with these settings, rules (--rules) on the same engine.\n")
	y.WriteString("# The query settings in effect (flags, not configuration keys):\n")
	fmt.Fprintf(&y, "#   lookback delta %s, query timeout %s, at most %d samples in memory per query,\n",
		a.opts.LookbackDelta, a.opts.QueryTimeout, a.opts.MaxSamples)
	fmt.Fprintf(&y, "#   %d queries at once, delayed name removal %t, remote_read sample limit %d.\n",
		a.opts.MaxConcurrentQueries, !a.opts.DisableDelayedNameRemoval, a.opts.MaxReadSamples)
	fmt.Fprintf(&y, "global:\n  evaluation_interval: %s\n", interval)
	y.WriteString("scrape_configs: []\n")
	if len(files) == 0 {
		y.WriteString("rule_files: []\n")
	} else {
		y.WriteString("rule_files:\n")
		for _, f := range files {
			fmt.Fprintf(&y, "  - %q\n", f)
		}
	}
	y.WriteString("remote_write: []\nremote_read: []\n")
	yaml := y.String()
	respond(w, r, func(b []byte) []byte {
		b = append(b, `{"yaml":`...)
		b = appendString(b, yaml)
		return append(b, '}')
	}, nil, nil)
}

// serveTargets answers that there are no scrape targets: Tributary
// scrapes nothing (Prometheus, Telegraf and the other agents send to it).
func (*API) serveTargets(w http.ResponseWriter, r *http.Request) {
	respond(w, r, func(b []byte) []byte {
		return append(b, `{"activeTargets":[],"droppedTargets":[],"droppedTargetCounts":{}}`...)
	}, nil, nil)
}
