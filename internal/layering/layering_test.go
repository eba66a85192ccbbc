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
// "/..." match a whole subtree. floor places the package in the layering:
// a package may import only packages on lower floors (TestRulesPointDown),
// so no arrow runs back up.
type rule struct {
	floor int
	pkg   string
	allow []string
}

// Floors, top to bottom, in the direction of README's "How it is built":
// cmd → daemon parts (loop/daemon/…) → ingress, sessions, integrations →
// loop → hooks → graph, with the leaf vocabularies (ops, workitem, run) and
// internal/ helpers below them all.
const (
	floorCmd        = 13 // the binaries
	floorDemo       = 12 // loopd demo, the embedding examples
	floorDaemon     = 11 // loopd's assembly (loop/daemon)
	floorDaemonTop  = 10 // daemon parts built on other daemon parts
	floorDaemonPart = 9  // daemon parts (API server, dashboard, dispatch, …)
	floorDaemonBase = 8  // the queue, leases, sandbox, systemd; loop-gate's check; the demo agent
	floorIngress    = 7  // webhooks and the poller → routed events
	floorEdges      = 6  // sessions, integrations, the API client
	floorLoop       = 5  // the repository-side library the CLI and the daemon share
	floorHooks      = 4  // the shipped hooks; graph test doubles
	floorVocabulary = 3  // ops, graph/graphfile
	floorKernel     = 2  // graph, workitem, plugin, the command stub, the GitHub stand-in
	floorLeaf       = 1  // run
	floorInternal   = 0  // internal/ helpers: they import nothing of ours but each other
)

