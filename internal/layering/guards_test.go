package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// graphStd is every standard-library package graph may import: graph does
// no I/O (ARCHITECTURE.md), so nothing here opens a file, a socket or a
// process, reads the environment or the machine. Artifacts reach it as an
// fs.FS the caller builds; time is read through the injected clock. Adding a
// package here is a design change: say why in the commit.
var graphStd = []string{
	"bytes", "cmp", "context", "encoding/json", "errors", "fmt",
	"io/fs",                   // the interfaces artifacts come through (no opening)
	"maps", "math", "runtime", // runtime: Gosched in the worker pool, stacks of a hook that panicked
	"slices", "sort", "strconv", "strings", "sync", "sync/atomic", "time", "unicode", "unicode/utf8",
	"unsafe", // zero-copy string views of borrowed artifact bytes
}

// TestGraphImportsOnlyPureStandardLibrary holds graph (the package, not
// its subpackages: graphfile reads YAML, graphtest is a test double) to
// the standard-library packages of graphStd, so "graph does no I/O" is
// checked against os, net, os/exec, syscall, … and not only against the
// module's own packages.
func TestGraphImportsOnlyPureStandardLibrary(t *testing.T) {
	root := moduleRoot(t)
	dir := filepath.Join(root, "graph")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	fset := token.NewFileSet()
	files := 0
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ImportsOnly)
		require.NoError(t, err)
		files++
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") {
				continue // a module import: TestDependencyDirection holds those
			}
			if !slices.Contains(graphStd, p) {
				t.Errorf("graph/%s imports %q: graph does no I/O and may use only %s (inject what it needs through graph.Options or HookContext, or add the package to graphStd with the reason)", name, p, strings.Join(graphStd, ", "))
			}
		}
	}
	require.Positive(t, files, "graph's files were read")
}

// TestPackagesAreNamedAndDocumented: every package's name is its folder's
// (main under cmd/, examples/ and internal generators), and one of its files carries the
// package's doc comment, so `go doc` says what each part is for.
func TestPackagesAreNamedAndDocumented(t *testing.T) {
	root := moduleRoot(t)
	type pkg struct {
		names map[string]bool
		doc   bool
	}
	pkgs := map[string]*pkg{}
	fset := token.NewFileSet()
	err := walkGo(root, func(path, rel string, test bool) error {
		if test {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		p := pkgs[dir]
		if p == nil {
			p = &pkg{names: map[string]bool{}}
			pkgs[dir] = p
		}
		p.names[f.Name.Name] = true
		if f.Doc != nil && strings.HasPrefix(strings.TrimSpace(f.Doc.Text()), "Package "+f.Name.Name) || f.Name.Name == "main" && f.Doc != nil {
			p.doc = true
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, pkgs, "graph", "the walk found the module's packages")
	for dir, p := range pkgs {
		want := filepath.Base(dir)
		if dir == "." {
			continue // the module root holds no package
		}
		for name := range p.names {
			if name != want && name != "main" {
				t.Errorf("%s: package %s: name it after its folder (package %s), or move it to a folder of its name", dir, name, want)
			}
			if name == "main" && !strings.HasPrefix(dir, "cmd/") && !strings.HasPrefix(dir, "examples/") && !strings.Contains("/"+dir+"/", "/internal/") {
				t.Errorf("%s: a main package outside cmd/, examples/ and internal tools", dir)
			}
		}
		if !p.doc {
			t.Errorf("%s: no package doc comment: add one (`// Package %s …` above the package clause of one file, or a doc.go) saying its job and its boundaries", dir, want)
		}
	}
}

// machinePaths are paths of the machines theloop is built on: a literal or
// comment naming one works on one machine only (a skip message telling a
// newcomer to look in the build machine's shared folder, a fixture path
// that exists only there). Paths a test makes up (/home/u, /srv/work/…) are
// fine. Each is spelled in two halves so this file does not name them.
var machinePaths = []string{"/work" + "/shared", "/work" + "/main", "/work" + "/wt/", "/work" + "/.library", "/ro" + "ot/", "/check" + "/work"}

// TestNoMachinePaths fails on a string literal or comment, in code or
// tests, that names a path of a build machine; shared material is found
// relative to the repository (../shared/...).
func TestNoMachinePaths(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	checked := 0
	err := walkGo(root, func(path, rel string, _ bool) error {
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		check := func(pos token.Pos, text string) {
			for _, m := range machinePaths {
				if strings.Contains(text, m) {
					t.Errorf("%s:%d names the machine path %s: find it relative to the repository (../shared/...) or from the environment", rel, fset.Position(pos).Line, m)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if l, ok := n.(*ast.BasicLit); ok && l.Kind == token.STRING {
				check(l.Pos(), l.Value)
			}
			return true
		})
		for _, c := range f.Comments {
			check(c.Pos(), c.Text())
		}
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, checked, 100, "the walk read the module's files")
}

// walkGo calls fn for every .go file of the module that is the project's
// own (not under testdata, dot or underscore folders, or vendored
// third_party code), with its path relative to root.
func walkGo(root string, fn func(path, rel string, test bool) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "third_party") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		return fn(path, filepath.ToSlash(rel), strings.HasSuffix(name, "_test.go"))
	})
}

// environOK are the production files that may hand os.Environ() on as it
// is, each for a program of loopd's or the user's own, never the agent's.
var environOK = map[string]string{
	"cmd/loopd/restart.go":            "loopd re-executes itself",
	"loop/daemon/sandbox/scrub.go":    "loopd rewrites its own environment block, it starts nothing",
	"run/env.go":                      "InheritEnv: the named way to pass everything, for the user's own CLI",
	"internal/procbench/procbench.go": "benchmark support: builds test programs",
}

// Every program loopd starts gets an allowlisted environment (decision
// 22): outside environOK, os.Environ() is only ever the first argument of
// an allowlist — sandbox.Env, sandbox.ChildEnv or run.AllowedEnv.
func TestEnvironIsAllowlistedBeforeItIsPassedOn(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	allowlists := map[string]bool{"Env": true, "ChildEnv": true, "AllowedEnv": true}
	found := 0
	err := walkGo(root, func(path, rel string, test bool) error {
		if test {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		filtered := map[ast.Node]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			name := ""
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				name = fn.Name
			case *ast.SelectorExpr:
				name = fn.Sel.Name
			}
			if allowlists[name] && len(call.Args) > 0 {
				filtered[call.Args[0]] = true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Environ" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "os" {
					found++
					if _, ok := environOK[filepath.ToSlash(rel)]; !ok && !filtered[call] {
						t.Errorf("%s:%d passes os.Environ() on unfiltered: give the program sandbox.ChildEnv / run.AllowedEnv(os.Environ(), <the names it needs>)", rel, fset.Position(call.Pos()).Line)
					}
				}
			}
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.Greater(t, found, 3, "the walk met the module's os.Environ() calls")
}
