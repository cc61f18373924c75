package opentsdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/node/labels"
)

// maxDetailErrors bounds the "errors" list of a ?details answer; the
// "failed" count stays exact.
const maxDetailErrors = 100

// validPoint is a datapoint that passed validation.
type validPoint struct {
	metric string
	tags   []labels.Label
	tMs    int64
	v      float64
}

// Errors of datapoints without a field; common in hostile bodies, so
// they are not allocated each time.
var (
	errMetricMissing    = errors.New("metric is missing")
	errTimestampMissing = errors.New("timestamp is missing")
	errValueMissing     = errors.New("value is missing")
)

// validate checks dp and converts it; tags is scratch space that the
// result's tags may alias, and its strings alias dp's.
func (dp *putDatapoint) validate(tags []labels.Label) (validPoint, error) {
	var p validPoint
	switch {
	case !dp.Metric.set || dp.Metric.kind == 'n':
		return p, errMetricMissing
	case dp.Metric.kind != '"':
		return p, fmt.Errorf("metric must be a string, not %s", dp.Metric.typeName())
	}
	if err := checkName("metric name", dp.Metric.text); err != nil {
		return p, err
	}
	p.metric = dp.Metric.text
	var err error
	switch {
	case !dp.Timestamp.set || dp.Timestamp.kind == 'n':
		return p, errTimestampMissing
	case dp.Timestamp.kind == '"':
		p.tMs, err = parseTimestamp(dp.Timestamp.text)
	case dp.Timestamp.kind == '0':
		p.tMs, err = jsonTimestamp(dp.Timestamp.text)
	default:
		return p, fmt.Errorf("timestamp must be a number, not %s", dp.Timestamp.typeName())
	}
	if err != nil {
		return p, err
	}
	switch {
	case !dp.Value.set || dp.Value.kind == 'n':
		return p, errValueMissing
	case dp.Value.kind == '"' || dp.Value.kind == '0':
		if p.v, err = parseValue(dp.Value.text); err != nil {
			return p, err
		}
	default:
		return p, fmt.Errorf("value must be a number, not %s", dp.Value.typeName())
	}
	if dp.Tags.max > 0 && dp.Tags.n > dp.Tags.max {
		return p, tooManyTags(dp.Tags.n, dp.Tags.max)
	}
	tags = tags[:0]
	for _, t := range dp.Tags.kv {
		if t.val.kind != '"' && t.val.kind != '0' {
			return p, fmt.Errorf("tag %.64q: value must be a string, not %s", t.key, t.val.typeName())
		}
		l, err := tagLabel(t.key, t.val.text)
		if err != nil {
			return p, err
		}
		tags = append(tags, l)
	}
	p.tags = tags
	return p, nil
}

// jsonTimestamp converts a JSON number timestamp. Integers follow the
// put rule (seconds up to 2^32-1, milliseconds above); a number with a
// fraction or an exponent is seconds (milliseconds when larger than
// 2^32-1), truncated to the millisecond.
func jsonTimestamp(lit string) (int64, error) {
	if httpapi.IsDigits(lit) {
		if len(lit) > 13 {
			return 0, fmt.Errorf("timestamp %.32s is too large: use seconds (up to 10 digits) or milliseconds (13 digits) since the epoch", lit)
		}
		v, _ := strconv.ParseInt(lit, 10, 64)
		return putTimestampMs(v)
	}
	f, err := strconv.ParseFloat(lit, 64)
	switch {
	case err != nil || math.IsInf(f, 0):
		return 0, fmt.Errorf("timestamp %.32s is out of range", lit)
	case f <= 0:
		return 0, fmt.Errorf("timestamp %.32s must be positive (seconds or milliseconds since the epoch)", lit)
	case f <= maxSecondsTimestamp:
		return int64(f * 1000), nil
	case f <= maxMsTimestamp:
		return int64(f), nil
	}
	return 0, fmt.Errorf("timestamp %.32s is too large: use seconds (up to 10 digits) or milliseconds (13 digits) since the epoch", lit)
}

// putError is one entry of the "errors" list of a ?details answer.
type putError struct {
	Datapoint echoDatapoint `json:"datapoint"`
	Error     string        `json:"error"`
}

// echoDatapoint repeats a datapoint in an error, bounded in size.
type echoDatapoint struct {
	Metric    string            `json:"metric"`
	Timestamp any               `json:"timestamp,omitempty"`
	Value     any               `json:"value,omitempty"`
	Tags      map[string]string `json:"tags"`
}

const (
	echoMaxBytes = 256
	echoMaxTags  = 32
)

