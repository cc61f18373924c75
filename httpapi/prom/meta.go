package prom

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	pmodel "github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tributarydb/tributary/backend"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// The metadata endpoints answer from the backend's series index. start
// and end restrict them to series with samples in the range when the
// backend knows when series had samples (backend.RangeLister: a node, to
// the hour); otherwise series of any time are listed and a warning says
// that start and end were not applied. What the backend says may be
// missing (backend.Warn: a coordinator's edges whose newest series it may
// lack) is sent as warnings.

// metaReq is what series, labels and label values share.
type metaReq struct {
	limit int
	sets  [][]*nlabels.Matcher
	// start and end (ms) restrict the listing when ranged is set.
	start, end int64
	ranged     bool
}

// errRangeNotApplied is the warning of a listing whose backend cannot
// restrict it to start and end.
const errRangeNotApplied = "start and end are not applied: this server's series index does not record when series had samples, so series of any time are listed"

// metaParams parses what series, labels and label values share.
func (a *API) metaParams(w http.ResponseWriter, r *http.Request) (*metaReq, *apiError) {
	if e := a.parseForm(w, r); e != nil {
		return nil, e
	}
	limit, err := parseLimit(r.FormValue("limit"))
	if err != nil {
		return nil, invalidParam("limit", err)
	}
	mr := &metaReq{limit: limit, start: minTime.UnixMilli(), end: maxTime.UnixMilli()}
	for _, p := range []struct {
		name string
		dst  *int64
	}{{"start", &mr.start}, {"end", &mr.end}} {
		if s := r.FormValue(p.name); s != "" {
			t, err := parseTime(s)
			if err != nil {
				return nil, invalidParam(p.name, err)
			}
			*p.dst = t.UnixMilli()
		}
	}
	if mr.end < mr.start {
		return nil, invalidParam("end", errors.New("end timestamp must not be before start time"))
	}
	mr.ranged = mr.start > minTime.UnixMilli() || mr.end < maxTime.UnixMilli()
	psets, err := parseMatchers(r.Form["match[]"])
	if err != nil {
		return nil, invalidParam("match[]", err)
	}
	for _, ms := range psets {
		nms, err := a.nodeMatchers(ms)
		if err != nil {
			return nil, invalidParam("match[]", err)
		}
		mr.sets = append(mr.sets, nms)
	}
	return mr, nil
}

// lister returns the backend's range listings when the request has a
// range and the backend can apply it, and the warnings to send.
func (a *API) lister(mr *metaReq) (backend.RangeLister, []string) {
	if !mr.ranged {
		return nil, nil
	}
	if rl, ok := a.b.(backend.RangeLister); ok {
		return rl, nil
	}
	return nil, []string{errRangeNotApplied}
}

// truncate cuts a sorted list to limit, saying so in a warning.
func truncate[T any](list []T, limit int) ([]T, []string) {
	if limit > 0 && len(list) > limit {
		return list[:limit], []string{"results truncated due to limit"}
	}
	return list, nil
}

func (a *API) serveSeries(w http.ResponseWriter, r *http.Request) {
	mr, e := a.metaParams(w, r)
	if e != nil {
		a.fail(w, e)
		return
	}
	if len(mr.sets) == 0 {
		a.fail(w, badData("no match[] parameter provided"))
		return
	}
	rl, warn := a.lister(mr)
	ctx, warns := backend.WithWarnings(r.Context())
	maxSeries := a.cfg.Limits.MaxSeriesPerQuery
	byKey := map[string]nlabels.Labels{}
	for _, ms := range mr.sets {
		// One more than the limit tells "exactly at the limit" from "over".
		var list []nlabels.Labels
		var err error
		if rl != nil {
			list, err = rl.SeriesInRange(ctx, ms, mr.start, mr.end, maxSeries+1)
		} else {
			list, err = a.b.Series(ctx, ms, maxSeries+1)
		}
		if err != nil {
			a.fail(w, classifyStorage(err))
			return
		}
		for _, ls := range list {
			byKey[string(ls.AppendKey(nil))] = ls
		}
		if len(byKey) > maxSeries {
			a.fail(w, &apiError{typ: errExec, status: http.StatusUnprocessableEntity,
				msg: fmt.Sprintf("more than %d series match; narrow match[] or use limit", maxSeries)})
			return
		}
	}
	out := make([]labels.Labels, 0, len(byKey))
	sb := labels.NewScratchBuilder(8)
	for _, ls := range byKey {
		sb.Reset()
		for _, l := range ls {
			sb.Add(l.Name, l.Value)
		}
		out = append(out, sb.Labels())
	}
	slices.SortFunc(out, labels.Compare)
	out, cut := truncate(out, mr.limit)
	warn = append(append(warn, warns.List()...), cut...)
	respond(w, r, func(b []byte) []byte { return appendArray(b, out, appendLabels) }, warn, nil)
}

func (a *API) serveLabels(w http.ResponseWriter, r *http.Request) {
	a.serveStrings(w, r, func(ctx context.Context, rl backend.RangeLister, ms []*nlabels.Matcher, mr *metaReq) ([]string, error) {
		if rl != nil {
			return rl.LabelNamesInRange(ctx, ms, mr.start, mr.end)
		}
		return a.b.LabelNames(ctx, ms)
	})
}