// rules has one entry for every package of the module
// (TestEveryPackageHasARule); ruleFor takes the first that matches.
var rules = []rule{
	// loop-gate runs on every Stop: its check and the version, nothing else.
	{floorCmd, "cmd/loop-gate", []string{"harness", "loop/stopgate", "internal/..."}},
	// loopctl runs on every claim and check: no daemon part, no demo
	// (TestThinBinariesLinkNoDaemon checks what that leaves it linking).
	{floorCmd, "cmd/loopctl", []string{"harness", "graph/...", "hooks", "ops", "workitem", "run", "plugin/...", "loop", "loop/api/...", "loop/demo/agent", "integrations", "sessions", "internal/..."}},
	// loop-layout lays out the dashboard's graphs; loopd runs it.
	{floorCmd, "cmd/loop-layout", []string{"loop/daemon/dashboard/dotlayout"}},
	{floorCmd, "cmd/loopd", []string{"harness", "graph/...", "hooks", "ops", "workitem", "run", "plugin/...", "loop", "loop/api/...", "loop/daemon/...", "loop/demo", "loop/demo/agent", "ingress", "integrations", "sessions", "internal/..."}},

	{floorDemo, "loop/demo", []string{"harness", "graph", "workitem", "run", "loop", "loop/daemon", "loop/daemon/sandbox", "loop/demo/agent", "integrations", "integrations/githubsim", "sessions", "internal/..."}},
	// The examples embed the public library: the kernel and its file
	// format, and the control plane's client — nothing of the daemon.
	{floorDemo, "examples/...", []string{"graph/...", "hooks", "ops", "workitem", "run", "loop", "loop/api"}},

	{floorDaemon, "loop/daemon", []string{"harness", "graph/...", "hooks", "ops", "workitem", "run", "loop", "loop/api", "loop/daemon/...", "ingress", "integrations", "sessions", "internal/..."}},
	// MCP is served beside the API and speaks through the API server's
	// graph operations.
	{floorDaemonTop, "loop/daemon/mcpserver", []string{"graph", "hooks", "ops", "workitem", "loop", "loop/api", "loop/daemon/apiserver", "sessions", "internal/..."}},
	// The control-plane server is mounted by the daemon: who may call it
	// (the sandbox check on a socket peer) is injected, never imported.
	{floorDaemonPart, "loop/daemon/apiserver", []string{"graph", "graph/graphfile", "loop", "loop/api", "loop/daemon/queue", "sessions", "workitem", "run", "internal/..."}},
	// Graphviz behind loop-layout: nothing of ours.
	{floorDaemonBase, "loop/daemon/dashboard/dotlayout", nil},
	// The dashboard's pull-request and CI view reads what each event kind
	// means from ingress's table of event kinds.
	{floorDaemonPart, "loop/daemon/dashboard", []string{"graph", "hooks", "ops", "loop", "loop/api", "loop/api/login", "ingress", "internal/..."}},
	{floorDaemonPart, "loop/daemon/dispatch", []string{"ingress", "loop/daemon/lease", "loop/daemon/queue", "internal/..."}},
	{floorDaemonPart, "loop/daemon/metrics", []string{"graph", "ingress", "loop", "loop/daemon/queue", "internal/..."}},
	{floorDaemonPart, "loop/daemon/outbox", []string{"graph", "ops", "workitem", "loop", "integrations", "internal/..."}},
	// The Slack channel decides nothing: the daemon implements its Backend
	// (authorization, the ticket, the session), so it needs only the
	// vocabulary and the comment marker.
	{floorDaemonPart, "loop/daemon/slackchan", []string{"graph", "hooks", "workitem", "internal/..."}},
	{floorDaemonBase, "loop/daemon/queue", []string{"ingress", "internal/..."}},
	{floorDaemonBase, "loop/daemon/lease", []string{"internal/..."}},
	// The sandbox is a leaf under the daemon: std, go-landlock and x/sys,
	// and run's environment allowlist (one list for every child loopd
	// starts), so sessions' seam can be implemented without a cycle.
	{floorDaemonBase, "loop/daemon/sandbox", []string{"harness", "run", "internal/..."}},
	{floorDaemonBase, "loop/daemon/systemd", []string{"internal/..."}},
	// Usage from the harnesses' records: parsers, the ledger, the rate card;
	// the API's wire types for its reports.
	{floorDaemonBase, "loop/daemon/usage", []string{"harness", "loop/api", "internal/..."}},
	// loop-gate's check: the work item's state and the session registry.
	{floorDaemonBase, "loop/stopgate", []string{"harness", "graph", "loop", "sessions", "internal/..."}},
	// The demo's scripted agent drives loopctl's library and the API client.
	{floorDaemonBase, "loop/demo/agent", []string{"graph", "run", "loop", "loop/api", "integrations", "internal/..."}},

	// ingress is given its Config by the daemon (built from the typed
	// settings): it reads no configuration file and imports nothing of loop.
	{floorIngress, "ingress", []string{"graph", "hooks", "integrations", "ops", "workitem", "run", "internal/..."}},

	{floorEdges, "sessions", []string{"harness", "plugin", "workitem", "run", "internal/..."}},
	{floorEdges, "integrations", []string{"graph", "ops", "workitem", "run", "internal/..."}},
	// The control-plane client and its wire types are linked into every
	// loopctl call: the graph vocabulary and nothing of the daemon.
	{floorEdges, "loop/api", []string{"graph", "internal/..."}},
	// The dashboard's login handshake is what loopctl dashboard links: no
	// dashboard pages, no runtime.
	{floorEdges, "loop/api/login", []string{"internal/..."}},

	{floorLoop, "loop", []string{"harness", "graph", "graph/graphfile", "hooks", "ops", "workitem", "run", "internal/..."}},
	// go generate's writer of the shipped graphs' Go form.
	{floorLoop, "loop/internal/gengraphs", []string{"graph", "graph/graphfile", "hooks", "internal/..."}},

	{floorHooks, "hooks", []string{"harness", "graph", "ops", "workitem", "internal/..."}},
	{floorHooks, "graph/graphtest", []string{"graph", "ops", "internal/..."}},

	{floorVocabulary, "ops", []string{"graph"}},
	{floorVocabulary, "graph/graphfile", []string{"graph", "internal/..."}},

	{floorKernel, "graph", []string{"internal/jsonascii"}}, // pure helpers only: graph does no I/O
	{floorKernel, "workitem", []string{"internal/..."}},
	{floorKernel, "plugin", []string{"harness", "internal/..."}},
	// loopctl install's logic: the embedded plugin files written where
	// each harness reads them; nothing of the daemon.
	{floorVocabulary, "plugin/install", []string{"harness", "plugin", "run", "internal/..."}},
	{floorKernel, "run/runtest", []string{"run", "internal/..."}},
	{floorKernel, "integrations/githubsim", []string{"internal/..."}},
	{floorKernel, "loop/daemon/slackchan/slacksim", []string{"internal/..."}},
	{floorKernel, "integrations/jirasim", nil},

	// The harness descriptors are data: they import nothing of ours.
	{floorLeaf, "harness", nil},
	{floorLeaf, "run", []string{"internal/..."}},

	{floorInternal, "internal/...", []string{"internal/..."}},
}

