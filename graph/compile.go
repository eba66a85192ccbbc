package graph

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Actors.
const (
	ActorAgent = "agent"
	ActorHuman = "human"
	ActorCode  = "code"
)

// Session modes.
const (
	SessionNew     = "new"
	SessionInherit = "inherit"
)

// OutcomeSkipped is the outcome the runtime routes on when it walks around
// a declared-skipped node.
const OutcomeSkipped = "skipped"

// DefaultMaxAttempts is a node's escalation threshold unless it declares
// maxAttempts.
const DefaultMaxAttempts = 3

// Node is a compiled node. It is immutable after Compile.
type Node struct {
	ID    string `json:"id"`
	Phase string `json:"phase"`
	Actor string `json:"actor"`
	// Produces keeps each entry verbatim ("requirements.md|bugfix.md").
	Produces    []string `json:"produces"`
	Command     string   `json:"command"`
	Stage       string   `json:"stage"`
	Session     string   `json:"session"`
	Required    bool     `json:"required"`
	Optional    bool     `json:"optional"`
	Skippable   bool     `json:"skippable"`
	OptIn       bool     `json:"optIn"`
	Description string   `json:"description"`
	MaxAttempts int      `json:"maxAttempts"`
	Terminal    bool     `json:"terminal"`

	Entry []BoundHook `json:"-"`
	Exit  []BoundHook `json:"-"`
	// Index is the node's position in declaration order.
	Index int `json:"-"`

	// advancedTo is the report line of an advance into this node, built
	// once at compile time rather than on every advance.
	advancedTo string
}

// advancedToMsg is the report line of an advance into n.
func (n *Node) advancedToMsg() string {
	if n.advancedTo == "" {
		return "advanced to " + n.ID
	}
	return n.advancedTo
}

// IsHuman reports whether the node is a human gate.
func (n *Node) IsHuman() bool { return n.Actor == ActorHuman }

// ProducedNames returns every artifact name the node declares, alternatives
// split, in declaration order.
func (n *Node) ProducedNames() []string {
	var out []string
	for _, p := range n.Produces {
		out = append(out, splitAlternatives(p)...)
	}
	return out
}

// BoundHook is a hook reference resolved against a registry.
type BoundHook struct {
	Name     string
	Params   Values
	Blocking bool
	Timeout  time.Duration
	Spec     HookSpec
}

// Edge is a compiled transition.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
	On   string `json:"on"`
}

// SkipSet is a named bundle of skippable nodes.
type SkipSet struct {
	Name    string   `json:"name"`
	Members []string `json:"members"`
}

// Graph is a compiled, immutable process graph.
type Graph struct {
	Version     int
	Name        string
	Description string
	Start       string
	Source      string

	nodes        []*Node
	byID         map[string]*Node
	edges        []Edge
	next         map[[2]string]string
	skipSets     []SkipSet
	onEscalation []BoundHook
	warnings     []Problem
	file         *File
}

// Nodes returns the nodes in declaration order. Callers must not modify them.
func (g *Graph) Nodes() []*Node { return g.nodes }

// Node returns the node with the given id.
func (g *Graph) Node(id string) (*Node, bool) {
	n, ok := g.byID[id]
	return n, ok
}

// Edges returns every declared edge, in declaration order (duplicates kept).
func (g *Graph) Edges() []Edge { return g.edges }

// SkipSets returns the named skip sets in declaration order.
func (g *Graph) SkipSets() []SkipSet { return g.skipSets }

// SkipSet returns the members of the named skip set.
func (g *Graph) SkipSet(name string) ([]string, bool) {
	for _, s := range g.skipSets {
		if s.Name == name {
			return s.Members, true
		}
	}
	return nil, false
}

// OnEscalation returns the chain run when a node escalates.
func (g *Graph) OnEscalation() []BoundHook { return g.onEscalation }

