package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/jirasim"
	"github.com/theloop-dev/theloop/workitem"
)

type nextVerifier struct{ asked int }

func (n *nextVerifier) VerifyComment(context.Context, CommentClaim) error { n.asked++; return nil }

// decisions §19 for Jira: a comment decides only as Jira holds it, re-read
// by id — on that issue, by that account, with that body, never edited,
// made after the gate was entered; Jira unreachable is not a forgery.
func TestJiraCommentIsReReadAtJira(t *testing.T) {
	js := jirasim.Start(jirasim.Config{Email: "bot@example.com", Token: "tok"})
	defer js.Close()
	js.AddIssue("PROJ-1")
	js.AddIssue("PROJ-2")
	set, err := integrations.New(integrations.Config{Jira: &integrations.JiraConfig{MaxAttempts: 1, API: integrations.JiraAPIConfig{BaseURL: js.URL()}}},
		integrations.Deps{Env: func(k string) (string, bool) {
			v, ok := map[string]string{integrations.DefaultJiraEmailEnv: "bot@example.com", integrations.DefaultJiraTokenEnv: "tok"}[k]
			return v, ok
		}})
	require.NoError(t, err)
	projects, err := workitem.NewJiraProjects(map[string]string{"PROJ": "octo/app"})
	require.NoError(t, err)
	next := &nextVerifier{}
	v := jiraCommentVerifier{next: next, integ: set, projects: projects}
	item1, _ := projects.Ref("PROJ-1")
	item2, _ := projects.Ref("PROJ-2")
	ctx := context.Background()

	id := js.AddComment("PROJ-1", "557058:dana", "Approved")
	edited := js.AddComment("PROJ-1", "557058:dana", "Looks good")
	require.True(t, js.EditComment("PROJ-1", edited, "557058:dana", "Approved"))
	claim := CommentClaim{Item: item1, Kind: CommentTypeJira, ID: id, Author: "jira:557058:dana", Body: "Approved"}

	require.NoError(t, v.VerifyComment(ctx, claim))
	for _, tc := range []struct {
		name   string
		edit   func(*CommentClaim)
		reason string
	}{
		{"another body", func(c *CommentClaim) { c.Body = "Approved!" }, ForgedOtherBody},
		{"another author", func(c *CommentClaim) { c.Author = "jira:557058:mallory" }, ForgedOtherAuthor},
		{"a GitHub login of the account's spelling", func(c *CommentClaim) { c.Author = "557058:dana" }, ForgedOtherAuthor},
		{"edited since created", func(c *CommentClaim) { c.ID = edited }, ForgedEdited},
		{"no such comment", func(c *CommentClaim) { c.ID = "99999" }, ForgedNotFound},
		{"another issue's comment", func(c *CommentClaim) { c.Item = item2 }, ForgedNotFound},
		{"no id", func(c *CommentClaim) { c.ID = "" }, ForgedNoID},
		{"not an id", func(c *CommentClaim) { c.ID = "1/../2" }, ForgedNoID},
		{"older than the gate", func(c *CommentClaim) { c.NotBefore = time.Now().Add(time.Hour) }, ForgedStale},
		{"a project not served", func(c *CommentClaim) { c.Item.Repo = "other" }, ForgedOtherItem},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := claim
			tc.edit(&c)
			var f *ForgedCommentError
			require.ErrorAs(t, v.VerifyComment(ctx, c), &f)
			require.Equal(t, tc.reason, f.Reason)
		})
	}

	gh, _ := workitem.Parse("github:octo/app#1")
	require.NoError(t, v.VerifyComment(ctx, CommentClaim{Item: gh, ID: "1"}))
	require.Equal(t, 1, next.asked, "a GitHub claim is GitHub's verifier's")

	js.Close()
	err = v.VerifyComment(ctx, claim)
	require.Error(t, err)
	require.False(t, errors.Is(err, ErrForgedComment), "Jira unreachable is not a forgery: %v", err)
}