// TestDependencyDirection fails when a package imports something above it,
// naming the file and the import. Test files are not checked (an external
// test package may use anything).
func TestDependencyDirection(t *testing.T) {
	root := moduleRoot(t)
	imports := moduleImports(t, root)
	require.Contains(t, imports, "graph", "the walk found the module's packages")

	for pkg, files := range imports {
		r, ok := ruleFor(pkg)
		if !ok {
			continue // TestEveryPackageHasARule names it
		}
		for file, deps := range files {
			for _, dep := range deps {
				if strings.HasPrefix(dep, "cmd/") || dep == "cmd" {
					t.Errorf("%s imports %s: no package imports a binary", file, dep)
				}
				if !allowed(dep, r.allow) {
					t.Errorf("%s imports %s, which %s may not (it may import: %s)", file, dep, pkg, strings.Join(r.allow, ", "))
				}
			}
		}
	}
}

// TestEveryPackageHasARule fails when a package of the module has no rule,
// so a new package is placed on a floor when it is added, not when its
// first arrow back up is found; and when a rule or an allow entry names no
// package (a move left it behind).
func TestEveryPackageHasARule(t *testing.T) {
	root := moduleRoot(t)
	imports := moduleImports(t, root)
	require.Contains(t, imports, "graph", "the walk found the module's packages")
	used := map[string]bool{}
	for pkg := range imports {
		r, ok := ruleFor(pkg)
		if !ok {
			t.Errorf("package %s has no rule in internal/layering: add one (its floor and what it may import) to rules", pkg)
			continue
		}
		used[r.pkg] = true
	}
	for _, r := range rules {
		if !used[r.pkg] {
			t.Errorf("rule %q matches no package of the module: remove it or fix its path", r.pkg)
		}
		for _, a := range r.allow {
			if len(matching(imports, a)) == 0 {
				t.Errorf("rule %q allows %q, which matches no package of the module", r.pkg, a)
			}
		}
	}
}

// TestRulesPointDown fails when a rule lets a package import one on its
// own floor or above: the allow lists draw the layering, and no arrow may
// run back up, even one no file uses yet.
func TestRulesPointDown(t *testing.T) {
	root := moduleRoot(t)
	imports := moduleImports(t, root)
	for _, r := range rules {
		for _, a := range r.allow {
			for _, dep := range matching(imports, a) {
				dr, ok := ruleFor(dep)
				if !ok || dr.pkg == r.pkg {
					continue // no rule: TestEveryPackageHasARule; the same rule: its own subtree
				}
				if dr.floor >= r.floor {
					t.Errorf("rule %q (floor %d) allows %s (floor %d, rule %q): an arrow back up — move the code or the package",
						r.pkg, r.floor, dep, dr.floor, dr.pkg)
				}
			}
		}
	}
}

// matching lists the module's packages an allow entry matches.
func matching(imports map[string]map[string][]string, allow string) []string {
	var out []string
	for pkg := range imports {
		if allowed(pkg, []string{allow}) {
			out = append(out, pkg)
		}
	}
	sort.Strings(out)
	return out
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Skipf("module root not found at %s: %v", root, err)
	}
	return root
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

// TestLoopdLinksNoGraphviz: go-graphviz compiles and instantiates its
// WebAssembly module in a package init (~40 MB of anonymous memory and a
// second of CPU in every process that links it), so loopd runs it as the
// loop-layout program when a graph page is served instead of linking it.
func TestLoopdLinksNoGraphviz(t *testing.T) {
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH: the link-set rule needs `go list -deps`")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	cmd := exec.Command(gotool, "list", "-deps", "./cmd/loopd")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err)
	require.Contains(t, string(out), module+"/loop/daemon/dashboard\n", "go list walked loopd")
	require.NotContains(t, string(out), "github.com/goccy/go-graphviz", "loopd links go-graphviz: lay graphs out through loop-layout")
	require.NotContains(t, string(out), "github.com/tetratelabs/wazero")
}

// heavyDeps are the packages (path prefixes) a thin binary must not link:
// the embedded NATS server and its client (loop/queue), html/template (the
// dashboard's pages), the MCP SDK (loopd mcp), chromedp (browser tests),
// and two libraries whose package init costs every process start although
// few runs use them: upstream gojq, which builds jq's builtin table in init
// (--jq runs on internal/third_party/gojq, which builds it on first use),
// and gojsonschema, which compiles regexps and meta-schemas in init (graph
// files are validated by graph/graphfile's own checker).
var heavyDeps = []string{
	"github.com/nats-io/nats-server",
	"github.com/nats-io/nats.go",
	"html/template",
	"github.com/modelcontextprotocol/go-sdk",
	"github.com/chromedp",
	"github.com/itchyny/gojq",
	"github.com/xeipuuv/gojsonschema",
	"github.com/slack-go/slack", // loopd's Slack channel
	"github.com/gorilla/websocket",
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
