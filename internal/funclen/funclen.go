// Package funclen finds the functions too long to read at once: a
// function or method declaration of more than MaxLines lines, from its
// func keyword to its closing brace, in a Go file that is neither a test
// nor generated code. Its test runs Scan on the module, so `make test` and
// `make lint` fail, naming each one, when a function grows past the limit
// (docs/architecture.md, "Function length").
//
// Scan keeps no state and is safe for concurrent use.
package funclen

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MaxLines is the longest a function may be.
const MaxLines = 120

// Func is one function over the limit.
type Func struct {
	File  string // relative to the directory scanned, slash-separated
	Line  int    // of its func keyword
	Name  string // Name, or Type.Name for a method
	Lines int
}

func (f Func) String() string {
	return fmt.Sprintf("%s:%d: %s is %d lines (limit %d)", f.File, f.Line, f.Name, f.Lines, MaxLines)
}

// Scan returns the functions of more than limit lines in the Go files
// under root, sorted by file and line. Test files (_test.go), generated
// files (a "Code generated ... DO NOT EDIT." comment before the package
// clause) and the directories the go command ignores (testdata, and names
// starting with "." or "_") are skipped. A file that does not parse is an
// error.
func Scan(root string, limit int) ([]Func, error) {
	var out []Func
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		if ast.IsGenerated(f) {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		out = append(out, long(fset, f, filepath.ToSlash(rel), limit)...)
		return nil
	})
	slices.SortFunc(out, func(a, b Func) int {
		return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
	return out, err
}

// long returns the declarations of f longer than limit lines.
func long(fset *token.FileSet, f *ast.File, file string, limit int) []Func {
	var out []Func
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		start, end := fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
		if n := end - start + 1; n > limit {
			out = append(out, Func{File: file, Line: start, Name: funcName(fd), Lines: n})
		}
	}
	return out
}

// funcName is Name, or Type.Name for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr: // a generic receiver T[P]
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
