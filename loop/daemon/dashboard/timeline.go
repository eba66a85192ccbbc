package dashboard

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
)

// The item page's timeline, grouped by node: one group per stay in a node
// (entered by the graph starting there, advancing or being forced there),
// with when it was entered, how long it stayed (until the next entry; the
// current node's stay until now, a finished item's last stay not at all),
// its attempts from graph-state.json, and one typed row per step of the
// stay — a claim, a block with its message, a gate decision with who and
// which comment, a paste, a ticket effect, a (re)spawn — each with its raw
// event-log record one click away; newest group first. An event about a
// node (a claim, a block, the advance that left it) goes to the latest
// stay in that node, so a block logged together with the advance that
// followed it still reads in the node it blocked.

// timelineGroup is one stay in a node.
type timelineGroup struct {
	Node     string
	Entered  string
	Duration string
	Attempts int
	Current  bool
	// Finished: the stay in the terminal node of a finished item.
	Finished bool
	Events   []timelineRow
}

// Timeline row kinds (CSS class tokens, kind-<kind>).
const (
	rowClaim    = "claim"
	rowBlock    = "block"
	rowDecision = "decision"
	rowPaste    = "paste"
	rowTicket   = "ticket"
	rowSpawn    = "spawn"
	rowMove     = "move"
	rowRefused  = "refused"
	rowEvent    = "event"
)

// timelineRow is one step: its kind, what happened in words, and the raw
// record (the event's name and fields as JSON) for the curious.
type timelineRow struct {
	At   string
	Kind string
	// Name is the event-log name.
	Name string
	// Text says what happened; every value in it may be agent- or
	// GitHub-written and is rendered as text only.
	Text string
	Raw  string
}

// quietEvents are bookkeeping lines with no step of their own: they stay
// in the raw log (`loopctl events`), not on the timeline.
var quietEvents = map[string]bool{
	"graph.hook_skipped": true, "graph.frozen": true, "graph.gate_session_bound": true,
	"dispatch.handled": true, "dispatch.succeeded": true, "routing.routed": true,
}

// entryNode is the node an event enters ("" when it enters none).
func entryNode(e Event) string {
	switch e.Name {
	case graph.EventStarted:
		return str(e, "node")
	case graph.EventAdvanced, graph.EventForced:
		return str(e, "to")
	}
	return ""
}

// aboutNode is the node a non-entering event is about ("" when none): the
// node a graph line names, the node a claim asked about.
func aboutNode(e Event) string {
	if n := str(e, "asked_node"); n != "" {
		return n
	}
	switch e.Name {
	case graph.EventAdvanced, graph.EventBlocked, graph.EventEscalated, graph.EventParked, graph.EventCompleted:
		return str(e, "node")
	case graph.EventForced:
		return str(e, "from")
	}
	return ""
}

