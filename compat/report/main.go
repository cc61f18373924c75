// Command report reads `go test -json` output of the compat package on
// stdin and prints one row per client (top-level test TestCompat_<Client>:
// result and seconds), then one JSON line
// {"clients":N,"passed":N,"failed":N}. A skipped client counts as failed:
// `make compat` runs them all. It exits 1 when a client failed, none ran,
// or the package failed outside a test (a build error).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
)

// event is one test2json record.
type event struct {
	Action  string  `json:"Action"`
	Test    string  `json:"Test"`
	Elapsed float64 `json:"Elapsed"`
	Output  string  `json:"Output"`
}

type row struct {
	client, result string
	seconds        float64
	output         []string
}

func main() {
	rows := map[string]*row{}
	pkgFailed := false
	var pkgOutput []string
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			pkgOutput = append(pkgOutput, sc.Text()) // a build error is not JSON
			continue
		}
		top, _, sub := strings.Cut(e.Test, "/")
		if e.Test == "" {
			if e.Action == "fail" {
				pkgFailed = true
			}
			if e.Action == "output" {
				pkgOutput = append(pkgOutput, strings.TrimRight(e.Output, "\n"))
			}
			continue
		}
		client, ok := strings.CutPrefix(top, "TestCompat_")
		if !ok {
			continue
		}
		r := rows[client]
		if r == nil {
			r = &row{client: client, result: "?"}
			rows[client] = r
		}
		switch {
		case e.Action == "output" && len(r.output) < 400:
			r.output = append(r.output, strings.TrimRight(e.Output, "\n"))
		case !sub && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			r.result, r.seconds = e.Action, e.Elapsed
		}
	}
	names := make([]string, 0, len(rows))
	for n := range rows {
		names = append(names, n)
	}
	slices.Sort(names)
	passed := 0
	fmt.Printf("%-20s %-6s %8s\n", "client", "result", "seconds")
	for _, n := range names {
		r := rows[n]
		fmt.Printf("%-20s %-6s %8.1f\n", r.client, r.result, r.seconds)
		if r.result == "pass" {
			passed++
		}
	}
	for _, n := range names {
		if r := rows[n]; r.result != "pass" {
			fmt.Printf("\n--- %s (%s):\n%s\n", n, r.result, strings.Join(r.output, "\n"))
		}
	}
	failed := len(names) - passed
	if len(names) == 0 || (pkgFailed && failed == 0) {
		// No client ran, or the package failed outside them (a build
		// error, a panic in TestMain): that is a failure too.
		fmt.Printf("\n--- package:\n%s\n", strings.Join(pkgOutput, "\n"))
		failed = max(failed, 1)
	}
	line, _ := json.Marshal(struct {
		Clients int `json:"clients"`
		Passed  int `json:"passed"`
		Failed  int `json:"failed"`
	}{len(names), passed, failed})
	fmt.Println(string(line))
	if failed > 0 || len(names) == 0 {
		os.Exit(1)
	}
}
