package hooks

import (
	"context"
	"fmt"
	"strings"

	"github.com/theloop-dev/theloop/graph"
)

// maxEscalationReason bounds the block quoted on the ticket: the reason is
// rendered hook findings, which can quote what the agent wrote.
const maxEscalationReason = 2000

// escalateOnTicket tells the people on the ticket that a node escalated:
// a marked comment naming the node, the block that repeated (quoted as
// data, in a code fence no agent text can close) and what a human can do,
// and the label <phase prefix>escalated, added beside the others. The
// next set-phase-label (entering another node) removes it with the other
// phase labels. Runs in the graph's onEscalation chain; elsewhere it has
// nothing to report and skips.
func escalateOnTicket(ctx context.Context, hc *graph.HookContext) graph.HookResult {
	p := hc.Escalation
	if p == nil {
		return graph.Skip("no escalation to report (escalate-on-ticket belongs in onEscalation)")
	}
	prefix := hc.Config.StringOr("phaseLabelPrefix", DefaultPhaseLabelPrefix)
	label := hc.Params.StringOr("label", prefix+"escalated")
	body := EscalationComment(hc.WorkItem.ID, p)
	data := map[string]any{"node": p.Node, "label": label}
	if _, err := postComment(ctx, hc, body); err != nil {
		data["posted"] = false
		return sideEffect(err, data, "no ticket integration configured; the escalation was not posted on the ticket")
	}
	data["posted"] = true
	if _, err := setLabels(ctx, hc, []any{label}, ""); err != nil {
		data["labelled"] = false
		return sideEffect(err, data, "the escalation was posted but label "+label+" was not applied")
	}
	data["labelled"] = true
	return graph.Pass(data)
}

// EscalationComment is the ticket comment for an escalation of work item
// id (before the self-authored marker is added).
func EscalationComment(id string, p *graph.Parked) string {
	reason := strings.ToValidUTF8(p.Reason, "\uFFFD")
	if len(reason) > maxEscalationReason {
		reason = strings.ToValidUTF8(reason[:maxEscalationReason], "") + "\n… (cut; the whole reason is in graph-state.json and the event log)"
	}
	if strings.TrimSpace(reason) == "" {
		reason = "(no reason recorded)"
	}
	fence := strings.Repeat("`", max(3, longestRun(reason, '`')+1))
	by := ""
	if p.Hook != "" {
		by = fmt.Sprintf(" (reported by `%s`)", p.Hook)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "🤖 _the-loop_ — **escalated at `%s`**: work item `%s` cannot get past this node on its own.\n\n", p.Node, id)
	fmt.Fprintf(&b, "The same block came back, or the node ran out of attempts. What blocks it%s:\n\n%stext\n%s\n%s\n\n", by, fence, reason, fence)
	b.WriteString("What you can do:\n")
	fmt.Fprintf(&b, "- **Fix what blocks it** (in the agent's session or on the branch): the agent's next `loopctl graph complete %s` checks the node again and lifts the escalation.\n", id)
	b.WriteString("- **Reply on this ticket**: a new comment from an authorized person is a new event, and the node is evaluated again.\n")
	fmt.Fprintf(&b, "- **Move it on deliberately**: `loopctl graph force %s --to <node> --reason \"…\"` (recorded in the execution log and on this ticket; `check --recompute` still reports a bypassed gate).\n", id)
	b.WriteString("- **Stop or pause the work**: comment `the-loop stop` or `the-loop pause`.\n")
	return b.String()
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	best, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			best = max(best, run)
		} else {
			run = 0
		}
	}
	return best
}
