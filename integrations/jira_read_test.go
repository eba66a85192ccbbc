package integrations

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/jirasim"
	"github.com/theloop-dev/theloop/ops"
)

// The reads loopd's Jira ingress makes, against jirasim: a comment by id
// (as the gate's re-read uses it) and the JQL search, every page.
func TestJiraReads(t *testing.T) {
	js := jirasim.Start(jirasim.Config{Email: jiraEmail, Token: jiraAPIToken})
	t.Cleanup(js.Close)
	w := newWorld(mapEnv{DefaultJiraEmailEnv: jiraEmail, DefaultJiraTokenEnv: jiraAPIToken})
	s := w.set(t, Config{Jira: &JiraConfig{API: JiraAPIConfig{BaseURL: js.URL()}}})
	ctx := context.Background()
	js.AddIssue("LOOP-1")
	id := js.AddComment("LOOP-1", "557058:dana", "Approved")

	got, err := s.Call(ctx, ops.JiraGetComment, map[string]any{"issue": "LOOP-1", "commentId": id})
	require.NoError(t, err)
	assert.Equal(t, "LOOP-1", got["issue"])
	assert.Equal(t, id, got["id"])
	assert.Equal(t, "557058:dana", got["author"])
	assert.Equal(t, "Approved", got["body"])
	assert.NotEmpty(t, got["createdAt"])
	assert.Equal(t, got["createdAt"], got["updatedAt"])

	require.True(t, js.EditComment("LOOP-1", id, "557058:dana", "Approved!"))
	got, err = s.Call(ctx, ops.JiraGetComment, map[string]any{"issue": "LOOP-1", "commentId": id})
	require.NoError(t, err)
	assert.NotEqual(t, got["createdAt"], got["updatedAt"], "an edit shows")

	_, err = s.Call(ctx, ops.JiraGetComment, map[string]any{"issue": "LOOP-1", "commentId": "424242"})
	requireKind(t, err, ErrNotFound)
	_, err = s.Call(ctx, ops.JiraGetComment, map[string]any{"issue": "LOOP-1", "commentId": "../1"})
	requireKind(t, err, ErrInvalidArgument)

	for i := 2; i <= 130; i++ {
		js.AddIssue(fmt.Sprintf("LOOP-%d", i))
	}
	js.AddIssue("OTHER-1")
	res, err := s.Call(ctx, ops.JiraSearchIssues, map[string]any{"jql": `project in ("LOOP") AND updated >= "-5m" ORDER BY updated ASC`})
	require.NoError(t, err)
	assert.Len(t, res["issues"].([]any), 130, "every page")
	res, err = s.Call(ctx, ops.JiraSearchIssues, map[string]any{"jql": `project = LOOP`, "maxIssues": 7})
	require.NoError(t, err)
	assert.Len(t, res["issues"].([]any), 7)
	_, err = s.Call(ctx, ops.JiraSearchIssues, map[string]any{"jql": `summary ~ "x"`})
	requireKind(t, err, ErrRejected)
	_, err = s.Call(ctx, ops.JiraSearchIssues, map[string]any{"jql": " "})
	requireKind(t, err, ErrInvalidArgument)
}