func (a *API) serveLabelValues(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if strings.HasPrefix(name, "U__") {
		name = pmodel.UnescapeName(name, pmodel.ValueEncodingEscaping)
	}
	if name == "" || !utf8.ValidString(name) {
		a.fail(w, badData(fmt.Sprintf("invalid label name: %q", name)))
		return
	}
	a.serveStrings(w, r, func(ctx context.Context, rl backend.RangeLister, ms []*nlabels.Matcher, mr *metaReq) ([]string, error) {
		if rl != nil {
			return rl.LabelValuesInRange(ctx, name, ms, mr.start, mr.end)
		}
		return a.b.LabelValues(ctx, name, ms)
	})
}

// serveStrings answers a label names or label values request: list runs
// once for each match[] set (rl is nil where the backend cannot list a
// time range or none was asked for), and the merged, sorted answer is cut
// to the request's limit.
func (a *API) serveStrings(w http.ResponseWriter, r *http.Request, list func(ctx context.Context, rl backend.RangeLister, ms []*nlabels.Matcher, mr *metaReq) ([]string, error)) {
	mr, e := a.metaParams(w, r)
	if e != nil {
		a.fail(w, e)
		return
	}
	rl, warn := a.lister(mr)
	ctx, warns := backend.WithWarnings(r.Context())
	out, err := a.union(mr.sets, func(ms []*nlabels.Matcher) ([]string, error) {
		return list(ctx, rl, ms, mr)
	})
	if err != nil {
		a.fail(w, classifyStorage(err))
		return
	}
	out, cut := truncate(out, mr.limit)
	warn = append(append(warn, warns.List()...), cut...)
	respond(w, r, func(b []byte) []byte { return appendStrings(b, out) }, warn, nil)
}

// union runs list for each matcher set (once with none when there are
// none) and merges the sorted answers.
func (a *API) union(sets [][]*nlabels.Matcher, list func([]*nlabels.Matcher) ([]string, error)) ([]string, error) {
	if len(sets) == 0 {
		sets = [][]*nlabels.Matcher{nil}
	}
	var out []string
	for _, ms := range sets {
		got, err := list(ms)
		if err != nil {
			return nil, err
		}
		out = append(out, got...)
	}
	if len(sets) > 1 {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	return out, nil
}

// serveBuildInfo answers like a Prometheus server of Options.Version
// without feature flags, which Grafana reads as "Prometheus".
func (a *API) serveBuildInfo(w http.ResponseWriter, r *http.Request) {
	respond(w, r, func(b []byte) []byte {
		b = append(b, `{"version":`...)
		b = appendString(b, a.opts.Version)
		b = append(b, `,"revision":"tributary","branch":"","buildUser":"","buildDate":"","goVersion":`...)
		b = appendString(b, runtime.Version())
		return append(b, '}')
	}, nil, nil)
}

// serveExemplars validates the query and answers that there are none:
// exemplars are not stored.
func (a *API) serveExemplars(w http.ResponseWriter, r *http.Request) {
	if e := a.parseForm(w, r); e != nil {
		a.fail(w, e)
		return
	}
	for _, p := range []string{"start", "end"} {
		if s := r.FormValue(p); s != "" {
			if _, err := parseTime(s); err != nil {
				a.fail(w, invalidParam(p, err))
				return
			}
		}
	}
	if _, err := parser.ParseExpr(r.FormValue("query")); err != nil {
		a.fail(w, invalidParam("query", err))
		return
	}
	respond(w, r, func(b []byte) []byte { return append(b, "[]"...) }, nil, nil)
}

func (a *API) serveFormatQuery(w http.ResponseWriter, r *http.Request) {
	if e := a.parseForm(w, r); e != nil {
		a.fail(w, e)
		return
	}
	expr, err := parser.ParseExpr(r.FormValue("query"))
	if err != nil {
		a.fail(w, invalidParam("query", err))
		return
	}
	pretty := expr.Pretty(0)
	respond(w, r, func(b []byte) []byte { return appendString(b, pretty) }, nil, nil)
}

// serveMetadata answers from the metadata received over remote_write:
// {"<metric>":[{"type":..,"help":..,"unit":..}]}, filtered by metric and
// cut by limit (metrics) and limit_per_metric (always 1 entry here).
func (a *API) serveMetadata(w http.ResponseWriter, r *http.Request) {
	if e := a.parseForm(w, r); e != nil {
		a.fail(w, e)
		return
	}
	limit, err := parseLimit(r.FormValue("limit"))
	if err != nil {
		a.fail(w, invalidParam("limit", err))
		return
	}
	perMetric := -1
	if s := r.FormValue("limit_per_metric"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			a.fail(w, invalidParam("limit_per_metric", errors.New("not an integer")))
			return
		}
		perMetric = n
	}
	list := a.meta.list(r.FormValue("metric"), limit)
	respond(w, r, func(b []byte) []byte {
		b = append(b, '{')
		for i, md := range list {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, md.Family)
			b = append(b, ":["...)
			if perMetric != 0 {
				b = append(b, `{"type":`...)
				b = appendString(b, md.Type)
				b = append(b, `,"help":`...)
				b = appendString(b, md.Help)
				b = append(b, `,"unit":`...)
				b = appendString(b, md.Unit)
				b = append(b, '}')
			}
			b = append(b, ']')
		}
		return append(b, '}')
	}, nil, nil)
}

func (a *API) serveNotFound(w http.ResponseWriter, r *http.Request) {
	a.fail(w, &apiError{typ: errNotFound, status: http.StatusNotFound,
		msg: fmt.Sprintf("%s %s is not served here; see the list of supported endpoints in the documentation", r.Method, r.URL.Path)})
}
