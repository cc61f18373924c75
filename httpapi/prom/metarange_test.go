package prom

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/prompb"

	"github.com/tributarydb/tributary/backend"
	"github.com/tributarydb/tributary/httpapi"
	nlabels "github.com/tributarydb/tributary/node/labels"
)

// plainBackend hides every method but backend.Backend's, as a backend
// that cannot tell when series had samples.
type plainBackend struct{ backend.Backend }

// TestMeta_StartAndEndRestrictTheListings: series, labels and label
// values list only series with samples between start and end on a node;
// a backend that cannot tell lists everything and says so.
func TestMeta_StartAndEndRestrictTheListings(t *testing.T) {
	e := newTestEnv(t, nil, httpapi.Config{}, Options{})
	now := ms(testNow)
	req := &prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: lbls("__name__", "old_metric", "host", "h0", "zone", "z"), Samples: []prompb.Sample{{Timestamp: now - 5*3600_000, Value: 1}}},
		{Labels: lbls("__name__", "new_metric", "host", "h1"), Samples: []prompb.Sample{{Timestamp: now - 10*60_000, Value: 1}}},
	}}
	e.write(req)
	must(t, e.node.Flush()) // old_metric from the store's rollups, new_metric too
	e.write(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: lbls("__name__", "head_metric", "host", "h2"), Samples: []prompb.Sample{{Timestamp: now - 60_000, Value: 1}}},
	}})
	lastHour := url.Values{"start": {unixParam(now - 3600_000)}, "end": {unixParam(now)}}
	strs := func(env *testEnv, path string, p url.Values) ([]string, []string) {
		t.Helper()
		st, r, body := env.call(http.MethodGet, path, p)
		if st != 200 {
			t.Fatalf("%s: %d %s", path, st, body)
		}
		var out []string
		if strings.HasSuffix(path, "/series") {
			var list []map[string]string
			must(t, json.Unmarshal(r.Data, &list))
			for _, m := range list {
				out = append(out, m["__name__"])
			}
		} else {
			must(t, json.Unmarshal(r.Data, &out))
		}
		return out, r.Warnings
	}
	withMatch := func(p url.Values, m string) url.Values {
		q := url.Values{}
		for k, v := range p {
			q[k] = v
		}
		q.Set("match[]", m)
		return q
	}
	for _, tc := range []struct {
		path   string
		params url.Values
		want   []string
	}{
		{"/api/v1/label/__name__/values", lastHour, []string{"head_metric", "new_metric"}},
		{"/api/v1/label/__name__/values", url.Values{}, []string{"head_metric", "new_metric", "old_metric"}},
		{"/api/v1/label/host/values", withMatch(lastHour, `{host=~"h0|h1"}`), []string{"h1"}},
		{"/api/v1/labels", lastHour, []string{"__name__", "host"}},
		{"/api/v1/labels", url.Values{"start": {unixParam(now - 6*3600_000)}, "end": {unixParam(now - 4*3600_000)}}, []string{"__name__", "host", "zone"}},
		{"/api/v1/series", withMatch(lastHour, `{host=~".+"}`), []string{"head_metric", "new_metric"}},
		{"/api/v1/series", withMatch(url.Values{"end": {unixParam(now - 3600_000)}}, `{host=~".+"}`), []string{"old_metric"}},
	} {
		got, warn := strs(e, tc.path, tc.params)
		if !slices.Equal(got, tc.want) || len(warn) != 0 {
			t.Errorf("%s %v: %v (warnings %q), want %v", tc.path, tc.params, got, warn, tc.want)
		}
	}
	if st, _, _ := e.call(http.MethodGet, "/api/v1/labels", url.Values{"start": {unixParam(now)}, "end": {unixParam(now - 1000)}}); st != 400 {
		t.Fatalf("end before start: %d", st)
	}

	plain := newTestEnvFor(t, e.node, plainBackend{e.node}, httpapi.Config{}, Options{})
	got, warn := strs(plain, "/api/v1/label/__name__/values", lastHour)
	if len(got) != 3 || len(warn) != 1 || !strings.Contains(warn[0], "start and end are not applied") {
		t.Fatalf("backend without ranges: %v %q", got, warn)
	}
	if _, warn := strs(plain, "/api/v1/label/__name__/values", url.Values{}); len(warn) != 0 {
		t.Fatalf("no range, no warning: %q", warn)
	}
}

// listingWarner is a backend whose listings say something may be
// missing, as a coordinator's front end does.
type listingWarner struct{ backend.Backend }

func (b listingWarner) Series(ctx context.Context, ms []*nlabels.Matcher, limit int) ([]nlabels.Labels, error) {
	backend.Warn(ctx, "edge pi-1 unreachable")
	return b.Backend.Series(ctx, ms, limit)
}

func (b listingWarner) LabelNames(ctx context.Context, ms []*nlabels.Matcher) ([]string, error) {
	backend.Warn(ctx, "edge pi-1 unreachable")
	return b.Backend.LabelNames(ctx, ms)
}

func (b listingWarner) LabelValues(ctx context.Context, name string, ms []*nlabels.Matcher) ([]string, error) {
	backend.Warn(ctx, "edge pi-1 unreachable")
	return b.Backend.LabelValues(ctx, name, ms)
}

// TestMeta_BackendWarningsAreSent: what a backend says may be missing
// from a listing reaches the response's warnings, once.
func TestMeta_BackendWarningsAreSent(t *testing.T) {
	base := newTestEnv(t, nil, httpapi.Config{}, Options{})
	base.write(&prompb.WriteRequest{Timeseries: []prompb.TimeSeries{
		{Labels: lbls("__name__", "m", "host", "h0"), Samples: []prompb.Sample{{Timestamp: ms(testNow) - 60_000, Value: 1}}},
	}})
	e := newTestEnvFor(t, base.node, listingWarner{base.node}, httpapi.Config{}, Options{})
	for _, tc := range []struct {
		path   string
		params url.Values
	}{
		{"/api/v1/series", url.Values{"match[]": {`{host="h0"}`, `{__name__="m"}`}}},
		{"/api/v1/labels", url.Values{}},
		{"/api/v1/label/host/values", url.Values{}},
	} {
		st, r, body := e.call(http.MethodGet, tc.path, tc.params)
		if st != 200 || !slices.Equal(r.Warnings, []string{"edge pi-1 unreachable"}) {
			t.Errorf("%s: %d, warnings %q (%s)", tc.path, st, r.Warnings, body)
		}
	}
}