func clip(s string) string {
	if len(s) <= echoMaxBytes {
		return s
	}
	cut := echoMaxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func echoScalar(s jsonScalar) any {
	switch s.kind {
	case '0':
		// Clients parse the echo as float64: keep a number only if it fits.
		if f, err := strconv.ParseFloat(s.text, 64); err == nil && len(s.text) <= echoMaxBytes && !math.IsInf(f, 0) {
			return json.Number(s.text)
		}
		return clip(s.text)
	case '"':
		return clip(s.text)
	case 'b':
		return s.text == "true"
	}
	return nil
}

func (dp *putDatapoint) echo() echoDatapoint {
	e := echoDatapoint{Metric: clip(dp.Metric.text), Timestamp: echoScalar(dp.Timestamp), Value: echoScalar(dp.Value), Tags: map[string]string{}}
	kv := slices.SortedFunc(slices.Values(dp.Tags.kv), func(a, b putTag) int { return strings.Compare(a.key, b.key) })
	for i, t := range kv {
		if i == echoMaxTags {
			e.Tags["…"] = fmt.Sprintf("%d more tags", len(kv)-echoMaxTags)
			break
		}
		e.Tags[clip(t.key)] = clip(t.val.text)
	}
	if dp.Tags.n > len(dp.Tags.kv) && len(kv) == 0 {
		e.Tags["…"] = fmt.Sprintf("%d tags, not decoded", dp.Tags.n)
	}
	return e
}

// putBody is a decoded /api/put body: the valid points in a batcher and
// the datapoints that failed validation.
type putBody struct {
	b      batcher
	total  int        // datapoints in the body
	failed int        // datapoints that failed validation
	errs   []putError // the first maxDetailErrors failures
}

func (pb *putBody) fail(dp *putDatapoint, err error) {
	pb.failed++
	if len(pb.errs) < maxDetailErrors {
		pb.errs = append(pb.errs, putError{Datapoint: dp.echo(), Error: err.Error()})
	}
}

// limitError is a body refused whole for a request-wide limit (413):
// violation is the counter it goes to.
type limitError struct {
	he        *httpapi.Error
	violation string
}

func (e *limitError) Error() string { return e.he.Msg }
func (e *limitError) Unwrap() error { return e.he }

// putLimits bound what decodePut builds.
type putLimits struct {
	maxPoints int // datapoints in a body
	maxSeries int // distinct series in a body (0: no limit)
	maxTags   int // tags of a datapoint (0: no limit)
}

// decodePut decodes a /api/put body: one datapoint object or an array of
// them. A body that is not valid JSON, or not an object or array, fails as
// a whole (an *httpapi.Error with status 400); more than lim.maxPoints
// datapoints or lim.maxSeries series fail with 413 (a *limitError). A
// datapoint with a wrong field, or more than lim.maxTags tags (counted,
// not decoded), fails alone.
//
// The body is checked with json.Valid, then each datapoint is decoded in
// place by putDatapoint.decode: besides the body, a call allocates the
// valid points and the label copies of their new series, whatever the
// datapoints hold. The strings of the result's errors alias body.
func decodePut(body []byte, lim putLimits) (*putBody, error) {
	pb := &putBody{}
	pb.b.maxSeries = lim.maxSeries
	start := skipJSONSpace(body, 0)
	if start == len(body) {
		return nil, httpapi.Errorf(http.StatusBadRequest, "request body is empty: send a JSON datapoint object or an array of them")
	}
	end := jsonValueEnd(body, start)
	if end < 0 || !json.Valid(body[start:end]) {
		return nil, malformedJSON(body, start)
	}
	if i := skipJSONSpace(body, end); i < len(body) {
		return nil, httpapi.Errorf(http.StatusBadRequest, "malformed JSON: unexpected data after the %s at byte %d",
			map[byte]string{'{': "datapoint object", '[': "array"}[body[start]], i)
	}
	dp := &putDatapoint{Tags: putTags{max: lim.maxTags}}
	var tags []labels.Label
	one := func(raw []byte) error {
		pb.total++
		if err := dp.decode(raw); err != nil {
			pb.fail(dp, err)
			return nil
		}
		if !utf8.Valid(raw) {
			_, verr := dp.validate(tags)
			if verr == nil || !strings.Contains(verr.Error(), "UTF-8") {
				verr = errors.New("datapoint contains invalid UTF-8")
			}
			pb.fail(dp, verr)
			return nil
		}
		p, err := dp.validate(tags)
		if err == nil {
			tags = p.tags
			err = pb.b.add(p.metric, p.tags, p.tMs, p.v, int64(pb.total-1))
			if errors.Is(err, errTooManySeries) {
				return &limitError{httpapi.Errorf(http.StatusRequestEntityTooLarge,
					"datapoint %d: more than %d series in one request, the limit; nothing was stored: split the request", pb.total, lim.maxSeries),
					httpapi.ViolationTooManySeries}
			}
		}
		if err != nil {
			pb.fail(dp, err)
		}
		return nil
	}
	switch body[start] {
	case '{':
		if err := one(body[start:end]); err != nil {
			return nil, err
		}
	case '[':
		for i := skipJSONSpace(body, start+1); body[i] != ']'; {
			if pb.total >= lim.maxPoints {
				return nil, &limitError{httpapi.Errorf(http.StatusRequestEntityTooLarge, "more than %d datapoints in one request; split it", lim.maxPoints),
					httpapi.ViolationTooManyPoints}
			}
			e := jsonValueEnd(body, i)
			if err := one(body[i:e]); err != nil {
				return nil, err
			}
			if i = skipJSONSpace(body, e); body[i] == ',' {
				i = skipJSONSpace(body, i+1)
			}
		}
		if pb.total == 0 {
			return nil, httpapi.Errorf(http.StatusBadRequest, "no datapoints in the request body")
		}
	default:
		return nil, httpapi.Errorf(http.StatusBadRequest, "request body must be a JSON datapoint object or an array of them")
	}
	return pb, nil
}

// malformedJSON describes why body, from offset start, is not one valid
// JSON value.
func malformedJSON(body []byte, start int) error {
	var v struct{}
	err := json.Unmarshal(body[start:], &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return httpapi.Errorf(http.StatusBadRequest, "malformed JSON at byte %d: %v", start+int(se.Offset), err)
	}
	return httpapi.Errorf(http.StatusBadRequest, "malformed JSON: %v", err)
}

// putResult is the body of a ?summary or ?details answer.
type putResult struct {
	Success int64       `json:"success"`
	Failed  int64       `json:"failed"`
	Errors  *[]putError `json:"errors,omitempty"`
}

func (a *api) put(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost && r.Method != http.MethodPut {
		a.methodNotAllowed(w, r, "POST")
		return
	}
	ctx, cancel := a.withTimeout(r)
	defer cancel()
	st := a.cfg.Stats
	st.Inc("opentsdb_put_requests")
	body, err := httpapi.ReadBody(r, a.cfg.Limits.MaxBodyBytes, st)
	if err != nil {
		a.fail(w, err)
		return
	}
	lim := a.cfg.Limits
	pb, err := decodePut(body, putLimits{maxPoints: lim.MaxPointsPerRequest, maxSeries: lim.MaxSeriesPerRequest, maxTags: maxTags(lim.Labels)})
	if err != nil {
		var le *limitError
		if errors.As(err, &le) {
			st.Inc(le.violation)
		}
		a.fail(w, err)
		return
	}
	errs := pb.errs
	var accepted, rejected int64
	if pb.b.points > 0 {
		batches, origin := pb.b.take()
		res, err := a.b.Write(ctx, batches)
		if err != nil {
			st.Add("opentsdb_points_rejected", int64(pb.total))
			a.fail(w, err)
			return
		}
		accepted, rejected = res.Accepted, res.Rejected
		if rj := mapRejections(res, origin); len(rj) > 0 && len(errs) < maxDetailErrors {
			errs = append(errs, a.echoRejected(body, rj, maxDetailErrors-len(errs))...)
		}
	}
	failed := int64(pb.failed) + rejected
	st.Add("opentsdb_points_accepted", accepted)
	st.Add("opentsdb_points_rejected", failed)
	st.Add(httpapi.ViolationRejectedPoints, failed)
	q := r.URL.Query()
	details, summary := q.Has("details"), q.Has("summary")
	status := http.StatusOK
	if failed > 0 {
		status = http.StatusBadRequest
	}
	switch {
	case details:
		if errs == nil {
			errs = []putError{}
		}
		writeJSON(w, status, putResult{Success: accepted, Failed: failed, Errors: &errs})
	case summary:
		writeJSON(w, status, putResult{Success: accepted, Failed: failed})
	case failed == 0:
		w.WriteHeader(http.StatusNoContent)
	default:
		first := ""
		if len(errs) > 0 {
			first = "; first error: " + errs[0].Error
		}
		writeError(w, http.StatusBadRequest,
			fmt.Sprintf("%d of %d data points failed, %d were stored%s", failed, pb.total, accepted, first),
			"append ?details to the request to see the error of each data point")
	}
}

// echoRejected builds detail errors for points the node refused, reading
// the datapoints again from the body (the node reports positions, and
// keeping every decoded datapoint until then would double the memory).
func (a *api) echoRejected(body []byte, rj []rejected, limit int) []putError {
	want := map[int64]string{}
	for _, r := range rj {
		for _, o := range r.origins {
			if len(want) == limit {
				break
			}
			want[o] = r.msg
		}
	}
	out := make([]putError, 0, len(want))
	dp := &putDatapoint{Tags: putTags{max: maxTags(a.cfg.Limits.Labels)}}
	echo := func(raw []byte, msg string) {
		_ = dp.decode(raw) // it decoded before; a failure leaves a partial echo
		out = append(out, putError{Datapoint: dp.echo(), Error: msg})
	}
	i := skipJSONSpace(body, 0)
	if i == len(body) {
		return out
	}
	if body[i] != '[' {
		if msg, ok := want[0]; ok {
			if end := jsonValueEnd(body, i); end > 0 {
				echo(body[i:end], msg)
			}
		}
		return out
	}
	i = skipJSONSpace(body, i+1)
	for k := int64(0); len(out) < len(want) && i < len(body) && body[i] != ']'; k++ {
		end := jsonValueEnd(body, i)
		if end < 0 {
			break
		}
		if msg, ok := want[k]; ok {
			echo(body[i:end], msg)
		}
		if i = skipJSONSpace(body, end); i < len(body) && body[i] == ',' {
			i = skipJSONSpace(body, i+1)
		}
	}
	return out
}
