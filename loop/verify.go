package loop

import (
	"fmt"
	"sort"
	"strings"

	"github.com/theloop-dev/theloop/graph"
)

// Guarantee verdicts.
const (
	Proved        = "proved"
	Violated      = "violated"
	NotApplicable = "n/a"
)

// Guarantee is one property the seeds state in prose, checked over a
// compiled graph.
type Guarantee struct {
	Name    string `json:"name"`
	Claim   string `json:"claim"`
	Verdict string `json:"verdict"`
	// Detail says what was checked, or what breaks the guarantee.
	Detail string `json:"detail"`
	// Counterexample is a path of node ids that breaks it (when violated).
	Counterexample []string `json:"counterexample,omitempty"`
}

// SelectionNode is the node through which a work item chooses its phases.
const SelectionNode = "phase-selection"

// gateHookPrefix names the hooks that turn a human's reply into an outcome.
const gateHookPrefix = "classify-"

// Verify proves, over a compiled graph, the guarantees the-loop relies on:
// no producing node reaches what follows its gate without passing the gate;
// every human gate is exited only through a classify hook; every skippable
// node can be routed around; and phase selection cannot be routed around.
// It also proves that a walk can finish: a terminal node is reachable from
// the start. It reads only the graph.
func Verify(g *graph.Graph) []Guarantee {
	return []Guarantee{gatesGuard(g), gatesClassify(g), skippablesRoute(g), selectionHolds(g), walkCanFinish(g)}
}

// walkCanFinish: a terminal node is reachable from the start through edges
// that can be taken (the first per node and outcome). Nodes that only force
// can enter (the reference's cleanup and escalated) are named in the
// detail; the compiler reports them as warnings.
func walkCanFinish(g *graph.Graph) Guarantee {
	gr := Guarantee{Name: "a-terminal-node-is-reachable", Claim: "a walk from the start node can reach a terminal node without force"}
	seen := map[string]bool{g.Start: true}
	queue := []string{g.Start}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, e := range g.Edges() {
			if to, ok := g.Next(e.From, e.On); e.From != id || !ok || to != e.To || seen[e.To] {
				continue
			}
			seen[e.To] = true
			queue = append(queue, e.To)
		}
	}
	var unreachable, terminals, reached []string
	for _, n := range g.Nodes() {
		if !seen[n.ID] {
			unreachable = append(unreachable, n.ID)
		}
		if n.Terminal {
			terminals = append(terminals, n.ID)
			if seen[n.ID] {
				reached = append(reached, n.ID)
			}
		}
	}
	switch {
	case len(terminals) == 0:
		gr.Verdict, gr.Detail = Violated, "no node is declared terminal: a walk can never finish (mark the last node terminal: true)"
	case len(reached) == 0:
		gr.Verdict, gr.Detail = Violated, fmt.Sprintf("no terminal node (%s) is reachable from the start node %s", strings.Join(terminals, ", "), g.Start)
	default:
		gr.Verdict, gr.Detail = Proved, fmt.Sprintf("%s reaches the terminal node %s", g.Start, strings.Join(reached, ", "))
	}
	if len(unreachable) > 0 {
		gr.Detail += fmt.Sprintf("; only force can enter %s", strings.Join(unreachable, ", "))
	}
	return gr
}

