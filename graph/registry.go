package graph

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// DefaultHookTimeout bounds every hook that does not declare its own.
const DefaultHookTimeout = 30 * time.Second

// HookSpec describes a hook to register.
type HookSpec struct {
	// Name is how graphs refer to the hook, e.g. "validate-artifacts".
	Name string
	// Run is the hook function.
	Run Hook
	// Needs lists the integration operations the hook may call. Loading a
	// graph verifies that the configured providers implement every one.
	Needs []Operation
	// Timeout overrides DefaultHookTimeout for this hook. A hook reference
	// in a graph may override it again with `timeout:`.
	Timeout time.Duration
	// Summary is one line for `loopctl graph hooks`.
	Summary string
	// Params declares the `with:` keys the hook reads. Compile refuses a
	// reference with an unknown key, a value of the wrong type or a missing
	// required key. nil means "not declared": values pass unchecked (use
	// NoParams for a hook that takes none).
	Params []Param
}

// Registry maps hook names to hooks. It is safe for concurrent use; the
// usual pattern is to fill it from init functions and only read it after.
type Registry struct {
	mu    sync.RWMutex
	hooks map[string]HookSpec
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{hooks: map[string]HookSpec{}}
}

var (
	defaultRegistry = NewRegistry()
	defaultMu       sync.Mutex
	defaultPending  []func(*Registry)
)

// DefaultRegistry is the process-wide registry that hook packages fill from
// their init functions (theloop's own hooks register here when package
// hooks is imported). Fills deferred with RegisterDefaultsLazily run on the
// first call, before it returns.
func DefaultRegistry() *Registry {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	for len(defaultPending) > 0 {
		fill := defaultPending[0]
		defaultPending = defaultPending[1:]
		fill(defaultRegistry)
	}
	return defaultRegistry
}

// Register adds a hook to the default registry. See Registry.Register.
func Register(spec HookSpec) { DefaultRegistry().Register(spec) }

// RegisterDefaultsLazily defers a hook package's registration in the
// default registry to DefaultRegistry's first call, instead of doing it in
// the package's init: a program that imports the package but compiles its
// graphs against its own registry (as loopctl and loop-gate do) then pays
// nothing for it at start-up. Fills run in the order they were deferred,
// under the default registry's lock: fill must add to the registry it is
// given and must not call DefaultRegistry or Register. A duplicate name
// panics on that first call rather than in init.
func RegisterDefaultsLazily(fill func(*Registry)) {
	defaultMu.Lock()
	defer defaultMu.Unlock()
	defaultPending = append(defaultPending, fill)
}

// Register adds a hook. It panics on an empty name, a nil function or a
// duplicate name: each is a programming error that must fail at start-up,
// not when a graph first reaches the hook.
func (r *Registry) Register(spec HookSpec) {
	if spec.Name == "" {
		panic("graph: hook registered with an empty name")
	}
	if spec.Run == nil {
		panic(fmt.Sprintf("graph: hook %q registered with a nil function", spec.Name))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.hooks[spec.Name]; dup {
		panic(fmt.Sprintf("graph: hook %q registered twice", spec.Name))
	}
	checkParamDecls(spec)
	spec.Needs = append([]Operation(nil), spec.Needs...)
	if spec.Params != nil {
		spec.Params = append([]Param{}, spec.Params...)
	}
	r.hooks[spec.Name] = spec
}

// Lookup returns the hook registered under name.
func (r *Registry) Lookup(name string) (HookSpec, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.hooks[name]
	return h, ok
}

// Names returns every registered name, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.hooks))
	for n := range r.hooks {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Specs returns every registered hook, sorted by name.
func (r *Registry) Specs() []HookSpec {
	names := r.Names()
	out := make([]HookSpec, 0, len(names))
	for _, n := range names {
		h, _ := r.Lookup(n)
		out = append(out, h)
	}
	return out
}
