package dashboard

import (
	"time"

	"github.com/theloop-dev/theloop/graph"
)

// The item page's timeline, grouped by node: one group per stay in a node
// (entered by the graph starting there, advancing or being forced there),
// with when it was entered, how long it stayed (until the next entry, or
// until now for the current node), its attempts from graph-state.json,
// and the events of the stay inside — the claims, blocks, decisions and
// deliveries — newest group first.

// timelineGroup is one stay in a node.
type timelineGroup struct {
	Node     string
	Entered  string
	Duration string
	Attempts int
	Current  bool
	Events   []timelineRow
}

// entryNode is the node an event enters ("" when it enters none).
func entryNode(e Event) string {
	str := func(k string) string { v, _ := e.Fields[k].(string); return v }
	switch e.Name {
	case "graph.started":
		return str("node")
	case "graph.advanced", "graph.forced":
		if to := str("to"); to != "" {
			return to
		}
	}
	return ""
}

// groupTimeline groups evs (oldest first) by the node they happened in.
// Events before the graph was entered form a group with no node.
func groupTimeline(evs []Event, st *graph.State, now time.Time) []timelineGroup {
	var groups []timelineGroup
	var enteredAt []time.Time
	cur := -1
	for _, e := range evs {
		if n := entryNode(e); n != "" {
			g := timelineGroup{Node: n, Entered: e.Time.UTC().Format("2006-01-02 15:04:05")}
			if st != nil {
				g.Attempts = st.Record(n).Attempts
			}
			groups = append(groups, g)
			enteredAt = append(enteredAt, e.Time)
			cur = len(groups) - 1
		}
		if cur < 0 {
			groups = append(groups, timelineGroup{Node: "", Entered: e.Time.UTC().Format("2006-01-02 15:04:05")})
			enteredAt = append(enteredAt, e.Time)
			cur = 0
		}
		groups[cur].Events = append(groups[cur].Events, timelineRow{At: e.Time.UTC().Format("15:04:05"), Name: e.Name, Detail: clip(fieldsText(e.Fields), 300)})
	}
	for i := range groups {
		end := now
		if i+1 < len(groups) {
			end = enteredAt[i+1]
		} else if st != nil && groups[i].Node == st.CurrentNode {
			groups[i].Current = true
		}
		groups[i].Duration = humanDuration(end.Sub(enteredAt[i]))
	}
	// Newest first, and the events inside each newest first.
	for i, j := 0, len(groups)-1; i < j; i, j = i+1, j-1 {
		groups[i], groups[j] = groups[j], groups[i]
	}
	for _, g := range groups {
		for i, j := 0, len(g.Events)-1; i < j; i, j = i+1, j-1 {
			g.Events[i], g.Events[j] = g.Events[j], g.Events[i]
		}
	}
	return groups
}
