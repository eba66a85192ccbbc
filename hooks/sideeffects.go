package hooks

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ops"
)

// DefaultPhaseLabelPrefix prefixes every phase label.
const DefaultPhaseLabelPrefix = "loop:"

// setPhaseLabel moves the ticket's `loop:` label to the node's phase,
// keeping every other label.
func setPhaseLabel(ctx context.Context, hc *graph.HookContext) graph.HookResult {
	if hc.Node.Phase == "" {
		return graph.Skip("node declares no phase label")
	}
	prefix := hc.Config.StringOr("phaseLabelPrefix", DefaultPhaseLabelPrefix)
	label := prefix + hc.Node.Phase
	_, err := setLabels(ctx, hc, []any{label}, prefix)
	if err != nil {
		return sideEffect(err, map[string]any{"applied": false, "label": label}, "no ticket integration configured; label "+label+" not applied")
	}
	data := map[string]any{"applied": true, "label": label}
	// A Jira issue also moves through its workflow when the repository maps
	// the phase to a transition (ticketing.jira.transitions).
	if key, ok := jiraIssue(hc); ok {
		if t := hc.Config.Map("jiraTransitions").String(hc.Node.Phase); t != "" {
			if _, err := call(ctx, hc, ops.JiraTransition, map[string]any{"issue": key, "transition": t}); err != nil {
				data["transitioned"] = false
				return sideEffect(err, data, "label "+label+" applied; no Jira integration for the transition")
			}
			data["transitioned"], data["transition"] = true, t
		}
	}
	return graph.Pass(data)
}

// requestReview posts the marked review request on every entry of a human
// gate.
func requestReview(ctx context.Context, hc *graph.HookContext) graph.HookResult {
	if _, err := postComment(ctx, hc, ReviewRequestComment(hc.Node.ID, hc.WorkItem.ID)); err != nil {
		return sideEffect(err, map[string]any{"posted": false}, "no ticket integration configured; review request not posted")
	}
	return graph.Pass(map[string]any{"posted": true})
}

// ReviewRequestComment is request-review's comment for human gate node of
// work item id (before the self-authored marker is added). loopd posts the
// same text when its own recompute finds the work item entered a gate.
func ReviewRequestComment(node, id string) string {
	return fmt.Sprintf("🤖 _the-loop_ — **%s** is ready for review.\n\nWork item `%s` is waiting at this gate. Reply on this ticket with an approval, an approval with comments, or the changes you want; the-loop reads replies from authorized reviewers only.",
		node, id)
}

// Recipient is a person notify reaches, resolved from collaborators.yaml.
type Recipient struct {
	Login string
	Slack string
}

// ResolveRecipients resolves an event to people strictly through
// notifications.events → roles → collaborators (R5.7): nothing in a hook's
// parameters or in ticket text can add a recipient.
func ResolveRecipients(cfg graph.Values, event string) (roles []string, people []Recipient) {
	roles = cfg.Map("notifications").Map("events").Strings(event)
	seen := map[string]bool{}
	for _, raw := range asList(cfg["collaborators"]) {
		c := graph.AsValues(raw)
		if c == nil {
			continue
		}
		login := strings.TrimPrefix(c.String("login"), "@")
		if login == "" || seen[login] {
			continue
		}
		for _, r := range c.Strings("roles") {
			if slices.Contains(roles, r) {
				seen[login] = true
				people = append(people, Recipient{Login: login, Slack: c.String("slack")})
				break
			}
		}
	}
	return roles, people
}

func asList(v any) []any {
	switch t := v.(type) {
	case []any:
		return t
	case []map[string]any:
		out := make([]any, len(t))
		for i, m := range t {
			out[i] = m
		}
		return out
	}
	return nil
}

// notify tells the roles subscribed to an event that the work item needs
// them.
func notify(ctx context.Context, hc *graph.HookContext) graph.HookResult {
	event := hc.Params.StringOr("event", "phase-approval-pending")
	n := hc.Config.Map("notifications")
	if b := n.BoolPtr("enabled"); b != nil && !*b {
		return graph.Skip("notifications are disabled in the harness config")
	}
	roles, people := ResolveRecipients(hc.Config, event)
	if len(roles) == 0 {
		return graph.Skip("no roles configured for " + event)
	}
	mentions := make([]string, 0, len(people))
	for _, p := range people {
		if p.Slack != "" {
			mentions = append(mentions, "<@"+p.Slack+">")
		} else {
			mentions = append(mentions, "@"+p.Login)
		}
	}
	text := fmt.Sprintf("the-loop: %s is at *%s* (%s). Roles: %s", hc.WorkItem.ID, hc.Node.ID, event, strings.Join(roles, ", "))
	if len(mentions) > 0 {
		text += " — " + strings.Join(mentions, " ")
	}
	data := map[string]any{"event": event, "roles": roles, "recipients": len(people)}
	if len(people) == 0 {
		data["delivered"] = false
		return degraded(data, "no collaborator in .the-loop/collaborators.yaml holds the role(s) "+strings.Join(roles, ", "))
	}
	if _, err := call(ctx, hc, ops.SlackPostMessage, map[string]any{"text": text, "event": event}); err != nil {
		data["delivered"] = false
		return sideEffect(err, data, "no channel subscribed to "+event+" — configure a Slack integration")
	}
	data["delivered"] = true
	return graph.Pass(data)
}

// publishArtifact posts an artifact to the thread when the repository does
// not carry the-loop's config (the file is untracked working state there).
func publishArtifact(ctx context.Context, hc *graph.HookContext) graph.HookResult {
	if b := hc.Config.BoolPtr("repoInitialized"); b == nil || *b {
		return graph.Skip("the repository carries the artifact; it is reviewable there")
	}
	name := hc.Params.String("artifact")
	if name == "" {
		return graph.Skip("no artifact named")
	}
	text, err := readText(hc.Artifacts, name)
	if err != nil {
		return graph.Skip("no " + name + " for this work item")
	}
	body := fmt.Sprintf("🤖 _the-loop_ — **`%s`** for `%s`.\n\nThis repository has no the-loop configuration, so the file is untracked working state in the agent's checkout; here it is for review.\n\n---\n\n%s", name, hc.WorkItem.ID, text)
	if _, err := postComment(ctx, hc, body); err != nil {
		return sideEffect(err, map[string]any{"posted": false}, "no ticket integration configured; artifact not published")
	}
	return graph.Pass(map[string]any{"posted": true, "artifact": name})
}

// ExecutionLog is the work item's running log.
const ExecutionLog = "execution-log.md"

// logEntry appends a checkpoint to execution-log.md when the work item has
// one.
func logEntry(_ context.Context, hc *graph.HookContext) graph.HookResult {
	if !isFile(hc.Artifacts, ExecutionLog) {
		return graph.Skip("no execution log for this work item")
	}
	entry := fmt.Sprintf("\n### %s — %s %s\n\n- **Node:** %s\n- **Boundary:** %s\n", hc.Now.Format("2006-01-02"), hc.Boundary, hc.Node.ID, hc.Node.ID, hc.Boundary)
	if err := hc.Artifacts.AppendFile(ExecutionLog, []byte(entry)); err != nil {
		return degraded(map[string]any{"appended": false}, "could not append to "+ExecutionLog+": "+errorKind(err))
	}
	return graph.Pass(map[string]any{"appended": true})
}
