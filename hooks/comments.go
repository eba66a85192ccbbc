package hooks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// Marker is the self-authored marker every comment theloop posts carries
// (the-loop's, so both implementations recognise each other's comments).
const Marker = "<!-- the-loop:agent-comment -->"

// Attribution is the visible line above the marker.
const Attribution = "🤖 _the-loop, autonomous comment_"

// Mark appends the attribution and marker to a comment body, unless it
// already carries the marker.
func Mark(body string) string {
	if strings.Contains(body, Marker) {
		return body
	}
	return strings.TrimRight(body, " \t\r\n") + "\n\n" + Attribution + "\n" + Marker + "\n"
}

// SelfAuthored reports whether a comment body was written by the-loop.
func SelfAuthored(body string) bool { return strings.Contains(body, Marker) }

const configAuthUsers = "authorizedUsers"

// authorizedComments returns the event's comments that count: not
// self-authored, with an author exactly (case-sensitive) in the allowlist.
// An empty allowlist authorizes nobody.
func authorizedComments(hc *graph.HookContext) []graph.Comment {
	if hc.Event == nil {
		return nil
	}
	allowed := map[string]bool{}
	for _, u := range hc.Config.Strings(configAuthUsers) {
		allowed[u] = true
	}
	var out []graph.Comment
	for _, c := range hc.Event.Comments {
		if SelfAuthored(c.Body) {
			continue
		}
		if c.Author == "" || !allowed[c.Author] && c.AuthorizedBy == "" {
			continue
		}
		out = append(out, c)
	}
	return out
}

// rules renders the distinct authorizing rules of comments ("" when the
// hooks' own allowlist let them in).
func rules(cs []graph.Comment) string {
	var out []string
	seen := map[string]bool{}
	for _, c := range cs {
		if c.AuthorizedBy != "" && !seen[c.AuthorizedBy] {
			seen[c.AuthorizedBy] = true
			out = append(out, c.AuthorizedBy)
		}
	}
	return strings.Join(out, ", ")
}

// authors renders "@a, @b" for the distinct authors of comments.
func authors(cs []graph.Comment) string {
	var names []string
	seen := map[string]bool{}
	for _, c := range cs {
		a := strings.TrimPrefix(c.Author, "@")
		if a != "" && !seen[a] {
			seen[a] = true
			names = append(names, "@"+a)
		}
	}
	return strings.Join(names, ", ")
}

// commentData is the JSON-shaped form of comments kept in result data.
func commentData(cs []graph.Comment) []any {
	out := make([]any, len(cs))
	for i, c := range cs {
		out[i] = map[string]any{"id": c.ID, "author": c.Author, "body": c.Body}
	}
	return out
}

// errNoIntegrations marks a live chain run without any integrations
// configured (an embedder's or a test's choice, not an outage).
var errNoIntegrations = fmt.Errorf("no integrations configured: %w", graph.ErrUnsupportedOperation)

// call performs an outbound operation.
func call(ctx context.Context, hc *graph.HookContext, op graph.Operation, args map[string]any) (map[string]any, error) {
	if hc.Integrations == nil {
		return nil, errNoIntegrations
	}
	return hc.Integrations.Call(ctx, op, args)
}

// sideEffect turns an outbound call's error into the hook's result: a
// provider that is not configured is a skip (nothing to do here), any other
// failure is a pass carrying HookResult.Degraded (recorded, reported, never wedging
// the graph unless the reference is declared blocking).
func sideEffect(err error, data map[string]any, skipNote string) graph.HookResult {
	if data == nil {
		data = map[string]any{}
	}
	if errors.Is(err, graph.ErrUnsupportedOperation) {
		return graph.Skip(skipNote)
	}
	return degraded(data, err.Error())
}

// degraded is a pass whose side effect failed for the reason why: the
// runtime reports it, and the chain goes on unless the reference is
// declared blocking.
func degraded(data map[string]any, why string) graph.HookResult {
	r := graph.Pass(data)
	r.Degraded = why
	return r
}

// decided is a passing result routing on outcome that reports a human
// decision (graph.DecisionFact) for the runtime to record.
func decided(outcome string, f graph.DecisionFact, data map[string]any) graph.HookResult {
	r := graph.PassWith(outcome, data)
	r.Decision = &f
	return r
}

// decider is the provenance of a decision a result reports (zero without
// one).
func decider(r graph.HookResult) graph.DecisionFact {
	if r.Decision == nil {
		return graph.DecisionFact{}
	}
	return *r.Decision
}

// A work item's ticket is a GitHub issue or pull request, or — for a ref
// jira:PROJ-123 — a Jira issue. The ticket effects are the same on both
// (comments, the phase label, reading replies); ticketOp picks the
// provider's operation and arguments, so no hook names a provider.

// jiraIssue returns the work item's Jira issue key, when its ticket is one.
func jiraIssue(hc *graph.HookContext) (string, bool) {
	if !workitem.IsJiraRef(hc.WorkItem.Ref) {
		return "", false
	}
	key, err := workitem.ParseJiraKey(hc.WorkItem.Ref)
	return key, err == nil
}

// setLabels applies labels to the work item's ticket (replacing the other
// labels carrying prefix, when prefix is set).
func setLabels(ctx context.Context, hc *graph.HookContext, labels []any, prefix string) (map[string]any, error) {
	if key, ok := jiraIssue(hc); ok {
		args := map[string]any{"issue": key, "labels": labels}
		if prefix != "" {
			args["replacePrefix"] = prefix
		}
		return call(ctx, hc, ops.JiraSetLabels, args)
	}
	args := map[string]any{"ref": hc.WorkItem.Ref, "labels": labels}
	if prefix != "" {
		args["replacePrefix"] = prefix
	}
	return call(ctx, hc, ops.GitHubSetLabels, args)
}

// postComment posts a marked comment on the work item's ticket.
func postComment(ctx context.Context, hc *graph.HookContext, body string) (map[string]any, error) {
	if key, ok := jiraIssue(hc); ok {
		return call(ctx, hc, ops.JiraAddComment, map[string]any{"issue": key, "body": Mark(body)})
	}
	return call(ctx, hc, ops.GitHubAddComment, map[string]any{"ref": hc.WorkItem.Ref, "body": Mark(body)})
}

// listComments reads the comments of the work item's ticket.
func listComments(ctx context.Context, hc *graph.HookContext) ([]graph.Comment, error) {
	var res map[string]any
	var err error
	if key, ok := jiraIssue(hc); ok {
		res, err = call(ctx, hc, ops.JiraListComments, map[string]any{"issue": key})
	} else {
		res, err = call(ctx, hc, ops.GitHubListComments, map[string]any{"ref": hc.WorkItem.Ref})
	}
	if err != nil {
		return nil, err
	}
	var out []graph.Comment
	raw, _ := res["comments"].([]any)
	for _, e := range raw {
		v := graph.AsValues(e)
		if v == nil {
			continue
		}
		author := v.String("author")
		if author == "" {
			author = v.Map("author").String("login")
		}
		if author == "" {
			author = v.Map("user").String("login")
		}
		out = append(out, graph.Comment{ID: fmt.Sprint(v["id"]), Author: strings.TrimPrefix(author, "@"), Body: v.String("body"), URL: v.String("url")})
	}
	return out, nil
}
