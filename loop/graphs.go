package loop

import (
	"embed"
	"fmt"
	"strings"
	"sync"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
)

// Shipped loop names.
const (
	WorkItemLoop     = "pdlc-work-item-loop"
	PRLoop           = "pdlc-pr-loop"
	AdhocLoop        = "pdlc-adhoc-loop"
	ContributionLoop = "pdlc-contribution-loop"
)

//go:generate go run ./internal/gengraphs graphs shipped_graphs.go

// The shipped graphs: the YAML in graphs/ is the source (embedded for
// `loopctl graph show` and editors); shipped_graphs.go is its parsed,
// schema-validated form as Go literals, which is what a process compiles —
// no YAML parse or JSON decode on the Stop hook's path. TestShippedGo keeps
// the two in step.
//
//go:embed graphs/*.yaml
var shippedFS embed.FS

// ShippedGraphSource returns the YAML of a shipped loop.
func ShippedGraphSource(name string) ([]byte, error) {
	b, err := shippedFS.ReadFile("graphs/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no shipped loop named %q; shipped loops are: %s", name, strings.Join(ShippedLoopNames(), ", "))
	}
	return b, nil
}

var (
	shippedMu    sync.Mutex
	shippedCache = map[string]*graph.Graph{}
)

// ShippedGraph compiles a shipped loop against the shipped hooks, once per
// process. A shipped graph that does not compile is a packaging error.
func ShippedGraph(name string) (*graph.Graph, error) {
	shippedMu.Lock()
	defer shippedMu.Unlock()
	if g, ok := shippedCache[name]; ok {
		return g, nil
	}
	file, ok := shippedFiles[name]
	if !ok {
		if _, err := ShippedGraphSource(name); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("the shipped graph %s has no generated form (run go generate ./loop)", name)
	}
	g, err := graph.Compile(file(), shippedRegistry())
	if err != nil {
		return nil, fmt.Errorf("the shipped graph %s does not compile (a packaging error — please report it): %w", name, err)
	}
	shippedCache[name] = g
	return g, nil
}

var (
	regOnce sync.Once
	reg     *graph.Registry
)

// shippedRegistry holds exactly theloop's own hooks (never a repository's).
func shippedRegistry() *graph.Registry {
	regOnce.Do(func() { reg = hooks.NewRegistry() })
	return reg
}

// ResolveOuterLoop is the single fail-closed reading of the agent-writable
// `loop` field of graph-state.json: only the contribution and ad-hoc loops
// are honoured; anything else means the default work-item loop.
func ResolveOuterLoop(name string) string {
	switch name {
	case ContributionLoop, AdhocLoop:
		return name
	}
	return WorkItemLoop
}

// ShippedHooks is the registry of theloop's own hooks, the only hooks a
// graph loaded by this package can name.
func ShippedHooks() *graph.Registry { return shippedRegistry() }

// ShippedFile returns a fresh copy of a shipped loop's parsed graph file
// (nil for an unknown name).
func ShippedFile(name string) *graph.File {
	if f, ok := shippedFiles[name]; ok {
		return f()
	}
	return nil
}
