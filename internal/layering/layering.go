// Package layering states the import rules of the project's packages (the
// layering written down in docs/architecture.md, "Layering") and checks a
// package graph against them. Its test runs the check on the module, so
// `make test` and `make lint` fail when an import runs the wrong way.
//
// Each Rule's Text appears word for word in docs/architecture.md, and the
// test fails if it does not: the rules and their prose cannot drift apart.
//
// Check keeps no state and is safe for concurrent use.
package layering

import (
	"fmt"
	"slices"
	"strings"
)

// Module is the project's module path; rules name packages relative to it.
const Module = "github.com/tributarydb/tributary"

// Package is one node of the import graph (what `go list -deps -json`
// says of it, test files excluded).
type Package struct {
	// Path is the import path; a project package's is relative to Module
	// ("node/wal"), any other's is as imported ("github.com/linxGnu/grocksdb").
	Path     string
	Imports  []string // direct imports, paths as in Path
	Standard bool     // part of the standard library
	Cgo      bool     // has cgo files
	Project  bool     // inside Module
}

// Rule constrains what some project packages may depend on, directly or
// through others.
type Rule struct {
	ID string // "L1", ...
	// Text is the rule as docs/architecture.md states it; empty when the
	// rule continues the one of the same ID before it.
	Text string
	// From selects the constrained packages: a pattern "x" is the package
	// x, "x/..." is x and every package below it.
	From []string
	// Except exempts packages that From selects.
	Except []string
	// Deny says whether one dependency of a constrained package (or the
	// package itself) breaks the rule.
	Deny func(dep *Package) bool
	// Direct: only direct imports count (default: every dependency,
	// however deep).
	Direct bool
}

// Match reports whether path matches one of the patterns.
func Match(path string, patterns ...string) bool {
	for _, p := range patterns {
		if base, ok := strings.CutSuffix(p, "/..."); ok {
			if path == base || strings.HasPrefix(path, base+"/") {
				return true
			}
		} else if path == p {
			return true
		}
	}
	return false
}

// projectIn denies project packages matching patterns.
func projectIn(patterns ...string) func(*Package) bool {
	return func(d *Package) bool { return d.Project && Match(d.Path, patterns...) }
}

// projectOutside denies project packages matching none of patterns.
func projectOutside(patterns ...string) func(*Package) bool {
	return func(d *Package) bool { return d.Project && !Match(d.Path, patterns...) }
}

// usesCgo: a package outside the standard library with cgo files.
func usesCgo(d *Package) bool { return d.Cgo && !d.Standard }

// Leaves are the format and vocabulary packages (see L4).
var Leaves = []string{"model/...", "node/labels", "node/rollup", "node/chunk", "node/record", "node/wal/...", "node/segment", "replicator/wire", "internal/vfs", "internal/binread", "internal/enum", "proto/..."}

