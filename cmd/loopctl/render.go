package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

// marks says, per node, how a work item stands: current, passed, skipped.
type marks struct {
	current string
	passed  map[string]bool
	skipped map[string]bool
}

// marksFrom derives node marks from a work item's report.
func marksFrom(rep *graph.Report) *marks {
	if rep == nil {
		return nil
	}
	m := &marks{current: rep.CurrentNode, passed: map[string]bool{}, skipped: map[string]bool{}}
	for _, n := range rep.Nodes {
		if n.Node == rep.CurrentNode {
			break
		}
		switch n.Status {
		case graph.StatusSkip:
			m.skipped[n.Node] = true
		case graph.StatusPass:
			m.passed[n.Node] = true
		}
	}
	return m
}

func (m *marks) of(id string) string {
	switch {
	case m == nil:
		return ""
	case id == m.current:
		return "current"
	case m.skipped[id]:
		return "skipped"
	case m.passed[id]:
		return "passed"
	}
	return ""
}

// renderJSON prints loop.GraphView, the shape the control-plane API
// answers too.
func renderJSON(w io.Writer, g *graph.Graph, rep *graph.Report) {
	writeJSON(w, loop.NewGraphView(g, rep))
}

func nodeFlags(n *graph.Node) []string {
	var fl []string
	if n.Required {
		fl = append(fl, "required")
	}
	if n.OptIn {
		fl = append(fl, "opt-in")
	} else if n.Skippable {
		fl = append(fl, "skippable")
	}
	if n.IsHuman() {
		fl = append(fl, "human")
	}
	if n.Terminal {
		fl = append(fl, "terminal")
	}
	return fl
}

// renderText is the reference's text form: one line per node, one line per
// outgoing edge.
func renderText(w io.Writer, g *graph.Graph, m *marks) {
	fmt.Fprintf(w, "graph v%d, start: %s\n", g.Version, g.Start)
	for _, n := range g.Nodes() {
		line := n.ID
		if fl := nodeFlags(n); len(fl) > 0 {
			line += " [" + strings.Join(fl, ", ") + "]"
		}
		switch m.of(n.ID) {
		case "current":
			line = "▶ " + line + "  ← current"
		case "passed":
			line = "✓ " + line
		case "skipped":
			line = "– " + line + "  (skipped)"
		default:
			if m != nil {
				line = "  " + line
			}
		}
		fmt.Fprintln(w, line)
		for _, e := range g.EdgesFrom(n.ID) {
			fmt.Fprintf(w, "    --%s--> %s\n", e.On, e.To)
		}
	}
}

func mermaidID(id string) string { return strings.NewReplacer("-", "_", ".", "_").Replace(id) }

// renderMermaid draws the graph as a mermaid flowchart; with a work item the
// current node, passed and skipped nodes are styled.
func renderMermaid(w io.Writer, g *graph.Graph, m *marks) {
	fmt.Fprintln(w, "flowchart TD")
	for _, n := range g.Nodes() {
		label := n.ID
		if n.IsHuman() {
			fmt.Fprintf(w, "  %s{{\"%s\"}}\n", mermaidID(n.ID), label)
		} else if n.Terminal {
			fmt.Fprintf(w, "  %s([\"%s\"])\n", mermaidID(n.ID), label)
		} else {
			fmt.Fprintf(w, "  %s[\"%s\"]\n", mermaidID(n.ID), label)
		}
	}
	for _, e := range g.Edges() {
		style := "-->"
		if e.On == graph.OutcomeSkipped {
			style = "-.->"
		}
		fmt.Fprintf(w, "  %s %s|%s| %s\n", mermaidID(e.From), style, e.On, mermaidID(e.To))
	}
	if m != nil {
		fmt.Fprintln(w, "  classDef current fill:#ffd966,stroke:#b8860b,stroke-width:3px")
		fmt.Fprintln(w, "  classDef passed fill:#c6efce,stroke:#2e7d32")
		fmt.Fprintln(w, "  classDef skipped fill:#eeeeee,stroke:#9e9e9e,stroke-dasharray:4 3")
		for _, n := range g.Nodes() {
			if k := m.of(n.ID); k != "" {
				fmt.Fprintf(w, "  class %s %s\n", mermaidID(n.ID), k)
			}
		}
	}
}

// renderDot draws the graph for Graphviz.
func renderDot(w io.Writer, g *graph.Graph, m *marks) {
	fmt.Fprintf(w, "digraph %q {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\"];\n", g.Name)
	for _, n := range g.Nodes() {
		attrs := []string{fmt.Sprintf("label=%q", n.ID)}
		if n.IsHuman() {
			attrs = append(attrs, "shape=hexagon")
		} else if n.Terminal {
			attrs = append(attrs, "shape=oval")
		}
		switch m.of(n.ID) {
		case "current":
			attrs = append(attrs, "style=\"filled,bold\"", "fillcolor=\"#ffd966\"")
		case "passed":
			attrs = append(attrs, "style=filled", "fillcolor=\"#c6efce\"")
		case "skipped":
			attrs = append(attrs, "style=\"filled,dashed\"", "fillcolor=\"#eeeeee\"")
		}
		fmt.Fprintf(w, "  %q [%s];\n", n.ID, strings.Join(attrs, ", "))
	}
	for _, e := range g.Edges() {
		style := ""
		if e.On == graph.OutcomeSkipped {
			style = ", style=dashed"
		}
		fmt.Fprintf(w, "  %q -> %q [label=%q%s];\n", e.From, e.To, e.On, style)
	}
	fmt.Fprintln(w, "}")
}
