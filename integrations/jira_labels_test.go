package integrations

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/jirasim"
	"github.com/theloop-dev/theloop/ops"
)

// jira.set-labels replaces the loop: labels and keeps the others, as
// github.set-labels does; jira.list-comments reads the issue's comments
// oldest first with their authors. Against the Jira stand-in.
func TestJiraLabelsAndComments(t *testing.T) {
	js := jirasim.Start(jirasim.Config{Email: jiraEmail, Token: jiraAPIToken})
	defer js.Close()
	js.AddIssue("LOOP-7", "customer", "loop:design")
	w := newWorld(mapEnv{DefaultJiraEmailEnv: jiraEmail, DefaultJiraTokenEnv: jiraAPIToken})
	s := w.set(t, Config{Jira: &JiraConfig{API: JiraAPIConfig{BaseURL: js.URL()}}})
	ctx := context.Background()

	got, err := s.Call(ctx, ops.JiraSetLabels, map[string]any{"issue": "jira:LOOP-7", "labels": []any{"loop:implementation"}, "replacePrefix": "loop:"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"labels": []any{"customer", "loop:implementation"}}, got)
	is, _ := js.Issue("LOOP-7")
	assert.Equal(t, []string{"customer", "loop:implementation"}, is.Labels)

	// Without replacePrefix it only adds; an existing label is not doubled.
	_, err = s.Call(ctx, ops.JiraSetLabels, map[string]any{"issue": "LOOP-7", "labels": []any{"loop:escalated", "customer"}})
	require.NoError(t, err)
	is, _ = js.Issue("LOOP-7")
	assert.Equal(t, []string{"customer", "loop:implementation", "loop:escalated"}, is.Labels)

	_, err = s.Call(ctx, ops.JiraSetLabels, map[string]any{"issue": "LOOP-7", "labels": []any{"two words"}})
	requireKind(t, err, ErrInvalidArgument)

	require.NotEmpty(t, js.AddComment("LOOP-7", "dana", "first"))
	_, err = s.Call(ctx, ops.JiraAddComment, map[string]any{"issue": "LOOP-7", "body": "second"})
	require.NoError(t, err)
	got, err = s.Call(ctx, ops.JiraListComments, map[string]any{"issue": "LOOP-7"})
	require.NoError(t, err)
	cs := got["comments"].([]any)
	require.Len(t, cs, 2)
	assert.Equal(t, "dana", cs[0].(map[string]any)["author"])
	assert.Equal(t, "first", cs[0].(map[string]any)["body"])
	assert.Equal(t, jiraEmail, cs[1].(map[string]any)["author"])

	_, err = s.Call(ctx, ops.JiraListComments, map[string]any{"issue": "LOOP-8"})
	requireKind(t, err, ErrNotFound)
}
