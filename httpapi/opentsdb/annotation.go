package opentsdb

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/model"
	"github.com/tributarydb/tributary/node/labels"
)

// Annotations (/api/annotation) are stored as points of the reserved
// series AnnotationMetric, so that they survive a restart and reach the
// cloud by replication like any data:
//
//   - the point's timestamp is the annotation's startTime (ms);
//   - its labels carry the content: tsuid (absent for a global
//     annotation), description, notes, custom (a JSON object, keys
//     sorted), end (endTime in seconds, absent when 0), and deleted="true"
//     for a deletion;
//   - its value is the time of the write in milliseconds, a version: of
//     the points at one (tsuid, startTime), the one with the largest value
//     is the annotation as it is now, or, if it is a deletion, none.
//
// Nothing is ever removed: an update or a deletion adds a point (retention
// removes them with the rest of the data). Label values are bounded by the
// node's label limits (--max-label-value-bytes), so a longer description
// is refused.
const AnnotationMetric = "tributary_opentsdb_annotation"

// annotation is OpenTSDB's annotation object.
type annotation struct {
	TSUID       string            `json:"tsuid,omitempty"`
	Description string            `json:"description"`
	Notes       string            `json:"notes"`
	Custom      map[string]string `json:"custom"`
	StartTime   int64             `json:"startTime"`
	EndTime     int64             `json:"endTime"`
}

// annotationTimeMs reads an annotation time in seconds, or in
// milliseconds when it has more than 10 digits, as OpenTSDB does.
func annotationTimeMs(sec int64) int64 {
	if sec > 9_999_999_999 {
		return sec
	}
	return sec * 1000
}

// annotationLabels are the labels of a's point.
func annotationLabels(a annotation, deleted bool) []labels.Label {
	ls := []labels.Label{{Name: labels.MetricName, Value: AnnotationMetric}}
	add := func(name, value string) {
		if value != "" {
			ls = append(ls, labels.Label{Name: name, Value: value})
		}
	}
	add("tsuid", a.TSUID)
	add("description", a.Description)
	add("notes", a.Notes)
	if len(a.Custom) > 0 {
		c, _ := json.Marshal(a.Custom) // map keys are sorted
		add("custom", string(c))
	}
	if a.EndTime != 0 {
		add("end", strconv.FormatInt(a.EndTime, 10))
	}
	if deleted {
		add("deleted", "true")
	}
	slices.SortFunc(ls, func(x, y labels.Label) int {
		switch {
		case x.Name < y.Name:
			return -1
		case x.Name > y.Name:
			return 1
		}
		return 0
	})
	return ls
}

// fromLabels rebuilds an annotation (and whether it is a deletion) from
// its point.
func fromLabels(ls labels.Labels, startMs int64) (annotation, bool) {
	a := annotation{TSUID: ls.Get("tsuid"), Description: ls.Get("description"), Notes: ls.Get("notes"),
		StartTime: startMs / 1000}
	if c := ls.Get("custom"); c != "" {
		json.Unmarshal([]byte(c), &a.Custom)
	}
	a.EndTime, _ = strconv.ParseInt(ls.Get("end"), 10, 64)
	return a, ls.Get("deleted") == "true"
}

// annotation serves /api/annotation: POST and PUT store, GET reads,
// DELETE deletes (OpenTSDB's parameters start_time and tsuid, or a JSON
// body).
func (a *api) annotation(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := a.withTimeout(r)
	defer cancel()
	var req annotation
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodDelete:
		if r.ContentLength != 0 && (r.Method != http.MethodDelete || r.URL.Query().Get("start_time") == "") {
			body, err := httpapi.ReadBody(r, a.cfg.Limits.MaxBodyBytes, a.cfg.Stats)
			if err != nil {
				a.fail(w, err)
				return
			}
			if err := decodeJSON(body, &req); err != nil {
				a.badRequest(w, "annotation body: %v", err)
				return
			}
			break
		}
		fallthrough
	case http.MethodGet:
		q := r.URL.Query()
		req.TSUID = q.Get("tsuid")
		st, err := strconv.ParseInt(q.Get("start_time"), 10, 64)
		if q.Get("start_time") != "" && err != nil {
			a.badRequest(w, "start_time %.32q is not a number", q.Get("start_time"))
			return
		}
		req.StartTime = st
	default:
		a.methodNotAllowed(w, r, "GET", "POST", "PUT", "DELETE")
		return
	}
	if req.StartTime <= 0 {
		a.badRequest(w, "missing startTime")
		return
	}
	switch r.Method {
	case http.MethodGet:
		got, ok, err := a.findAnnotation(ctx, req.TSUID, annotationTimeMs(req.StartTime))
		switch {
		case err != nil:
			a.fail(w, err)
		case !ok:
			writeError(w, http.StatusNotFound, "Unable to locate annotation in storage", "")
		default:
			writeJSON(w, http.StatusOK, got)
		}
	case http.MethodDelete:
		if err := a.storeAnnotation(ctx, req, true); err != nil {
			a.fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		if err := a.storeAnnotation(ctx, req, false); err != nil {
			a.fail(w, err)
			return
		}
		req.StartTime = annotationTimeMs(req.StartTime) / 1000
		writeJSON(w, http.StatusOK, req)
	}
}

