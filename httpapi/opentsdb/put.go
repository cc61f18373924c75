package opentsdb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/node/labels"
)

// maxDetailErrors bounds the "errors" list of a ?details answer; the
// "failed" count stays exact.
const maxDetailErrors = 100

// jsonScalar is a JSON value kept as text: the content of a string or the
// literal of a number, bool or null. Decoding it never fails, so that a
// wrong type is reported per datapoint with the field's name.
type jsonScalar struct {
	set  bool
	kind byte // '"' string, '0' number, 'b' bool, 'n' null, '{' object, '[' array
	text string
}

func (s *jsonScalar) UnmarshalJSON(b []byte) error {
	s.set = true
	switch c := b[0]; {
	case c == '"':
		s.kind = '"'
		if bytes.IndexByte(b, '\\') < 0 {
			s.text = string(b[1 : len(b)-1])
			return nil
		}
		return json.Unmarshal(b, &s.text)
	case c == '-' || c >= '0' && c <= '9':
		s.kind, s.text = '0', string(b)
	case c == 't' || c == 'f':
		s.kind, s.text = 'b', string(b)
	case c == 'n':
		s.kind = 'n'
	default:
		s.kind = c
	}
	return nil
}

func (s *jsonScalar) typeName() string {
	switch s.kind {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 'b':
		return "a boolean"
	case 'n':
		return "null"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "unknown"
}

// putDatapoint is one element of a /api/put body.
type putDatapoint struct {
	Metric    jsonScalar            `json:"metric"`
	Timestamp jsonScalar            `json:"timestamp"`
	Value     jsonScalar            `json:"value"`
	Tags      map[string]jsonScalar `json:"tags"`
}

// validPoint is a datapoint that passed validation.
type validPoint struct {
	metric string
	tags   []labels.Label
	tMs    int64
	v      float64
}

// validate checks dp and converts it; tags is scratch space that the
// result's tags may alias.
func (dp *putDatapoint) validate(tags []labels.Label) (validPoint, error) {
	var p validPoint
	switch {
	case !dp.Metric.set || dp.Metric.kind == 'n':
		return p, errors.New("metric is missing")
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
		return p, errors.New("timestamp is missing")
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
		return p, errors.New("value is missing")
	case dp.Value.kind == '"' || dp.Value.kind == '0':
		if p.v, err = parseValue(dp.Value.text); err != nil {
			return p, err
		}
	default:
		return p, fmt.Errorf("value must be a number, not %s", dp.Value.typeName())
	}
	tags = tags[:0]
	for k, v := range dp.Tags {
		if v.kind != '"' && v.kind != '0' {
			return p, fmt.Errorf("tag %.64q: value must be a string, not %s", k, v.typeName())
		}
		l, err := tagLabel(k, v.text)
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
	if allDigits(lit) {
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
	keys := make([]string, 0, len(dp.Tags))
	for k := range dp.Tags {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i == echoMaxTags {
			e.Tags["…"] = fmt.Sprintf("%d more tags", len(keys)-echoMaxTags)
			break
		}
		e.Tags[clip(k)] = clip(dp.Tags[k].text)
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

// decodePut decodes a /api/put body: one datapoint object or an array of
// them. A body that is not valid JSON, or not an object or array, fails as
// a whole (an *httpapi.Error with status 400); more than maxPoints
// datapoints fail with 413. A datapoint with a wrong field fails alone.
func decodePut(body []byte, maxPoints int) (*putBody, error) {
	pb := &putBody{}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return nil, httpapi.Errorf(http.StatusBadRequest, "request body is empty: send a JSON datapoint object or an array of them")
	}
	// Go's JSON decoder silently replaces invalid UTF-8; check first, and
	// only when needed inspect each datapoint's raw bytes.
	rawCheck := !utf8.Valid(trimmed)
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var tags []labels.Label
	one := func() error {
		var dp putDatapoint
		var err error
		if rawCheck {
			var raw json.RawMessage
			if err = dec.Decode(&raw); err == nil {
				err = json.Unmarshal(raw, &dp)
				if err == nil && !utf8.Valid(raw) {
					// Strings without escapes keep their bytes, so
					// validation usually names the field; escaped strings
					// and keys have been repaired by the decoder.
					pb.total++
					_, verr := dp.validate(tags)
					if verr == nil || !strings.Contains(verr.Error(), "UTF-8") {
						verr = errors.New("datapoint contains invalid UTF-8")
					}
					pb.fail(&dp, verr)
					return nil
				}
			}
		} else {
			err = dec.Decode(&dp)
		}
		if err != nil {
			var se *json.SyntaxError
			if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				return err
			}
			pb.total++
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				if te.Field == "" {
					err = fmt.Errorf("datapoint must be a JSON object, not a JSON %s", te.Value)
				} else {
					err = fmt.Errorf("field %s must not be a JSON %s", te.Field, te.Value)
				}
			}
			pb.fail(&dp, err)
			return nil
		}
		pb.total++
		p, err := dp.validate(tags)
		if err == nil {
			tags = p.tags
			err = pb.b.add(p.metric, p.tags, p.tMs, p.v, int64(pb.total-1))
		}
		if err != nil {
			pb.fail(&dp, err)
		}
		return nil
	}
	malformed := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return httpapi.Errorf(http.StatusBadRequest, "malformed JSON at byte %d: %v", se.Offset+int64(len(body)-len(trimmed)), err)
		}
		return httpapi.Errorf(http.StatusBadRequest, "malformed JSON: %v", err)
	}
	switch trimmed[0] {
	case '{':
		if err := one(); err != nil {
			return nil, malformed(err)
		}
	case '[':
		if _, err := dec.Token(); err != nil {
			return nil, malformed(err)
		}
		for dec.More() {
			if pb.total >= maxPoints {
				return nil, httpapi.Errorf(http.StatusRequestEntityTooLarge, "more than %d datapoints in one request; split it", maxPoints)
			}
			if err := one(); err != nil {
				return nil, malformed(err)
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, malformed(err)
		}
		if pb.total == 0 {
			return nil, httpapi.Errorf(http.StatusBadRequest, "no datapoints in the request body")
		}
	default:
		return nil, httpapi.Errorf(http.StatusBadRequest, "request body must be a JSON datapoint object or an array of them")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, httpapi.Errorf(http.StatusBadRequest, "malformed JSON: unexpected data after the %s", map[byte]string{'{': "datapoint object", '[': "array"}[trimmed[0]])
	}
	return pb, nil
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
	pb, err := decodePut(body, a.cfg.Limits.MaxPointsPerRequest)
	if err != nil {
		var he *httpapi.Error
		if errors.As(err, &he) && he.Status == http.StatusRequestEntityTooLarge {
			st.Inc(httpapi.ViolationTooManyPoints)
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
	dec := json.NewDecoder(bytes.NewReader(bytes.TrimLeft(body, " \t\r\n")))
	single := true
	if t, err := dec.Token(); err == nil && t == json.Delim('[') {
		single = false
	} else {
		dec = json.NewDecoder(bytes.NewReader(body))
	}
	for i := int64(0); len(out) < len(want); i++ {
		if !single && !dec.More() {
			break
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			break
		}
		msg, ok := want[i]
		if !ok {
			continue
		}
		var dp putDatapoint
		_ = json.Unmarshal(raw, &dp) // it decoded before; a failure leaves a partial echo
		out = append(out, putError{Datapoint: dp.echo(), Error: msg})
		if single {
			break
		}
	}
	return out
}
