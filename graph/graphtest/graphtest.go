// Package graphtest provides in-memory implementations of the graph
// package's interfaces — Store, Items/Artifacts, Clock, Sink — and a small
// builder for test graphs. They are meant for tests and for embedders that
// want to run a graph.Runtime without a filesystem; they are not tuned for
// production use.
package graphtest

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"testing/fstest"
	"time"

	"github.com/theloop-dev/theloop/graph"
)

// --- Store -----------------------------------------------------------------

// Store is an in-memory graph.Store. Saved states are deep-copied, so a
// caller mutating its *State after Save does not change what is stored.
type Store struct {
	mu      sync.Mutex
	states  map[string]*graph.State
	raw     map[string][]byte
	corrupt map[string][][]byte
	locks   map[string]chan struct{}
	saves   int
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{states: map[string]*graph.State{}, raw: map[string][]byte{}, corrupt: map[string][][]byte{}, locks: map[string]chan struct{}{}}
}

// Load implements graph.Store.
func (s *Store) Load(_ context.Context, id string) (*graph.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if raw, ok := s.raw[id]; ok {
		st, err := graph.ParseState(id, raw)
		if err != nil {
			return nil, fmt.Errorf("state of %s: %w", id, err)
		}
		return st, nil
	}
	st, ok := s.states[id]
	if !ok {
		return nil, fmt.Errorf("state of %s: %w", id, graph.ErrNoState)
	}
	return st.Clone(), nil
}

// Save implements graph.Store. Unparseable raw bytes put with PutRaw are
// preserved (see Corrupt) before being replaced.
func (s *Store) Save(_ context.Context, id string, st *graph.State) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if raw, ok := s.raw[id]; ok {
		if _, err := graph.ParseState(id, raw); err != nil {
			s.corrupt[id] = append(s.corrupt[id], raw)
		}
		delete(s.raw, id)
	}
	s.states[id] = st.Clone()
	s.saves++
	return nil
}

// Lock implements graph.Store with a per-item mutex that gives up after
// timeout with graph.ErrBusy.
func (s *Store) Lock(ctx context.Context, id string, timeout time.Duration) (func(), error) {
	s.mu.Lock()
	ch, ok := s.locks[id]
	if !ok {
		ch = make(chan struct{}, 1)
		s.locks[id] = ch
	}
	s.mu.Unlock()
	var once sync.Once
	unlock := func() { once.Do(func() { <-ch }) }
	select {
	case ch <- struct{}{}:
		return unlock, nil
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case ch <- struct{}{}:
		return unlock, nil
	case <-t.C:
		return nil, fmt.Errorf("state of %s: %w", id, graph.ErrBusy)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// State returns a copy of the stored state (nil when none).
func (s *Store) State(id string) *graph.State {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.states[id]; ok {
		return st.Clone()
	}
	return nil
}

// Put stores st as if it had been saved.
func (s *Store) Put(id string, st *graph.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[id] = st.Clone()
}

// PutRaw stores raw bytes as the state file (e.g. corrupt JSON).
func (s *Store) PutRaw(id string, raw []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.raw[id] = append([]byte(nil), raw...)
	delete(s.states, id)
}

// Corrupt returns the unparseable contents preserved for id.
func (s *Store) Corrupt(id string) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.corrupt[id]...)
}

// Saves counts Save calls.
func (s *Store) Saves() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves
}

// --- Artifacts and Items ---------------------------------------------------

// Artifacts is an in-memory spec directory.
type Artifacts struct {
	mu      sync.Mutex
	files   fstest.MapFS
	specDir string
}

// NewArtifacts returns an empty spec directory displayed as specDir.
func NewArtifacts(specDir string) *Artifacts {
	return &Artifacts{files: fstest.MapFS{}, specDir: specDir}
}

// Open implements fs.FS.
func (a *Artifacts) Open(name string) (fs.File, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.files.Open(name)
}

// WriteFile implements graph.Artifacts.
func (a *Artifacts) WriteFile(name string, data []byte) error {
	if !fs.ValidPath(name) {
		return &fs.PathError{Op: "write", Path: name, Err: fs.ErrInvalid}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.files[name] = &fstest.MapFile{Data: append([]byte(nil), data...), Mode: 0o644}
	return nil
}

// AppendFile implements graph.Artifacts.
func (a *Artifacts) AppendFile(name string, data []byte) error {
	if !fs.ValidPath(name) {
		return &fs.PathError{Op: "append", Path: name, Err: fs.ErrInvalid}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var old []byte
	if f, ok := a.files[name]; ok {
		old = f.Data
	}
	a.files[name] = &fstest.MapFile{Data: append(append([]byte(nil), old...), data...), Mode: 0o644}
	return nil
}

// Path implements graph.Artifacts.
func (a *Artifacts) Path(name string) string {
	if a.specDir == "" {
		return name
	}
	return path.Join(a.specDir, name)
}

// Set writes a file (test helper).
func (a *Artifacts) Set(name, content string) { _ = a.WriteFile(name, []byte(content)) }

// Get returns a file's content ("" when absent).
func (a *Artifacts) Get(name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if f, ok := a.files[name]; ok {
		return string(f.Data)
	}
	return ""
}

// Remove deletes a file.
func (a *Artifacts) Remove(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.files, name)
}

// Items is an in-memory graph.Items: one Artifacts per work item, created on
// first use. Refs are "test:<id>" unless set.
type Items struct {
	mu    sync.Mutex
	items map[string]*Artifacts
	refs  map[string]string
}

// NewItems returns an empty Items.
func NewItems() *Items {
	return &Items{items: map[string]*Artifacts{}, refs: map[string]string{}}
}

// Artifacts returns (creating) the work item's spec directory.
func (it *Items) Artifacts(id string) *Artifacts {
	it.mu.Lock()
	defer it.mu.Unlock()
	a, ok := it.items[id]
	if !ok {
		a = NewArtifacts("docs/specs/" + id)
		it.items[id] = a
	}
	return a
}

// SetRef sets the work item's ref.
func (it *Items) SetRef(id, ref string) {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.refs[id] = ref
}

// Resolve implements graph.Items. Ids with path separators or dots-only
// names are refused, as a filesystem resolver must.
func (it *Items) Resolve(_ context.Context, id string) (graph.WorkItem, graph.Artifacts, error) {
	if id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." {
		return graph.WorkItem{}, nil, fmt.Errorf("invalid work item id %q", id)
	}
	a := it.Artifacts(id)
	it.mu.Lock()
	ref := it.refs[id]
	it.mu.Unlock()
	if ref == "" {
		ref = "test:" + id
	}
	return graph.WorkItem{ID: id, Ref: ref, SpecDir: a.specDir, Tags: []string{}, RiskTier: 3}, a, nil
}