// Rules are the project's import rules.
var Rules = []Rule{
	{
		ID:     "L1",
		Text:   "cgo stays at the edge: `node/internal/store` is the only package of the project with cgo files or a direct import of a third-party package that has them (grocksdb).",
		From:   []string{"..."},
		Except: []string{"node/internal/store"},
		Deny:   func(d *Package) bool { return usesCgo(d) && d.Path != "node/internal/store" },
		Direct: true,
	},
	{
		ID:   "L2",
		Text: "The vocabulary, the backend interface, the protocol adapters, the SDK and the coordinator's query front end link no storage engine: `model/...`, `backend`, `grpcapi`, `httpapi/...`, `mqttapi`, `rules`, `sdk/...` and `coordinator/query` depend on no package under `node/` but the pure leaves `node/labels` and `node/rollup`, and on nothing that uses cgo outside the standard library.",
		From: []string{"model/...", "backend", "grpcapi", "httpapi/...", "mqttapi", "rules", "sdk/...", "coordinator/query"},
		Deny: func(d *Package) bool {
			return usesCgo(d) || (d.Project && Match(d.Path, "node/...") && !Match(d.Path, "node/labels", "node/rollup"))
		},
	},
	{
		ID:   "L3",
		Text: "Protocol adapters sit above the interface they serve, not above a component: `model/...`, `backend`, `grpcapi`, `httpapi/...`, `mqttapi`, `rules` and `sdk/...` depend on nothing under `coordinator/`, `replicator/` or `cmd/`.",
		From: []string{"model/...", "backend", "grpcapi", "httpapi/...", "mqttapi", "rules", "sdk/..."},
		Deny: projectIn("coordinator/...", "replicator/...", "cmd/..."),
	},
	{
		ID:   "L4",
		Text: "Leaf packages (the vocabulary and its query semantics `model/...`, the formats `node/labels`, `node/rollup`, `node/chunk`, `node/record`, `node/wal/...`, `node/segment`, `replicator/wire`, the file-system seam `internal/vfs`, the primitives `internal/binread` and `internal/enum`, and the generated `proto/...`) depend on nothing of the project but other leaves.",
		From: Leaves,
		Deny: projectOutside(Leaves...),
	},
	{
		ID:   "L5",
		Text: "The storage engine sits below everything that uses it: of the project, `node/...` depends only on `node/...`, `model/...` and `internal/...`.",
		From: []string{"node/..."},
		Deny: projectOutside("node/...", "model/...", "internal/..."),
	},
	{
		ID:   "L6",
		Text: "The edge and the cloud share formats, not code: `replicator/...` depends on nothing under `coordinator/`, and `coordinator/...` on nothing under `replicator/` but `replicator/wire`.",
		From: []string{"replicator/..."},
		Deny: projectIn("coordinator/..."),
	},
	{
		ID:   "L6",
		From: []string{"coordinator/..."},
		Deny: func(d *Package) bool {
			return d.Project && Match(d.Path, "replicator/...") && d.Path != "replicator/wire"
		},
	},
	{
		ID:   "L7",
		Text: "Shared infrastructure knows no component: `internal/...` depends on nothing of the project outside `internal/` and `proto/`.",
		From: []string{"internal/..."},
		Deny: projectOutside("internal/...", "proto/..."),
	},
	{
		ID:     "L8",
		Text:   "Tests and benchmarks stay out of the product: no package outside `bench/` and `e2e/` depends on `bench/...` or `e2e/...`.",
		From:   []string{"..."},
		Except: []string{"bench/...", "e2e/..."},
		Deny:   projectIn("bench/...", "e2e/..."),
	},
	{
		ID:   "L9",
		Text: "The raft side knows no storage engine: `coordinator/catalog`, `coordinator/internal/raftlog` and `coordinator/internal/raftnode` depend on no package under `node/` but the pure leaves `node/labels` and `node/rollup` (durable files share the seam `internal/vfs`, not the WAL's packages).",
		From: []string{"coordinator/catalog", "coordinator/internal/raftlog", "coordinator/internal/raftnode"},
		Deny: func(d *Package) bool {
			return d.Project && Match(d.Path, "node/...") && d.Path != "node/labels" && d.Path != "node/rollup"
		},
	},
}

// Violation is one dependency that breaks a rule.
type Violation struct {
	Rule *Rule
	// Chain is the import path from the constrained package to the
	// denied dependency, both included.
	Chain []string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s: %s", v.Rule.ID, strings.Join(v.Chain, " -> "))
}

// Check returns the violations of rules in graph (keyed by Path): per
// rule and constrained package, each denied dependency reached through no
// other denied one, with its shortest import chain.
func Check(graph map[string]*Package, rules []Rule) []Violation {
	var out []Violation
	for i := range rules {
		r := &rules[i]
		for _, p := range sortedKeys(graph) {
			pkg := graph[p]
			if !pkg.Project || !matchFrom(p, r.From) || Match(p, r.Except...) {
				continue
			}
			chains := reach(graph, p, r.Direct)
			denied := map[string]bool{}
			for _, chain := range chains {
				if d := graph[chain[len(chain)-1]]; d != nil && r.Deny(d) {
					denied[d.Path] = true
				}
			}
			for _, chain := range chains {
				// Report where the rule is first broken, not every
				// package behind it.
				last := len(chain) - 1
				if denied[chain[last]] && !slices.ContainsFunc(chain[:last], func(p string) bool { return denied[p] }) {
					out = append(out, Violation{Rule: r, Chain: chain})
				}
			}
		}
	}
	return out
}

// matchFrom is Match where "..." alone selects every package.
func matchFrom(path string, patterns []string) bool {
	return slices.Contains(patterns, "...") || Match(path, patterns...)
}

// reach returns from itself, then, for every package from depends on
// (only its direct imports when direct), one shortest import chain from
// it, sorted by the dependency's path.
func reach(graph map[string]*Package, from string, direct bool) [][]string {
	prev := map[string]string{from: ""}
	queue := []string{from}
	var found []string
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		pkg := graph[p]
		if pkg == nil {
			continue
		}
		for _, imp := range pkg.Imports {
			if _, seen := prev[imp]; seen {
				continue
			}
			prev[imp] = p
			found = append(found, imp)
			if !direct {
				queue = append(queue, imp)
			}
		}
	}
	slices.Sort(found)
	out := make([][]string, 0, 1+len(found))
	out = append(out, []string{from})
	for _, d := range found {
		var chain []string
		for p := d; p != ""; p = prev[p] {
			chain = append(chain, p)
		}
		slices.Reverse(chain)
		out = append(out, chain)
	}
	return out
}

func sortedKeys(m map[string]*Package) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
