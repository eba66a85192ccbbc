package layering

import (
	"errors"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/theloop-dev/theloop"

// rule limits what one package (or, with a trailing "/...", a package and
// everything under it) may import from this module. allow entries ending in
// "/..." match a whole subtree.
type rule struct {
	pkg   string
	allow []string
}

// The direction of README's "How it is built": cmd → daemon parts (loop/…)
// → ingress, sessions, integrations → loop → hooks → graph, with the leaf
// vocabularies (ops, workitem, run) and internal/ helpers below them all.
var rules = []rule{
	{"graph", []string{"internal/jsonascii"}}, // pure helpers only: graph does no I/O
	{"graph/graphfile", []string{"graph", "internal/..."}},
	{"graph/graphtest", []string{"graph", "ops", "internal/..."}},
	{"ops", []string{"graph"}},
	{"workitem", []string{"internal/..."}},
	{"run/...", []string{"run", "internal/..."}},
	{"internal/...", []string{"internal/..."}},
	{"hooks", []string{"graph", "ops", "workitem", "internal/..."}},
	{"loop", []string{"graph", "graph/graphfile", "hooks", "ops", "workitem", "run", "internal/..."}},
	{"sessions", []string{"plugin", "workitem", "run", "internal/..."}},
	// The agent's side: the embedded plugin files, and the installer that
	// loopctl links (nothing of the daemon).
	{"plugin", []string{"internal/..."}},
	{"plugin/install", []string{"plugin", "run", "internal/..."}},
	// The sandbox is a leaf under the daemon: std, go-landlock and x/sys
	// only, so sessions' seam can be implemented without a cycle.
	{"loop/daemon/sandbox", []string{"internal/..."}},
	{"integrations", []string{"graph", "ops", "workitem", "run", "internal/..."}},
	{"integrations/githubsim", []string{"internal/..."}},
	{"ingress", []string{"graph", "hooks", "loop", "sessions", "integrations", "ops", "workitem", "run", "internal/..."}},
	// The control-plane client and its wire types are linked into every
	// loopctl call: the graph vocabulary and nothing of the daemon.
	{"loop/api", []string{"graph", "internal/..."}},
	// The dashboard's login handshake is what loopctl dashboard links: no
	// dashboard pages, no runtime.
	{"loop/api/login", []string{"internal/..."}},
	// The control-plane server is mounted by the daemon: who may call it
	// (the sandbox check on a socket peer) is injected, never imported.
	{"loop/daemon/apiserver", []string{"graph", "graph/graphfile", "loop", "loop/api", "loop/daemon/queue", "sessions", "workitem", "run", "internal/..."}},
}

// TestDependencyDirection fails when a package imports something above it,
// naming the file and the import. Test files are not checked (an external
// test package may use anything).
func TestDependencyDirection(t *testing.T) {
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skipf("module root not found at %s: %v", root, err)
	}
	imports := moduleImports(t, root)
	require.Contains(t, imports, "graph", "the walk found the module's packages")

	for pkg, files := range imports {
		r, ok := ruleFor(pkg)
		for file, deps := range files {
			for _, dep := range deps {
				if strings.HasPrefix(dep, "cmd/") || dep == "cmd" {
					t.Errorf("%s imports %s: no package imports a binary", file, dep)
				}
				if ok && !allowed(dep, r.allow) {
					t.Errorf("%s imports %s, which %s may not (it may import: %s)", file, dep, pkg, strings.Join(r.allow, ", "))
				}
			}
		}
	}
}

func ruleFor(pkg string) (rule, bool) {
	for _, r := range rules {
		if r.pkg == pkg || (strings.HasSuffix(r.pkg, "/...") && (pkg == strings.TrimSuffix(r.pkg, "/...") || strings.HasPrefix(pkg, strings.TrimSuffix(r.pkg, "...")))) {
			return r, true
		}
	}
	return rule{}, false
}

func allowed(dep string, allow []string) bool {
	for _, a := range allow {
		if base, sub := strings.CutSuffix(a, "/..."); sub {
			if dep == base || strings.HasPrefix(dep, base+"/") {
				return true
			}
		} else if dep == a {
			return true
		}
	}
	return false
}

// moduleImports maps each package (path relative to the module) to its
// non-test files and the module packages each imports.
func moduleImports(t *testing.T, root string) map[string]map[string][]string {
	t.Helper()
	out := map[string]map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		fileRel := filepath.ToSlash(filepath.Join(rel, name))
		if out[pkg] == nil {
			out[pkg] = map[string][]string{}
		}
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if dep, ok := strings.CutPrefix(p, module+"/"); ok {
				out[pkg][fileRel] = append(out[pkg][fileRel], dep)
			}
		}
		sort.Strings(out[pkg][fileRel])
		return nil
	})
	require.NoError(t, err)
	return out
}

// thinBinaries are run on every agent claim, every CI check and every Stop
// hook: their start-up is paid each time, so they link no daemon part.
var thinBinaries = []string{"./cmd/loopctl", "./cmd/loop-gate"}

// heavyDeps are the packages (path prefixes) a thin binary must not link:
// the embedded NATS server and its client (loop/queue), html/template (the
// dashboard's pages), the MCP SDK (loopd mcp), chromedp (browser tests).
var heavyDeps = []string{
	"github.com/nats-io/nats-server",
	"github.com/nats-io/nats.go",
	"html/template",
	"github.com/modelcontextprotocol/go-sdk",
	"github.com/chromedp",
}

// TestThinBinariesLinkNoDaemon fails when `go list -deps` of loopctl or
// loop-gate contains a heavy dependency, naming the module package that
// pulls it in (go list's ImportPath/Imports walk), so the fix is a move,
// not a hunt.
func TestThinBinariesLinkNoDaemon(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH: the link-set rule needs `go list -deps`")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	for _, bin := range thinBinaries {
		t.Run(strings.TrimPrefix(bin, "./cmd/"), func(t *testing.T) {
			cmd := exec.Command(gotool, "list", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", bin)
			cmd.Dir = root
			out, err := cmd.Output()
			var xe *exec.ExitError
			if errors.As(err, &xe) {
				t.Fatalf("go list -deps %s: %v\n%s", bin, err, xe.Stderr)
			}
			require.NoError(t, err)
			importers := map[string][]string{} // package → module packages importing it
			var deps []string
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				pkg, imps, _ := strings.Cut(line, "\t")
				deps = append(deps, pkg)
				if !strings.HasPrefix(pkg, module) {
					continue
				}
				for _, imp := range strings.Fields(imps) {
					importers[imp] = append(importers[imp], pkg)
				}
			}
			require.Contains(t, deps, module+"/graph", "go list walked %s", bin)
			for _, dep := range deps {
				for _, heavy := range heavyDeps {
					if dep == heavy || strings.HasPrefix(dep, heavy+"/") {
						t.Errorf("%s links %s (imported by %v): move what needs it behind loopd", bin, dep, importers[dep])
					}
				}
			}
		})
	}
}
