package influxql

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
)

// fixture is one request of testdata/answers.txt and its answer.
type fixture struct {
	name, method, query, body string
	status                    int
	want                      string
}

func readFixtures(t *testing.T, path string) []fixture {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []fixture
	for _, sec := range strings.Split(string(raw), "\n=== ")[1:] {
		name, rest, _ := strings.Cut(sec, "\n")
		f := fixture{name: name}
		sc := bufio.NewScanner(strings.NewReader(rest))
		var body []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case f.status == 0 && strings.HasPrefix(line, "request: "):
				f.method, f.query, _ = strings.Cut(strings.TrimPrefix(line, "request: "), " ")
			case f.status == 0 && strings.HasPrefix(line, "body: "):
				f.body = strings.TrimPrefix(line, "body: ")
			case f.status == 0 && strings.HasPrefix(line, "status: "):
				if f.status, err = strconv.Atoi(strings.TrimPrefix(line, "status: ")); err != nil {
					t.Fatalf("fixture %q: %v", name, err)
				}
			case f.status != 0:
				body = append(body, line)
			}
		}
		f.want = strings.TrimRight(strings.Join(body, "\n"), "\n") + "\n"
		out = append(out, f)
	}
	return out
}

// loadFixtureData writes testdata/data.lp to mydb and one point to other.
func loadFixtureData(e *testEnv) {
	raw, err := os.ReadFile("testdata/data.lp")
	if err != nil {
		e.t.Fatal(err)
	}
	e.write("mydb", string(raw))
	e.write("other", "weather,city=paris temp=21.5 1780300800\n")
}

// do sends the fixture's request and returns the status and body.
func (e *testEnv) do(f fixture) (int, string) {
	e.t.Helper()
	var req *http.Request
	var err error
	if f.body != "" {
		req, err = http.NewRequest(f.method, e.srv.URL+"/query?"+f.query, strings.NewReader(f.body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req, err = http.NewRequest(f.method, e.srv.URL+"/query?"+f.query, nil)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		e.t.Errorf("%s: Content-Type %q, want application/json", f.name, ct)
	}
	if v := resp.Header.Get("X-Influxdb-Version"); v == "" {
		e.t.Errorf("%s: no X-Influxdb-Version header", f.name)
	}
	return resp.StatusCode, string(b)
}

// TestQuery_AnswersAsInfluxDB runs every request of testdata/answers.txt
// (InfluxDB 1.8's documented answers and Grafana's requests) against a
// node holding testdata/data.lp and requires the exact answer.
func TestQuery_AnswersAsInfluxDB(t *testing.T) {
	e := newTestEnv(t, Options{})
	loadFixtureData(e)
	fixtures := readFixtures(t, "testdata/answers.txt")
	if len(fixtures) < 40 {
		t.Fatalf("read %d fixtures; the file holds more", len(fixtures))
	}
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			status, body := e.do(f)
			if status != f.status || body != f.want {
				t.Errorf("%s %s\ngot  %d %s\nwant %d %s", f.method, f.query, status, body, f.status, f.want)
			}
		})
	}
}
