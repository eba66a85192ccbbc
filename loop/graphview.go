package loop

import (
	"time"

	"github.com/theloop-dev/theloop/graph"
)

// GraphView is `graph show --format json`'s shape (the reference's), shared
// by loopctl and the control-plane API so both print the same document.
type GraphView struct {
	Version int           `json:"version"`
	Name    string        `json:"name"`
	Start   string        `json:"start"`
	Nodes   []*graph.Node `json:"nodes"`
	Edges   []graph.Edge  `json:"edges"`
	// Marks is set for a work item: node id → current|passed|skipped.
	Marks map[string]string `json:"marks,omitempty"`
}

// NewGraphView describes g; with rep (a work item's report at its stored
// pointer) each node walked so far is marked passed or skipped and the
// current node current.
func NewGraphView(g *graph.Graph, rep *graph.Report) GraphView {
	v := GraphView{Version: g.Version, Name: g.Name, Start: g.Start, Nodes: g.Nodes(), Edges: g.Edges()}
	if rep == nil {
		return v
	}
	v.Marks = map[string]string{}
	for _, n := range rep.Nodes {
		if n.Node == rep.CurrentNode {
			break
		}
		switch n.Status {
		case graph.StatusSkip:
			v.Marks[n.Node] = "skipped"
		case graph.StatusPass:
			v.Marks[n.Node] = "passed"
		}
	}
	if _, ok := g.Node(rep.CurrentNode); ok {
		v.Marks[rep.CurrentNode] = "current"
	}
	return v
}

// JSON is the record as `loopctl events --format json` prints it: the
// envelope (ts, source, event, level, pid) and every field.
func (r EventRecord) JSON() map[string]any {
	m := map[string]any{"ts": r.Time.Format(time.RFC3339Nano), "source": r.Source, "event": r.Event, "level": r.Level, "pid": r.PID}
	for _, fl := range r.Fields {
		m[fl.Key] = fl.Value
	}
	return m
}
