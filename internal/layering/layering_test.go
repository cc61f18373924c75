package layering_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tributarydb/tributary/internal/layering"
)

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil || !bytes.HasPrefix(mod, []byte("module "+layering.Module+"\n")) {
		t.Fatalf("%s is not the module root (%v)", dir, err)
	}
	return dir
}

// loadGraph lists every package of the module and everything it depends
// on (test files excluded), as `go build` sees them.
func loadGraph(t *testing.T) map[string]*layering.Package {
	t.Helper()
	goCmd := os.Getenv("GO")
	if goCmd == "" {
		goCmd = "go" // go test puts its own go first on PATH
	}
	cmd := exec.Command(goCmd, "list", "-e", "-deps", "-json=ImportPath,Imports,Standard,CgoFiles,Error", "./...")
	cmd.Dir = moduleRoot(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	rel := func(p string) (string, bool) {
		if r, ok := strings.CutPrefix(p, layering.Module+"/"); ok {
			return r, true
		}
		return p, false
	}
	graph := map[string]*layering.Package{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Standard   bool
			CgoFiles   []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		path, project := rel(p.ImportPath)
		pkg := &layering.Package{Path: path, Standard: p.Standard, Cgo: len(p.CgoFiles) > 0, Project: project}
		for _, imp := range p.Imports {
			r, _ := rel(imp)
			pkg.Imports = append(pkg.Imports, r)
		}
		graph[path] = pkg
	}
	return graph
}

func TestModule_FollowsTheLayeringRules(t *testing.T) {
	graph := loadGraph(t)
	// The check must be looking at the real graph: the engine and its cgo
	// dependency are in it, and every rule constrains some package (a
	// renamed package must not leave a rule checking nothing).
	if s := graph["node/internal/store"]; s == nil || !s.Cgo || !slices.Contains(s.Imports, "github.com/linxGnu/grocksdb") {
		t.Fatalf("node/internal/store is missing from the graph or does not use cgo: %+v", s)
	}
	for _, r := range layering.Rules {
		for _, pat := range r.From {
			if pat == "..." {
				continue
			}
			found := false
			for p, pkg := range graph {
				found = found || (pkg.Project && layering.Match(p, pat))
			}
			if !found {
				t.Errorf("%s: no package matches %q", r.ID, pat)
			}
		}
	}
	for _, v := range layering.Check(graph, layering.Rules) {
		t.Errorf("import breaks rule %s (docs/architecture.md, Layering)", v)
	}
}

func TestRules_AreTheOnesDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, r := range layering.Rules {
		ids[r.ID] = true
		if r.Text == "" {
			continue
		}
		if line := "**" + r.ID + ".** " + r.Text; !bytes.Contains(doc, []byte(line)) {
			t.Errorf("docs/architecture.md does not state rule %s as checked:\n%s", r.ID, line)
		}
	}
	for _, m := range regexp.MustCompile(`\*\*(L[0-9]+)\.\*\*`).FindAllSubmatch(doc, -1) {
		if !ids[string(m[1])] {
			t.Errorf("docs/architecture.md states rule %s, which is not checked", m[1])
		}
	}
}

// graphOf builds a graph from "a -> b" edges; a name ending in "*" uses
// cgo, a name with a dot is a third-party package, "std:" a standard one.
func graphOf(edges ...string) map[string]*layering.Package {
	g := map[string]*layering.Package{}
	get := func(name string) *layering.Package {
		cgo := strings.HasSuffix(name, "*")
		name = strings.TrimSuffix(name, "*")
		std := strings.HasPrefix(name, "std:")
		name = strings.TrimPrefix(name, "std:")
		if g[name] == nil {
			g[name] = &layering.Package{Path: name, Standard: std, Project: !std && !strings.Contains(name, ".")}
		}
		g[name].Cgo = g[name].Cgo || cgo
		return g[name]
	}
	for _, e := range edges {
		from, to, _ := strings.Cut(e, " -> ")
		f, t := get(from), get(to)
		f.Imports = append(f.Imports, t.Path)
	}
	return g
}

func TestCheck_ReportsEachBrokenRuleWithItsChain(t *testing.T) {
	// The project as it is, in miniature: no violation.
	base := []string{
		"grpcapi -> backend", "backend -> model", "model -> node/labels", "model -> node/rollup",
		"httpapi/prom -> backend", "httpapi/prom -> internal/telemetry",
		"node -> model", "node -> node/internal/store", "node/internal/store* -> github.com/linxGnu/grocksdb*",
		"node -> std:net*", "node/segment -> node/wal", "node/wal -> internal/vfs", "replicator/wire -> proto/tributary/v1",
		"coordinator/intake -> replicator/wire", "coordinator/replica -> node", "coordinator/query -> coordinator/catalog",
		"coordinator/catalog -> node/labels", "coordinator/internal/raftnode -> coordinator/catalog",
		"coordinator/internal/raftnode -> coordinator/internal/raftlog", "coordinator/internal/raftlog -> internal/vfs",
		"replicator/internal/cursor -> internal/vfs",
		"replicator -> node", "cmd/tributary -> grpcapi", "cmd/tributary -> coordinator/replica", "cmd/tributary -> replicator",
		"bench/internal/x -> node",
	}
	if vs := layering.Check(graphOf(base...), layering.Rules); len(vs) != 0 {
		t.Fatalf("violations in a clean graph: %v", vs)
	}
	for _, tc := range []struct {
		edge string // added to the clean graph
		want []string
	}{
		{"backend -> node", []string{"L2: backend -> node", "L2: grpcapi -> backend -> node", "L2: httpapi/prom -> backend -> node"}},
		{"replicator -> github.com/mattn/go-sqlite3*", []string{"L1: replicator -> github.com/mattn/go-sqlite3"}},
		{"coordinator/query -> node/chunk", []string{"L2: coordinator/query -> node/chunk"}},
		{"httpapi/prom -> coordinator/query", []string{"L3: httpapi/prom -> coordinator/query"}},
		{"node/wal -> node", []string{"L4: node/segment -> node/wal -> node", "L4: node/wal -> node"}},
		{"internal/vfs -> internal/telemetry", []string{"L4: internal/vfs -> internal/telemetry",
			"L4: node/segment -> node/wal -> internal/vfs -> internal/telemetry", "L4: node/wal -> internal/vfs -> internal/telemetry"}},
		{"node -> grpcapi", []string{"L5: node -> grpcapi"}},
		{"replicator -> coordinator/catalog", []string{"L6: replicator -> coordinator/catalog"}},
		{"coordinator/intake -> replicator", []string{"L6: coordinator/intake -> replicator"}},
		{"internal/telemetry -> node", []string{"L2: httpapi/prom -> internal/telemetry -> node", "L7: internal/telemetry -> node"}},
		{"coordinator/internal/raftlog -> node/wal", []string{"L9: coordinator/internal/raftlog -> node/wal",
			"L9: coordinator/internal/raftnode -> coordinator/internal/raftlog -> node/wal"}},
		{"replicator -> bench/internal/x", []string{"L8: cmd/tributary -> replicator -> bench/internal/x", "L8: replicator -> bench/internal/x"}},
	} {
		var got []string
		for _, v := range layering.Check(graphOf(append(slices.Clone(base), tc.edge)...), layering.Rules) {
			got = append(got, v.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("with %s: violations\n%q, want\n%q", tc.edge, got, tc.want)
		}
	}
}