// storeAnnotation writes a's point (a deletion's with deleted="true").
func (a *api) storeAnnotation(ctx context.Context, an annotation, deleted bool) error {
	ls, err := labels.New(annotationLabels(an, deleted), a.cfg.Limits.Labels)
	if err != nil {
		return httpapi.Errorf(http.StatusBadRequest, "annotation: %v", err)
	}
	version := float64(a.nextAnnotationVersion())
	res, err := a.b.Write(ctx, []model.Batch{{Labels: ls, Ts: []int64{annotationTimeMs(an.StartTime)}, Vs: []float64{version}}})
	if err != nil {
		return err
	}
	if res.Rejected > 0 {
		msg := "refused"
		if len(res.Rejections) > 0 {
			msg = res.Rejections[0].Message
		}
		return httpapi.Errorf(http.StatusBadRequest, "annotation not stored: %s", msg)
	}
	return nil
}

// annotationsIn returns the annotations, as they are now, whose
// startTime is in [startMs, endMs]: of tsuid, or global ones with tsuid
// "". Sorted by startTime.
func (a *api) annotationsIn(ctx context.Context, tsuid string, startMs, endMs int64) ([]annotation, error) {
	name, _ := labels.NewMatcher(labels.MatchEqual, labels.MetricName, AnnotationMetric)
	id, _ := labels.NewMatcher(labels.MatchEqual, "tsuid", tsuid)
	nq := model.Query{Matchers: []*labels.Matcher{name, id}, Start: startMs, End: endMs, Mode: model.ModeRaw,
		LimitSeries: a.cfg.Limits.MaxSeriesPerQuery}
	type newest struct {
		version float64
		a       annotation
		deleted bool
	}
	byStart := map[int64]*newest{}
	_, err := a.b.Query(ctx, nq, func(s model.Series) error {
		for i, t := range s.Ts {
			if n := byStart[t]; n != nil && !(s.Vs[i] > n.version) {
				continue
			}
			an, deleted := fromLabels(s.Labels, t)
			byStart[t] = &newest{s.Vs[i], an, deleted}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]annotation, 0, len(byStart))
	for _, n := range byStart {
		if !n.deleted && !math.IsNaN(n.version) {
			out = append(out, n.a)
		}
	}
	slices.SortFunc(out, func(x, y annotation) int { return int(x.StartTime - y.StartTime) })
	return out, nil
}

// findAnnotation returns the annotation of tsuid at startMs.
func (a *api) findAnnotation(ctx context.Context, tsuid string, startMs int64) (annotation, bool, error) {
	as, err := a.annotationsIn(ctx, tsuid, startMs, startMs)
	if err != nil || len(as) == 0 {
		return annotation{}, false, err
	}
	return as[0], true, nil
}

// globalAnnotationsParam reads the global_annotations parameter of a GET
// /api/query.
func globalAnnotationsParam(q url.Values) bool {
	return flag(q, "global_annotations", "globalAnnotations")
}

// nextAnnotationVersion is the wall clock in milliseconds, or one more
// than the previous version if that is not later.
func (a *api) nextAnnotationVersion() int64 {
	for {
		prev, now := a.annVersion.Load(), time.Now().UnixMilli()
		next := max(now, prev+1)
		if a.annVersion.CompareAndSwap(prev, next) {
			return next
		}
	}
}
