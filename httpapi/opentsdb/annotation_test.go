package opentsdb

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tributarydb/tributary/httpapi"
	"github.com/tributarydb/tributary/node"
)

func TestAnnotation_StoreUpdateQueryDelete(t *testing.T) {
	e := newEnv(t)
	t1 := nowSec() - 600
	e.put("", fmt.Sprintf(`[{"metric":"sys.load","timestamp":%d,"value":1,"tags":{"host":"a"}}]`, t1), http.StatusNoContent)

	post := func(body string) annotation {
		t.Helper()
		st, b, _ := e.do("POST", "/api/annotation", body)
		var got annotation
		if st != http.StatusOK || json.Unmarshal(b, &got) != nil {
			t.Fatalf("POST %s: %d %s", body, st, b)
		}
		return got
	}
	get := func(query string) (int, annotation) {
		t.Helper()
		st, b, _ := e.do("GET", "/api/annotation?"+query, "")
		var got annotation
		if st == http.StatusOK && json.Unmarshal(b, &got) != nil {
			t.Fatalf("GET %s: %s", query, b)
		}
		return st, got
	}
	post(fmt.Sprintf(`{"startTime":%d,"endTime":%d,"description":"deploy","notes":"v1","custom":{"owner":"ops"}}`, t1, t1+60))
	if st, got := get(fmt.Sprintf("start_time=%d", t1)); st != 200 || got.Description != "deploy" || got.Custom["owner"] != "ops" ||
		got.EndTime != t1+60 || got.StartTime != t1 || got.TSUID != "" {
		t.Fatalf("GET: %d %+v", st, got)
	}
	// An update replaces it; a tsuid annotation at the same time is apart.
	post(fmt.Sprintf(`{"startTime":%d,"description":"deploy v2"}`, t1))
	post(fmt.Sprintf(`{"startTime":%d,"tsuid":"000001000001000001","description":"series note"}`, t1))
	if st, got := get(fmt.Sprintf("start_time=%d", t1)); st != 200 || got.Description != "deploy v2" || got.Custom != nil || got.EndTime != 0 {
		t.Fatalf("GET after update: %d %+v", st, got)
	}
	if st, got := get(fmt.Sprintf("start_time=%d&tsuid=000001000001000001", t1)); st != 200 || got.Description != "series note" {
		t.Fatalf("GET tsuid: %d %+v", st, got)
	}
	// /api/query with globalAnnotations: the global one only.
	var ans []struct {
		Metric  string       `json:"metric"`
		Globals []annotation `json:"globalAnnotations"`
	}
	e.getJSON("/api/query?start=1h-ago&m=sum:sys.load&global_annotations=true", &ans)
	if len(ans) != 1 || len(ans[0].Globals) != 1 || ans[0].Globals[0].Description != "deploy v2" {
		t.Fatalf("query with global annotations: %+v", ans)
	}
	st, b, _ := e.do("POST", "/api/query", `{"start":"1h-ago","globalAnnotations":true,"queries":[{"aggregator":"sum","metric":"sys.load"}]}`)
	if st != 200 || !strings.Contains(string(b), `"globalAnnotations":[{"description":"deploy v2"`) {
		t.Fatalf("POST query with global annotations: %d %s", st, b)
	}
	ans = nil
	e.getJSON("/api/query?start=1h-ago&m=sum:sys.load", &ans)
	if len(ans) != 1 || ans[0].Globals != nil {
		t.Fatalf("query without global annotations: %+v", ans)
	}
	// Deleted: gone from GET and from queries; the tsuid one stays.
	if st, b, _ := e.do("DELETE", fmt.Sprintf("/api/annotation?start_time=%d", t1), ""); st != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", st, b)
	}
	if st, _ := get(fmt.Sprintf("start_time=%d", t1)); st != http.StatusNotFound {
		t.Fatalf("GET after delete: %d", st)
	}
	ans = nil
	e.getJSON("/api/query?start=1h-ago&m=sum:sys.load&global_annotations=true", &ans)
	if len(ans) != 1 || ans[0].Globals == nil || len(ans[0].Globals) != 0 {
		t.Fatalf("query after delete: %+v", ans)
	}
	if st, _ := get(fmt.Sprintf("start_time=%d&tsuid=000001000001000001", t1)); st != 200 {
		t.Fatalf("tsuid annotation after deleting the global one: %d", st)
	}
	// Bad requests.
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/annotation", ""},
		{"GET", "/api/annotation?start_time=x", ""},
		{"POST", "/api/annotation", `{"description":"no time"}`},
		{"POST", "/api/annotation", `{"startTime":` + fmt.Sprint(t1) + `,"description":"` + strings.Repeat("d", 2000) + `"}`},
	} {
		if st, b, _ := e.do(c.method, c.path, c.body); st != http.StatusBadRequest {
			t.Errorf("%s %s %.60s: %d %s, want 400", c.method, c.path, c.body, st, b)
		}
	}
}

func TestAnnotation_SurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	t1 := time.Now().Add(-time.Hour).Unix()
	serveOnce := func(do func(url string)) {
		n, err := node.Open(node.Options{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		newAPI(n, &httpapi.Config{}).register(mux)
		srv := httptest.NewServer(mux)
		do(srv.URL)
		srv.Close()
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	serveOnce(func(u string) {
		resp, err := http.Post(u+"/api/annotation", "application/json",
			strings.NewReader(fmt.Sprintf(`{"startTime":%d,"description":"before restart"}`, t1)))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("POST: %v %v", resp, err)
		}
		resp.Body.Close()
	})
	serveOnce(func(u string) {
		resp, err := http.Get(fmt.Sprintf("%s/api/annotation?start_time=%d", u, t1))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var got annotation
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&got) != nil || got.Description != "before restart" {
			t.Fatalf("after restart: %d %+v", resp.StatusCode, got)
		}
	})
}
