package influxql

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"time"
)

// response is the body of a /query answer: {"results":[...]} or, for a
// request that could not be run at all, {"error":"..."}.
type response struct {
	Results []*result `json:"results,omitempty"`
	Err     string    `json:"error,omitempty"`
}

// result is the answer to one statement.
type result struct {
	StatementID int    `json:"statement_id"`
	Series      []*row `json:"series,omitempty"`
	Messages    []msg  `json:"messages,omitempty"`
	Partial     bool   `json:"partial,omitempty"`
	Err         string `json:"error,omitempty"`
}

// msg is an informational message of a result.
type msg struct {
	Level string `json:"level"`
	Text  string `json:"text"`
}

// row is one series of a result. Values[i][0] is the time in
// nanoseconds (int64) until render converts it; the other cells are
// float64, string, bool or nil.
type row struct {
	Name    string            `json:"name,omitempty"`
	Tags    map[string]string `json:"tags,omitempty"`
	Columns []string          `json:"columns,omitempty"`
	Values  [][]any           `json:"values,omitempty"`
	Partial bool              `json:"partial,omitempty"`
	// timeCol says whether Values[i][0] is a time to render.
	timeCol bool
}

// epochDivisor returns the divisor from nanoseconds to the epoch
// precision p ("" for RFC3339 strings, divisor 0). As InfluxDB 1.8 does,
// a value it does not know is taken as nanoseconds; "us" and "µ" are
// accepted for microseconds besides InfluxDB's "u".
func epochDivisor(p string) int64 {
	switch p {
	case "":
		return 0
	case "u", "us", "µ", "μ":
		return int64(time.Microsecond)
	case "ms":
		return int64(time.Millisecond)
	case "s":
		return int64(time.Second)
	case "m":
		return int64(time.Minute)
	case "h":
		return int64(time.Hour)
	}
	return 1
}

// render converts the cells of r for JSON: times to RFC3339Nano strings
// (div 0) or integers in the epoch precision, and NaN or infinite floats
// (which JSON cannot carry and InfluxDB cannot store) to null.
func (r *row) render(div int64) {
	for _, vals := range r.Values {
		for i, v := range vals {
			switch x := v.(type) {
			case int64:
				if i == 0 && r.timeCol {
					if div == 0 {
						vals[i] = time.Unix(0, x).UTC().Format(time.RFC3339Nano)
					} else {
						vals[i] = x / div
					}
				}
			case float64:
				if math.IsNaN(x) || math.IsInf(x, 0) {
					vals[i] = nil
				}
			}
		}
	}
	r.timeCol = false
}

// encodeTo writes v as InfluxDB does: JSON (indented by four spaces when
// pretty) followed by a newline.
func encodeTo(w io.Writer, v any, pretty bool) error {
	var b []byte
	var err error
	if pretty {
		b, err = json.MarshalIndent(v, "", "    ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		panic("BUG: influxql: encode answer: " + err.Error())
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// httpError answers a request that could not be run with status and
// {"error":msg}, as InfluxDB 1.8 does.
func httpError(w http.ResponseWriter, status int, msg string, pretty bool) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = encodeTo(w, response{Err: msg}, pretty)
}

// chunks splits the series of res into the results InfluxDB streams for
// chunked=true: one series chunk of at most size values per result, the
// chunks of a series that continues marked partial (in the series and in
// the result).
func chunks(res *result, size int) []*result {
	if res.Err != "" || len(res.Series) == 0 {
		return []*result{res}
	}
	var out []*result
	for _, s := range res.Series {
		vals := s.Values
		for first := true; first || len(vals) > 0; first = false {
			n := min(size, len(vals))
			part := *s
			part.Values = vals[:n]
			vals = vals[n:]
			part.Partial = len(vals) > 0
			out = append(out, &result{StatementID: res.StatementID, Series: []*row{&part}, Partial: part.Partial})
		}
	}
	out[len(out)-1].Messages = res.Messages
	return out
}
