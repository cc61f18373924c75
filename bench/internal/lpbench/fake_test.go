package lpbench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// fakeStore is a naive stand-in for a node's line-protocol write path and
// PromQL engine, for the harness's tests: it parses every line strictly,
// requires each host's lines in time order, keeps the usage_user samples,
// and answers max_over_time(cpu_usage_user{hostname="…"}[1m]) range
// queries by scanning every sample.
type fakeStore struct {
	// Mode changes the answers: "" is right, "closed-left" uses windows
	// [t-60s, t) instead of (t-60s, t], "extra-point" adds a point.
	Mode string
	// FailWrite, when > 0, makes the FailWrite-th write fail with 400.
	FailWrite int

	mu       sync.Mutex
	writes   int
	Points   int64
	Newest   map[string]int64      // hostname → newest timestamp (ns)
	User     map[string][][2]int64 // hostname → [ts (ms), usage_user], in time order
	Disorder []string
	Queries  int
	BadQuery []string
	Conns    map[string]bool // remote addresses seen
	Params   map[string]bool // "db=…&precision=…" seen
}

func newFakeStore() *fakeStore {
	return &fakeStore{Newest: map[string]int64{}, User: map[string][][2]int64{}, Conns: map[string]bool{}, Params: map[string]bool{}}
}

// parseFakeLine parses one line of the generator's line protocol.
func parseFakeLine(line string) (tags map[string]string, fields map[string]int64, tsNs int64, err error) {
	parts := strings.Split(line, " ")
	if len(parts) != 3 {
		return nil, nil, 0, fmt.Errorf("want 3 sections in %q", line)
	}
	series := strings.Split(parts[0], ",")
	if series[0] != "cpu" {
		return nil, nil, 0, fmt.Errorf("measurement %q", series[0])
	}
	tags = map[string]string{}
	for _, kv := range series[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, nil, 0, fmt.Errorf("tag %q", kv)
		}
		tags[k] = v
	}
	fields = map[string]int64{}
	for _, kv := range strings.Split(parts[1], ",") {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseInt(strings.TrimSuffix(v, "i"), 10, 64)
		if !ok || !strings.HasSuffix(v, "i") || err != nil {
			return nil, nil, 0, fmt.Errorf("field %q", kv)
		}
		fields[k] = n
	}
	tsNs, err = strconv.ParseInt(parts[2], 10, 64)
	return tags, fields, tsNs, err
}

func (f *fakeStore) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /write", f.write)
	mux.HandleFunc("GET /api/v1/query_range", f.queryRange)
	mux.HandleFunc("GET /ping", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return mux
}

func (f *fakeStore) write(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	f.Conns[r.RemoteAddr] = true
	f.Params[r.URL.RawQuery] = true
	if f.FailWrite > 0 && f.writes == f.FailWrite {
		http.Error(w, `{"error":"partial write: line 3: field usage_user: not an integer"}`, http.StatusBadRequest)
		return
	}
	if r.Header.Get("Content-Encoding") != "" {
		http.Error(w, "unexpected Content-Encoding", http.StatusUnsupportedMediaType)
		return
	}
	if !bytes.HasSuffix(body, []byte("\n")) {
		http.Error(w, "body does not end with a newline", http.StatusBadRequest)
		return
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		tags, fields, ts, err := parseFakeLine(line)
		if err != nil || len(tags) != 10 || len(fields) != 10 {
			http.Error(w, fmt.Sprintf("line %d: %v (%d tags, %d fields)", i+1, err, len(tags), len(fields)), http.StatusBadRequest)
			return
		}
		host := tags["hostname"]
		if newest, ok := f.Newest[host]; ok && ts <= newest && len(f.Disorder) < 10 {
			f.Disorder = append(f.Disorder, fmt.Sprintf("%s: %d after %d", host, ts, newest))
		}
		f.Newest[host] = ts
		f.User[host] = append(f.User[host], [2]int64{ts / 1e6, fields["usage_user"]})
		f.Points += int64(len(fields))
	}
	w.WriteHeader(http.StatusNoContent)
}

var fakeQuery = regexp.MustCompile(`^max_over_time\(cpu_usage_user\{hostname="(host_\d+)"\}\[1m\]\)$`)

func (f *fakeStore) queryRange(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	m := fakeQuery.FindStringSubmatch(q.Get("query"))
	start, err1 := strconv.ParseInt(q.Get("start"), 10, 64)
	end, err2 := strconv.ParseInt(q.Get("end"), 10, 64)
	step, err3 := strconv.ParseInt(q.Get("step"), 10, 64)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Queries++
	if m == nil || err1 != nil || err2 != nil || err3 != nil || step <= 0 {
		f.BadQuery = append(f.BadQuery, r.URL.RawQuery)
		http.Error(w, `{"status":"error","errorType":"bad_data","error":"unsupported query"}`, http.StatusBadRequest)
		return
	}
	samples := f.User[m[1]]
	type pair = [2]any
	var values []pair
	for t := start; t <= end; t += step {
		lo, hi := (t-60)*1000, t*1000 // (lo, hi]
		if f.Mode == "closed-left" {
			lo, hi = lo-1, hi-1 // [lo, hi) of whole milliseconds
		}
		best, found := int64(0), false
		first := sort.Search(len(samples), func(i int) bool { return samples[i][0] > lo })
		for _, s := range samples[first:] {
			if s[0] > hi {
				break
			}
			if !found || s[1] > best {
				best, found = s[1], true
			}
		}
		if found {
			values = append(values, pair{t, strconv.FormatInt(best, 10)})
		}
	}
	if f.Mode == "extra-point" {
		values = append(values, pair{end + step, "1"})
	}
	var result []any
	if len(values) > 0 {
		result = append(result, map[string]any{"metric": map[string]string{"hostname": m[1], "db": "benchmark"}, "values": values})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": result}})
}

// stats returns the points written, the hosts seen, and up to ten examples
// of lines out of time order.
func (f *fakeStore) stats() (int64, int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Points, len(f.Newest), slices.Clone(f.Disorder)
}

// save and load keep the store in a data directory between fake node
// processes.
func (f *fakeStore) save(path string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

func (f *fakeStore) load(path string) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, f)
}