// Warnings returns the non-fatal findings of compilation (unreachable nodes,
// duplicate edges that can never be taken).
func (g *Graph) Warnings() []Problem {
	out := make([]Problem, len(g.warnings))
	for i, w := range g.warnings {
		w.Where = g.file.where(w.Path)
		out[i] = w
	}
	return out
}

// Next returns the target of the first edge declared for (from, outcome).
func (g *Graph) Next(from, outcome string) (string, bool) {
	to, ok := g.next[[2]string{from, outcome}]
	return to, ok
}

// EdgesFrom returns the edges leaving id, in declaration order.
func (g *Graph) EdgesFrom(id string) []Edge {
	var out []Edge
	for _, e := range g.edges {
		if e.From == id {
			out = append(out, e)
		}
	}
	return out
}

// IDs returns every node id in declaration order.
func (g *Graph) IDs() []string {
	out := make([]string, len(g.nodes))
	for i, n := range g.nodes {
		out[i] = n.ID
	}
	return out
}

// Before reports whether a precedes b in declaration order (both declared).
func (g *Graph) Before(a, b string) bool {
	na, oka := g.byID[a]
	nb, okb := g.byID[b]
	return oka && okb && na.Index < nb.Index
}

// Hooks returns the names of every hook the graph references, sorted.
func (g *Graph) Hooks() []BoundHook {
	seen := map[string]BoundHook{}
	add := func(hs []BoundHook) {
		for _, h := range hs {
			if _, ok := seen[h.Name]; !ok {
				seen[h.Name] = h
			}
		}
	}
	for _, n := range g.nodes {
		add(n.Entry)
		add(n.Exit)
	}
	add(g.onEscalation)
	out := make([]BoundHook, 0, len(seen))
	for _, h := range seen {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Compile checks every structural rule of the graph format and binds hook
// names to reg (DefaultRegistry when nil). All problems are reported
// together in one *LoadError; each names the offending element. Cycles are
// allowed. Unreachable nodes and duplicate edges are warnings, available
// from Graph.Warnings.
func Compile(f *File, reg *Registry) (*Graph, error) {
	if reg == nil {
		reg = DefaultRegistry()
	}
	c := compiler{f: f, reg: reg}
	g := c.compile()
	if len(c.problems) > 0 {
		return nil, &LoadError{Source: f.Source, Problems: c.problems}
	}
	return g, nil
}

type compiler struct {
	f        *File
	reg      *Registry
	problems []Problem
}

func (c *compiler) fail(path, format string, args ...any) {
	c.problems = append(c.problems, Problem{Where: c.f.where(path), Path: path, Message: fmt.Sprintf(format, args...)})
}

func (c *compiler) compile() *Graph {
	f := c.f
	g := &Graph{
		Version:     f.Version,
		Name:        f.Name,
		Description: f.Description,
		Source:      f.Source,
		file:        f,
		byID:        map[string]*Node{},
		next:        map[[2]string]string{},
	}
	if g.Version == 0 {
		g.Version = 1
	}
	if len(f.Nodes) == 0 {
		c.fail("nodes", "the graph declares no nodes")
		return g
	}
	c.nodes(g)
	c.edges(g)
	g.Start = f.Start
	if g.Start == "" && len(g.nodes) > 0 {
		g.Start = g.nodes[0].ID
	}
	if _, ok := g.byID[g.Start]; !ok && g.Start != "" {
		c.fail("start", "start node '%s' is not declared; declared nodes are: %s", g.Start, declaredIDs(g))
	}
	for _, n := range g.nodes {
		if n.Skippable {
			if _, ok := g.next[[2]string{n.ID, OutcomeSkipped}]; !ok {
				c.fail(fmt.Sprintf("nodes[%d]", n.Index), "node '%s' is skippable but declares no edge for the outcome 'skipped'; add an edge {from: %s, on: skipped, to: <next node>} or drop skippable/optIn", n.ID, n.ID)
			}
		}
	}
	c.skipSets(g)
	g.onEscalation = c.chain("onEscalation", "graph", "onEscalation", f.OnEscalation)
	if len(c.problems) == 0 {
		g.warnings = append(g.warnings, c.unreachable(g)...)
	}
	return g
}

// declaredIDs lists g's node ids for messages.
func declaredIDs(g *Graph) string { return strings.Join(g.IDs(), ", ") }

// nodes compiles the declared nodes into g, refusing duplicate ids.
func (c *compiler) nodes(g *Graph) {
	for i, spec := range c.f.Nodes {
		path := fmt.Sprintf("nodes[%d]", i)
		n := c.node(path, i, spec)
		if n == nil {
			continue
		}
		if _, dup := g.byID[n.ID]; dup {
			c.fail(path+".id", "duplicate node id '%s'; every node id must be unique", n.ID)
			continue
		}
		g.byID[n.ID] = n
		g.nodes = append(g.nodes, n)
	}
}

// edges compiles the declared edges into g: complete, between declared
// nodes; of two edges from one node on one outcome the first wins (with a
// warning).
func (c *compiler) edges(g *Graph) {
	for i, e := range c.f.Edges {
		path := fmt.Sprintf("edges[%d]", i)
		missing := false
		for _, kv := range [][2]string{{"from", e.From}, {"to", e.To}, {"on", e.On}} {
			if strings.TrimSpace(kv[1]) == "" {
				c.fail(path, "edge {from: %s, to: %s, on: %s} is missing '%s'", e.From, e.To, e.On, kv[0])
				missing = true
			}
		}
		if missing {
			continue
		}
		bad := false
		if _, ok := g.byID[e.From]; !ok {
			c.fail(path+".from", "edge from names undeclared node '%s'; declared nodes are: %s", e.From, declaredIDs(g))
			bad = true
		}
		if _, ok := g.byID[e.To]; !ok {
			c.fail(path+".to", "edge to names undeclared node '%s'; declared nodes are: %s", e.To, declaredIDs(g))
			bad = true
		}
		if bad {
			continue
		}
		g.edges = append(g.edges, Edge(e))
		key := [2]string{e.From, e.On}
		if prev, dup := g.next[key]; dup {
			g.warnings = append(g.warnings, Problem{Path: path,
				Message: fmt.Sprintf("duplicate edge from '%s' on '%s' (to '%s'); the first declared edge (to '%s') wins and this one is never taken", e.From, e.On, e.To, prev)})
			continue
		}
		g.next[key] = e.To
	}
}

// skipSets compiles the declared skip sets, in declaration order, keeping
// only sets of declared skippable nodes that are not opt-in.
func (c *compiler) skipSets(g *Graph) {
	f := c.f
	names := f.SkipSetOrder
	if len(names) != len(f.SkipSets) {
		names = names[:0:0]
		for k := range f.SkipSets {
			names = append(names, k)
		}
		sort.Strings(names)
	}
	for _, name := range names {
		members := f.SkipSets[name]
		path := "skipSets." + name
		ok := true
		for j, m := range members {
			mp := fmt.Sprintf("%s[%d]", path, j)
			n, declaredNode := g.byID[m]
			switch {
			case !declaredNode || !n.Skippable:
				c.fail(mp, "skip set '%s' names '%s', which is not a declared skippable node", name, m)
				ok = false
			case n.OptIn:
				c.fail(mp, "skip set '%s' names '%s', which is an opt-in node; opt-in nodes are off unless selected and cannot be bundled", name, m)
				ok = false
			}
		}
		if ok {
			g.skipSets = append(g.skipSets, SkipSet{Name: name, Members: append([]string(nil), members...)})
		}
	}
}

func (c *compiler) node(path string, index int, s NodeSpec) *Node {
	id := strings.TrimSpace(s.ID)
	if id == "" {
		c.fail(path, "every node needs an id; node #%d has none", index+1)
		return nil
	}
	n := &Node{
		ID: id, Phase: s.Phase, Actor: s.Actor, Produces: append([]string(nil), s.Produces...),
		Command: s.Command, Stage: s.Stage, Session: s.Session,
		Required: s.Required, Optional: s.Optional, Skippable: s.Skippable || s.OptIn, OptIn: s.OptIn,
		Description: strings.Join(strings.Fields(s.Description), " "),
		MaxAttempts: s.MaxAttempts, Terminal: s.Terminal, Index: index,
		advancedTo: "advanced to " + id,
	}
	if n.Produces == nil {
		n.Produces = []string{}
	}
	if n.Actor == "" {
		n.Actor = ActorAgent
	}
	if n.Session == "" {
		n.Session = SessionNew
	}
	if n.MaxAttempts <= 0 {
		n.MaxAttempts = DefaultMaxAttempts
	}
	switch n.Actor {
	case ActorAgent, ActorHuman, ActorCode:
	default:
		c.fail(path+".actor", "node '%s': actor '%s' is not one of agent, human, code", id, n.Actor)
	}
	switch n.Session {
	case SessionNew, SessionInherit:
	default:
		c.fail(path+".session", "node '%s': session '%s' is not one of new, inherit", id, n.Session)
	}
	for j, p := range n.Produces {
		if hasEmptyAlternative(p) {
			c.fail(fmt.Sprintf("%s.produces[%d]", path, j), "node '%s': produces entry '%s' has an empty alternative", id, p)
		}
	}
	switch {
	case s.Required && s.OptIn:
		c.fail(path, "node '%s' is both required and optIn; a required node always runs", id)
	case s.Required && s.Skippable:
		c.fail(path, "node '%s' is both required and skippable; a required node is never skippable", id)
	}
	n.Entry = c.chain(path+".entry", id, string(Entry), s.Entry)
	n.Exit = c.chain(path+".exit", id, string(Exit), s.Exit)
	return n
}

func (c *compiler) chain(path, owner, boundary string, refs []HookRef) []BoundHook {
	out := make([]BoundHook, 0, len(refs))
	for i, r := range refs {
		rp := fmt.Sprintf("%s[%d]", path, i)
		name := strings.TrimSpace(r.Hook)
		if name == "" {
			c.fail(rp, "node '%s': malformed %s hook entry; write a hook name or {hook: <name>, with: {...}}", owner, boundary)
			continue
		}
		spec, ok := c.reg.Lookup(name)
		if !ok {
			c.fail(rp, "node '%s': %s references unknown hook '%s'; registered hooks are: %s", owner, boundary, name, strings.Join(c.reg.Names(), ", "))
			continue
		}
		timeout := spec.Timeout
		if timeout <= 0 {
			timeout = DefaultHookTimeout
		}
		if r.Timeout != "" {
			d := Values{"t": r.Timeout}.Duration("t", 0)
			if d <= 0 {
				c.fail(rp+".timeout", "node '%s': hook '%s' has an invalid timeout '%s'; write a duration such as 45s or 2m", owner, name, r.Timeout)
				continue
			}
			timeout = d
		}
		c.checkParams(rp, owner, name, spec.Params, r.With)
		params := r.With
		if params == nil {
			params = Values{}
		}
		out = append(out, BoundHook{Name: name, Params: params, Blocking: r.Blocking, Timeout: timeout, Spec: spec})
	}
	return out
}

// unreachable reports nodes no edge path from the start reaches.
func (c *compiler) unreachable(g *Graph) []Problem {
	seen := map[string]bool{g.Start: true}
	queue := []string{g.Start}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, e := range g.edges {
			// Only edges that can be taken (the first per from/outcome).
			if e.From != id || g.next[[2]string{e.From, e.On}] != e.To || seen[e.To] {
				continue
			}
			seen[e.To] = true
			queue = append(queue, e.To)
		}
	}
	var out []Problem
	for _, n := range g.nodes {
		if !seen[n.ID] {
			path := fmt.Sprintf("nodes[%d]", n.Index)
			out = append(out, Problem{Path: path,
				Message: fmt.Sprintf("node '%s' is unreachable from the start node '%s'; only force or cleanup can enter it", n.ID, g.Start)})
		}
	}
	return out
}
