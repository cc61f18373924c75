package lpbench

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/bench/workload"
)

// answerFor renders the answer q expects, in the Prometheus API's form.
func answerFor(t *testing.T, q tsbsQuery, by string) []byte {
	t.Helper()
	var result []any
	for key, points := range q.want {
		metric := map[string]string{"db": "benchmark"}
		if by != "" {
			metric[by] = key
		}
		var values [][2]any
		for j, v := range points {
			values = append(values, [2]any{q.firstS + int64(j)*q.stepS, strconv.FormatFloat(v, 'g', -1, 64)})
		}
		s := map[string]any{"metric": metric}
		if q.path == "/api/v1/query" {
			s["value"] = values[0]
		} else {
			s["values"] = values
		}
		result = append(result, s)
	}
	typ := "matrix"
	if q.path == "/api/v1/query" {
		typ = "vector"
	}
	b, err := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"resultType": typ, "result": result}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTSBSTypes_ExpectedAnswers(t *testing.T) {
	g, err := workload.NewTSBSCPU(workload.TSBSCPUOptions{Hosts: 12, Rows: 6 * 60 * 10, StartNs: 1_700_000_000e9, IntervalNs: 10e9, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	types, err := newTSBSTypes(g, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(types) != len(tsbsTypeNames) {
		t.Fatalf("%d types, want %d", len(types), len(tsbsTypeNames))
	}
	for _, typ := range types {
		for _, q := range typ.queries {
			if err := q.check(answerFor(t, q, q.by)); err != nil {
				t.Errorf("%s: the expected answer is refused: %v", typ.name, err)
			}
			wrong := q
			wrong.want = map[string][]float64{}
			for k, v := range q.want {
				v = append([]float64(nil), v...)
				v[len(v)-1]++
				wrong.want[k] = v
			}
			if err := q.check(answerFor(t, wrong, q.by)); err == nil {
				t.Errorf("%s: a wrong last point is accepted", typ.name)
			}
		}
	}
	// 1-1-12 on 10 h of data is shortened to what fits; 1-8-1 names 8 hosts.
	q := types[1].queries[0]
	if n := len(q.want[""]); n != 10*60-1 {
		t.Errorf("1-1-12 over 10 h of data has %d points, want %d", n, 10*60-1)
	}
	if expr := types[2].queries[0].params.Get("query"); strings.Count(expr, "|") != 7 {
		t.Errorf("1-8-1 query %s does not name 8 hosts", expr)
	}
	// The newest sample: a brute force over the data.
	lp := types[4].queries[0]
	vs := g.FieldValues(3, queryField)
	if got := lp.want[g.HostName(3)][0]; got != float64(vs[len(vs)-1]) {
		t.Errorf("lastpoint of host 3 is %v, want %v", got, vs[len(vs)-1])
	}
	if tS := lp.params.Get("time"); tS != strconv.FormatInt(g.TimestampNs(g.Rows()-1)/int64(time.Second), 10) {
		t.Errorf("lastpoint asked at %s", tS)
	}
}
