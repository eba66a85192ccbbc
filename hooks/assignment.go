package hooks

import (
	"context"
	"fmt"
	"strings"

	"github.com/theloop-dev/theloop/graph"
)

// RenderAssignment renders what an agent is told on entering a node, from
// the graph's own vocabulary only: node id, phase, produces, command,
// surface, and the exact claim command. Nothing from an event or a ticket
// reaches it.
func RenderAssignment(wi graph.WorkItem, n *graph.Node, surface string, pr int, prRepo string) string {
	scope := wi.ID
	claim := "loopctl graph complete " + wi.ID
	if pr > 0 {
		scope = fmt.Sprintf("pull request #%d's pdlc-pr-loop on %s", pr, wi.ID)
		claim += fmt.Sprintf(" --pr %d", pr)
		if prRepo != "" {
			scope += " (in " + prRepo + ")"
			claim += " --pr-repo " + prRepo
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the-loop assignment for %s:\n", scope)
	fmt.Fprintf(&b, "  you are now at node: %s", n.ID)
	if n.Phase != "" {
		fmt.Fprintf(&b, " (phase: %s)", n.Phase)
	}
	b.WriteString("\n")
	if len(n.Produces) > 0 {
		fmt.Fprintf(&b, "  produce: %s\n", strings.Join(n.Produces, ", "))
		var where string
		switch {
		case pr > 0:
			where = "this pull request (the inner loop always runs on its PR)"
		case surface == surfacePR:
			where = "a pull request in the repository the ticket was created in — the surface this work item chose at phase-selection"
		default:
			where = "the work item itself (the default) — comment on the ticket, and do not open a pull request just to carry the spec chain"
		}
		fmt.Fprintf(&b, "  iterate it on: %s\n", where)
	}
	if n.Command != "" {
		fmt.Fprintf(&b, "  work it with: `/the-loop:%s %s`\n", n.Command, wi.ID)
	}
	if IsCriticNode(n) && !n.IsHuman() {
		fmt.Fprintf(&b, "  get the second opinion with: `loopctl critic list`, then `loopctl critic run <critic> --work-item %s --node %s` (it records the review in execution-log.md)\n", wi.ID, n.ID)
	}
	if n.IsHuman() {
		b.WriteString("  this node is a HUMAN gate — the loop is waiting for an authorized person on the ticket. Do not claim it; do not start the work it gates.\n")
	} else {
		fmt.Fprintf(&b, "  when this node's work is done, report back: `%s`\n", claim)
		b.WriteString("  never set `status: approved` in an artifact yourself — the approval gate writes it — and never edit one that carries it: its approval is signed with its content (record later work in execution-log.md).\n")
	}
	b.WriteString("  (assigned by the-loop's graph — not part of any event payload)\n")
	return b.String()
}

// IsCriticNode reports whether a node asks for a critic's second opinion:
// its stage is critic-review, or its id ends so (the pull-request loop's
// node declares no stage).
func IsCriticNode(n *graph.Node) bool {
	return n != nil && (n.Stage == "critic-review" || strings.HasSuffix(n.ID, "critic-review"))
}

// deliverAssignment pastes the node's assignment into the bound session.
// It never blocks: on the CLI path there is no delivery channel (the claim
// envelope carries the next step), and a failed paste costs a nudge, never
// the process — graph-state.json stays the durable truth.
func deliverAssignment(ctx context.Context, hc *graph.HookContext) graph.HookResult {
	if hc.Deliver == nil {
		return graph.Skip("no delivery channel (CLI path — the claim envelope carries this)")
	}
	text := RenderAssignment(hc.WorkItem, hc.Node, hc.Surface, hc.Config.Int("assignmentPr", 0), hc.Config.String("assignmentPrRepo"))
	ok, err := hc.Deliver(ctx, hc.WorkItem.ID, text)
	switch {
	case err != nil:
		return graph.Skip("delivery failed: " + errorKind(err))
	case !ok:
		return graph.Skip("no live session to deliver into")
	}
	return graph.Pass(map[string]any{"delivered": true})
}