func str(e Event, k string) string {
	switch v := e.Fields[k].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// timelineInput is what groupTimeline reads beside the events.
type timelineInput struct {
	State *graph.State
	Graph *graph.Graph
	Now   time.Time
	// Done: the item finished (complete, closed or stopped): no stay is
	// current and none is counting.
	Done bool
}

// groupTimeline groups evs (oldest first) by the stay in a node they
// happened in. Events before the graph was entered form a group with no
// node.
func groupTimeline(evs []Event, in timelineInput) []timelineGroup {
	var groups []timelineGroup
	var enteredAt []time.Time
	latest := map[string]int{} // node → its latest stay
	cur := -1
	open := func(node string, at time.Time) {
		g := timelineGroup{Node: node, Entered: at.UTC().Format("2006-01-02 15:04:05")}
		if in.State != nil && node != "" {
			g.Attempts = in.State.Record(node).Attempts
		}
		groups = append(groups, g)
		enteredAt = append(enteredAt, at)
		cur = len(groups) - 1
		if node != "" {
			latest[node] = cur
		}
	}
	for _, e := range evs {
		if quietEvents[e.Name] {
			continue
		}
		about, enters := aboutNode(e), entryNode(e)
		if about == "" && enters != "" {
			// graph.started: the entering event is the stay's first row.
			open(enters, e.Time)
			groups[cur].Events = append(groups[cur].Events, describe(e, in))
			continue
		}
		if cur < 0 {
			open("", e.Time)
		}
		into := cur
		if i, ok := latest[about]; ok && about != "" {
			into = i
		}
		groups[into].Events = append(groups[into].Events, describe(e, in))
		if enters != "" {
			open(enters, e.Time)
		}
	}
	for i := range groups {
		last := i+1 == len(groups)
		switch {
		case !last:
			groups[i].Duration = humanDuration(enteredAt[i+1].Sub(enteredAt[i]))
		case in.Done:
			groups[i].Finished = true
		default:
			groups[i].Duration = humanDuration(in.Now.Sub(enteredAt[i]))
			groups[i].Current = in.State != nil && groups[i].Node == in.State.CurrentNode
		}
	}
	// Newest first, and the rows inside each newest first (stable: rows
	// logged at one instant keep their log order reversed).
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

// describe types one event and says what it was.
func describe(e Event, in timelineInput) timelineRow {
	r := timelineRow{At: e.Time.UTC().Format("15:04:05"), Name: e.Name, Kind: rowEvent, Raw: rawRecord(e)}
	s := func(k string) string { return str(e, k) }
	with := func(parts ...string) string {
		var out []string
		for _, p := range parts {
			if p != "" {
				out = append(out, p)
			}
		}
		return strings.Join(out, " ")
	}
	opt := func(format, v string) string {
		if v == "" {
			return ""
		}
		return fmt.Sprintf(format, v)
	}
	switch e.Name {
	case graph.EventStarted:
		r.Kind, r.Text = rowMove, "started at "+s("node")
	case graph.EventAdvanced:
		switch {
		case s("basis") == "recompute":
			r.Kind = rowMove
			outcome := s("outcome")
			if outcome == "pass" {
				outcome = ""
			}
			r.Text = with(s("node"), "passed", opt("(%s)", outcome), "→", s("to"), "— loopd's recompute bore the agent's claim out")
		case isHuman(in.Graph, s("node")):
			r.Kind = rowDecision
			r.Text = with(s("node")+":", s("outcome"), decidedBy(in.State, s("node")), "→", s("to"))
		default:
			r.Kind, r.Text = rowMove, with(s("node"), opt("%s", s("outcome")), "→", s("to"))
		}
	case graph.EventForced:
		r.Kind, r.Text = rowMove, with("forced from", s("from"), "to", s("to"), opt("by %s", s("by")), opt("— %s", s("reason")))
	case graph.EventBlocked:
		r.Kind = rowBlock
		msg := s("message")
		if msg == "" && s("verified") == "false" {
			msg = "reported by the agent; " + s("recomputed")
		}
		r.Text = with(s("node"), "blocked", opt("by %s", s("hook"))+":", msg)
	case graph.EventEscalated:
		r.Kind, r.Text = rowBlock, with(s("node"), "escalated: the same block again, parked for a human")
	case graph.EventParked:
		r.Kind = rowMove
		if isHuman(in.Graph, s("node")) {
			r.Text = with(s("node"), "waits for an authorized person's decision")
		} else {
			r.Text = with(s("node"), "parked", opt("by %s", s("hook")), opt("— %s", s("reason")))
		}
	case graph.EventCompleted:
		r.Kind, r.Text = rowMove, with(s("node"), "completed: the walk is done")
	case "graph.node_skipped":
		r.Kind, r.Text = rowDecision, with(s("node"), "skipped", opt("by the %s", s("via")), opt("of %s", s("by")))
	case "graph.skips_declared":
		r.Kind, r.Text = rowDecision, with("skips declared", opt("by the %s:", s("via")), s("nodes"))
	case "graph.claim_refused":
		r.Kind, r.Text = rowRefused, with("refused", s("what"), opt("for %s", s("asked_node"))+":", s("reason"))
	case "graph.assignment_delivered":
		r.Kind, r.Text = rowPaste, "the node's assignment pasted into the session"
	case "session.delivered":
		r.Kind, r.Text = rowPaste, with("pasted", opt("%s bytes", s("bytes")), "into", s("tmux_target"))
	case "session.reply", "dashboard.replied":
		r.Kind, r.Text = rowPaste, with("reply pasted", opt("from %s", s("by")))
	case "outbox.performed":
		if s("op") == "loop.claim" {
			r.Kind = rowClaim
			r.Text = with(s("summary")+";", "loopd's recompute:", s("recomputed_node"), s("recomputed_status"), opt("— %s", s("recomputed_message")), opt("· ticket: %s", s("effects")))
		} else {
			r.Kind, r.Text = rowTicket, with(s("summary"), opt("(%s)", s("op")), opt("%s", s("url")))
		}
	case "outbox.refused":
		r.Kind, r.Text = rowRefused, with("refused", s("summary")+":", s("reason"))
	case "reaction.added":
		r.Kind, r.Text = rowTicket, with("reacted", s("content"), opt("on %s", s("gh_event")))
	case "session.respawn_averted", "session.liveness_respawn_averted":
		r.Kind, r.Text = rowSpawn, "no respawn needed: the session was alive"
	case "session.announced":
		r.Kind, r.Text = rowTicket, "the session announced on the ticket"
	case "session.spawned":
		r.Kind, r.Text = rowSpawn, with(s("harness"), "session spawned in", s("tmux_target"))
	case "session.respawned", "dispatch.respawned", "session.liveness_respawned":
		r.Kind, r.Text = rowSpawn, with("session respawned", opt("(%s)", s("reason")), opt("%s", s("how")))
	case "session.spawn_failed":
		r.Kind, r.Text = rowSpawn, with("spawn failed:", s("error"))
	case "session.closed", "session.autoclosed":
		r.Kind, r.Text = rowSpawn, with("session closed", opt("(%s)", s("reason")))
	case "control.command":
		r.Kind, r.Text = rowDecision, with(s("command"), "command", opt("by %s", s("actor")), opt("→ %s", s("effect")))
	case "dispatch.dropped", "routing.dropped":
		r.Text = with(opt("webhook %s", s("gh_event")), "not acted on:", s("reason"))
	case "dispatch.spawned":
		r.Kind, r.Text = rowSpawn, with(opt("webhook %s", s("gh_event")), s("action"), "spawned the session")
	case "workspace.prepared":
		r.Text = "worktree prepared"
	default:
		r.Text = summary(e)
	}
	if r.Text == "" {
		r.Text = e.Name
	}
	r.Text = clip(r.Text, 600)
	return r
}

// summary is a short line for an event without a sentence of its own: its
// most telling fields by name, never a dump of every key.
func summary(e Event) string {
	for _, k := range []string{"summary", "reason", "error", "message", "node", "gh_event"} {
		if v := str(e, k); v != "" {
			return strings.ReplaceAll(e.Name, ".", " ") + ": " + v
		}
	}
	return strings.ReplaceAll(e.Name, ".", " ")
}

func isHuman(g *graph.Graph, node string) bool {
	if g == nil {
		return humanGates()[node]
	}
	n, ok := g.Node(node)
	return ok && n.IsHuman()
}

// decidedBy says who decided a gate and through which comment, from the
// decision recorded in graph-state.json.
func decidedBy(st *graph.State, node string) string {
	if st == nil {
		return ""
	}
	d, ok := st.Decisions.Get(node)
	if !ok || d.By == "" {
		return ""
	}
	out := "by " + d.By
	if d.Comment != "" {
		out += " (comment " + d.Comment + ")"
	}
	return out
}

// rawRecord is the event as the log holds it, for the row's "raw" fold.
func rawRecord(e Event) string {
	keys := make([]string, 0, len(e.Fields))
	for k := range e.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "{\"ts\": %q, \"event\": %q", e.Time.UTC().Format(time.RFC3339Nano), e.Name)
	if e.WorkItem != "" {
		fmt.Fprintf(&b, ", \"work_item\": %q", e.WorkItem)
	}
	for _, k := range keys {
		v, err := json.Marshal(e.Fields[k])
		if err != nil {
			v = []byte(`"?"`)
		}
		fmt.Fprintf(&b, ",\n  %q: %s", k, v)
	}
	b.WriteString("}")
	return clip(b.String(), 4000)
}