// --- Clock -----------------------------------------------------------------

// Clock is a settable clock. The zero value starts at 2026-01-02T03:04:05Z.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now implements graph.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.IsZero() {
		c.t = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	return c.t
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t.IsZero() {
		c.t = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	}
	c.t = c.t.Add(d)
}

// --- Sink --------------------------------------------------------------------

// Sink records every event.
type Sink struct {
	mu     sync.Mutex
	events []graph.LogEvent
}

// Emit implements graph.Sink.
func (s *Sink) Emit(e graph.LogEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
}

// Events returns the recorded events.
func (s *Sink) Events() []graph.LogEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]graph.LogEvent(nil), s.events...)
}

// Names returns the recorded event names in order.
func (s *Sink) Names() []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, e.Name)
	}
	return out
}

// Count returns how many events carry name.
func (s *Sink) Count(name string) int {
	n := 0
	for _, e := range s.Events() {
		if e.Name == name {
			n++
		}
	}
	return n
}

// --- Builder ---------------------------------------------------------------

// Builder assembles a graph.File in code.
type Builder struct {
	f graph.File
}

// NewGraph starts a graph named name.
func NewGraph(name string) *Builder {
	return &Builder{f: graph.File{Version: 1, Name: name, Source: name, SkipSets: map[string][]string{}}}
}

// Node appends a node.
func (b *Builder) Node(n graph.NodeSpec) *Builder {
	b.f.Nodes = append(b.f.Nodes, n)
	return b
}

// Edge appends an edge.
func (b *Builder) Edge(from, on, to string) *Builder {
	b.f.Edges = append(b.f.Edges, graph.EdgeSpec{From: from, On: on, To: to})
	return b
}

// Start sets the start node.
func (b *Builder) Start(id string) *Builder {
	b.f.Start = id
	return b
}

// SkipSet declares a skip set.
func (b *Builder) SkipSet(name string, members ...string) *Builder {
	b.f.SkipSets[name] = members
	return b
}

// OnEscalation sets the escalation chain.
func (b *Builder) OnEscalation(refs ...graph.HookRef) *Builder {
	b.f.OnEscalation = refs
	return b
}

// File returns the assembled file.
func (b *Builder) File() *graph.File {
	f := b.f
	return &f
}

// Compile compiles against reg.
func (b *Builder) Compile(reg *graph.Registry) (*graph.Graph, error) {
	return graph.Compile(b.File(), reg)
}

// MustCompile compiles against reg and panics on error.
func (b *Builder) MustCompile(reg *graph.Registry) *graph.Graph {
	g, err := b.Compile(reg)
	if err != nil {
		panic(err)
	}
	return g
}

// Hooks turns names into hook references.
func Hooks(names ...string) []graph.HookRef {
	out := make([]graph.HookRef, len(names))
	for i, n := range names {
		out[i] = graph.HookRef{Hook: n}
	}
	return out
}

// With returns a hook reference with params.
func With(name string, params graph.Values) graph.HookRef {
	return graph.HookRef{Hook: name, With: params}
}

// Registry returns a registry holding the given hooks.
func Registry(hooks map[string]graph.Hook) *graph.Registry {
	reg := graph.NewRegistry()
	names := make([]string, 0, len(hooks))
	for n := range hooks {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		reg.Register(graph.HookSpec{Name: n, Run: hooks[n]})
	}
	return reg
}

// Returning returns a hook that always returns res.
func Returning(res graph.HookResult) graph.Hook {
	return func(context.Context, *graph.HookContext) graph.HookResult { return res }
}

// Counter counts hook calls per name; Hook wraps a hook to count it.
type Counter struct {
	mu    sync.Mutex
	calls map[string]int
}

// Wrap returns h counting its calls under name.
func (c *Counter) Wrap(name string, h graph.Hook) graph.Hook {
	return func(ctx context.Context, hc *graph.HookContext) graph.HookResult {
		c.mu.Lock()
		if c.calls == nil {
			c.calls = map[string]int{}
		}
		c.calls[name]++
		c.mu.Unlock()
		return h(ctx, hc)
	}
}

// Calls returns how often name ran.
func (c *Counter) Calls(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[name]
}

// Compile-time interface guards.
var (
	_ graph.Store     = (*Store)(nil)
	_ graph.Artifacts = (*Artifacts)(nil)
	_ graph.Items     = (*Items)(nil)
	_ graph.Clock     = (*Clock)(nil)
	_ graph.Sink      = (*Sink)(nil)
)