// gates are the human nodes whose exit chain classifies a reply.
func gates(g *graph.Graph) []*graph.Node {
	var out []*graph.Node
	for _, n := range g.Nodes() {
		if !n.IsHuman() {
			continue
		}
		for _, h := range n.Exit {
			if strings.HasPrefix(h.Name, gateHookPrefix) {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

func gatesGuard(g *graph.Graph) Guarantee {
	gr := Guarantee{Name: "gates-guard-what-follows", Claim: "no path from a node that produces work for a human gate reaches the node after that gate without passing the gate"}
	gs := gates(g)
	if len(gs) == 0 {
		gr.Verdict, gr.Detail = NotApplicable, "the graph has no human gate"
		return gr
	}
	var checked []string
	for _, gate := range gs {
		producers := g.Predecessors(gate.ID)
		after := map[string]bool{}
		for _, e := range g.EdgesFrom(gate.ID) {
			if !producers[e.To] && e.To != gate.ID {
				after[e.To] = true
			}
		}
		if len(producers) == 0 || len(after) == 0 {
			continue
		}
		from := sortedSet(producers)
		if path := g.PathAvoiding(from, after, gate.ID); path != nil {
			gr.Verdict = Violated
			gr.Detail = fmt.Sprintf("%s reaches %s without passing the gate %s", path[0], path[len(path)-1], gate.ID)
			gr.Counterexample = path
			return gr
		}
		checked = append(checked, fmt.Sprintf("%s guards %s", gate.ID, strings.Join(sortedSet(after), ", ")))
	}
	gr.Verdict, gr.Detail = Proved, strings.Join(checked, "; ")
	return gr
}

func gatesClassify(g *graph.Graph) Guarantee {
	gr := Guarantee{Name: "human-gates-exit-through-classify", Claim: "every human gate is exited only through a classify hook: its exit chain starts with one, and no edge leaves it on a bare pass"}
	var humans []string
	for _, n := range g.Nodes() {
		if !n.IsHuman() || len(g.EdgesFrom(n.ID)) == 0 {
			continue
		}
		humans = append(humans, n.ID)
		if len(n.Exit) == 0 || !strings.HasPrefix(n.Exit[0].Name, gateHookPrefix) {
			first := "(no exit hook)"
			if len(n.Exit) > 0 {
				first = n.Exit[0].Name
			}
			gr.Verdict = Violated
			gr.Detail = fmt.Sprintf("the human gate %s's exit chain starts with %s, not a classify hook", n.ID, first)
			gr.Counterexample = []string{n.ID}
			return gr
		}
		for _, e := range g.EdgesFrom(n.ID) {
			if e.On == string(graph.StatusPass) {
				gr.Verdict = Violated
				gr.Detail = fmt.Sprintf("the human gate %s has an edge on pass (to %s): a chain with no verdict would move it", n.ID, e.To)
				gr.Counterexample = []string{n.ID, e.To}
				return gr
			}
		}
	}
	if len(humans) == 0 {
		gr.Verdict, gr.Detail = NotApplicable, "the graph has no human gate with an outgoing edge"
		return gr
	}
	gr.Verdict, gr.Detail = Proved, "checked "+strings.Join(humans, ", ")
	return gr
}

func skippablesRoute(g *graph.Graph) Guarantee {
	gr := Guarantee{Name: "skippable-nodes-route-on-skipped", Claim: "every skippable node has an edge on skipped, so a declared skip routes around it"}
	var ids []string
	for _, n := range g.Nodes() {
		if !n.Skippable {
			continue
		}
		ids = append(ids, n.ID)
		if _, ok := g.Next(n.ID, graph.OutcomeSkipped); !ok {
			gr.Verdict, gr.Detail, gr.Counterexample = Violated, n.ID+" is skippable but has no edge on skipped", []string{n.ID}
			return gr
		}
	}
	if len(ids) == 0 {
		gr.Verdict, gr.Detail = NotApplicable, "the graph has no skippable node"
		return gr
	}
	gr.Verdict, gr.Detail = Proved, fmt.Sprintf("%d skippable node(s)", len(ids))
	return gr
}

func selectionHolds(g *graph.Graph) Guarantee {
	gr := Guarantee{Name: "phase-selection-cannot-be-routed-around", Claim: "phase-selection is required and every path from the start to a later node passes through it"}
	ps, ok := g.Node(SelectionNode)
	if !ok {
		gr.Verdict, gr.Detail = NotApplicable, "the graph has no phase-selection node"
		return gr
	}
	if ps.Skippable || !ps.Required {
		gr.Verdict, gr.Detail, gr.Counterexample = Violated, "phase-selection is not required (or is skippable): a declaration could route around it", []string{SelectionNode}
		return gr
	}
	after := map[string]bool{}
	for _, n := range g.Nodes() {
		if n.Index > ps.Index {
			after[n.ID] = true
		}
	}
	if path := g.PathAvoiding([]string{g.Start}, after, SelectionNode); path != nil {
		gr.Verdict = Violated
		gr.Detail = fmt.Sprintf("the start %s reaches %s without passing phase-selection", g.Start, path[len(path)-1])
		gr.Counterexample = path
		return gr
	}
	gr.Verdict, gr.Detail = Proved, fmt.Sprintf("from %s, nothing after phase-selection is reachable without it", g.Start)
	return gr
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
