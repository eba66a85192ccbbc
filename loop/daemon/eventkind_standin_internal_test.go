package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/workitem"
)

// standInKind is an event kind no source sends: it is added to the table
// of event kinds here, in a test file, and nothing else is edited — the
// router, the extraction, the prompt, the decision and the notice must
// all follow from its entry.
const standInKind = "standin_note"

func init() {
	ingress.RegisterKind(ingress.EventKind{
		Name: standInKind, Provider: "github",
		Refs: []ingress.RefRule{
			{Path: []string{"standin", "issue_number"}, From: ingress.RefFromEntity},
			{Path: []string{"standin", "branches"}, Each: []string{"ref"}, From: ingress.RefFromBranch},
		},
		Actor: ingress.ActorWords, Words: "note",
		Decides: "posted", CommentType: integrations.CommentTypeReviewComment, Noun: "stand-in note",
		Excerpt: []ingress.ExcerptPart{{Container: "standin", Fields: []string{"title", "issue_number"}}, {Container: "note", Fields: []string{"body"}}},
	})
}

// claimRecorder is a CommentVerifier that holds every claim true and
// keeps them.
type claimRecorder struct{ claims []CommentClaim }

func (r *claimRecorder) VerifyComment(_ context.Context, c CommentClaim) error {
	r.claims = append(r.claims, c)
	return nil
}

func TestStandInEventKindIsRoutedExtractedPromptedAndDecidesFromItsTableEntryAlone(t *testing.T) {
	cfg := ingress.DefaultConfig()
	cfg.InsecureAcceptUnsigned = true
	cfg.Events = []string{standInKind}
	cfg.Repositories = []string{"acme/widgets"}
	cfg.AuthorizedUsers = []string{"octocat"}
	var log []graph.LogEvent
	r, err := ingress.NewRouter(cfg, ingress.RouterDeps{Log: graph.SinkFunc(func(e graph.LogEvent) { log = append(log, e) })})
	require.NoError(t, err)
	payload := func(action, who string) []byte {
		b, err := json.Marshal(map[string]any{
			"action":     action,
			"repository": map[string]any{"full_name": "acme/widgets"},
			"sender":     map[string]any{"login": who},
			"standin":    map[string]any{"issue_number": 7, "title": "a stand-in", "branches": []any{map[string]any{"ref": "issue-9-fix"}, map[string]any{"ref": "main"}}},
			"note":       map[string]any{"id": 41, "body": "Approved", "user": map[string]any{"login": who}, "html_url": "https://github.com/acme/widgets/issues/7#note-41"},
		})
		require.NoError(t, err)
		return b
	}
	require.NotContains(t, ingress.DefaultEvents(), standInKind, "a registered kind is routed only where configured")

	// Routed and extracted: the entity, then the weak branch link, from
	// the entry's RefRules; the actor and the words from its Words.
	ev, drop, err := r.Route(standInKind, "d-1", payload("posted", "octocat"))
	require.NoError(t, err)
	require.Empty(t, drop)
	require.NotNil(t, ev)
	item := workitem.Ref{Provider: "github", Owner: "acme", Repo: "widgets", Number: 7}
	weak := workitem.Ref{Provider: "github", Owner: "acme", Repo: "widgets", Number: 9}
	require.Equal(t, []workitem.Ref{item, weak}, ev.WorkItems)
	require.Equal(t, []workitem.Ref{weak}, ev.BranchOnly)
	require.Equal(t, "octocat", ev.Actor)
	require.Len(t, ev.Comments, 1)
	require.Equal(t, ingress.Comment{ID: "41", Author: "octocat", Body: "Approved", URL: "https://github.com/acme/widgets/issues/7#note-41"}, ev.Comments[0])

	// Prompted: the excerpt shows the entry's containers and fields.
	var excerpt map[string]map[string]any
	require.NoError(t, json.Unmarshal([]byte(payloadExcerpt(ev)), &excerpt))
	require.Equal(t, map[string]map[string]any{
		"standin": {"title": "a stand-in", "issue_number": float64(7)},
		"note":    {"body": "Approved", "author": "octocat"},
	}, excerpt)

	// Decides under its action only, re-read as the entry's comment type.
	rec := &claimRecorder{}
	l := &graphLink{verifier: rec}
	l.setConfig(linkConfig{AuthorizedUsers: []string{"octocat"}})
	ge, err := l.decisionEvent(context.Background(), item, item, ev, ev.ReceivedAt, nil)
	require.NoError(t, err)
	require.Equal(t, standInKind, ge.Kind)
	require.Len(t, ge.Comments, 1)
	require.Equal(t, ingress.RuleAuthorizedUsers, ge.Comments[0].AuthorizedBy)
	require.Len(t, rec.claims, 1)
	require.Equal(t, integrations.CommentTypeReviewComment, rec.claims[0].Kind)
	edited := *ev
	edited.Action = "edited"
	_, err = l.decisionEvent(context.Background(), item, item, &edited, ev.ReceivedAt, nil)
	var s skip
	require.True(t, errors.As(err, &s), "an edit of a stand-in note is no decision: %v", err)

	// Dropped when a stranger speaks, and the notice names the words by
	// the entry's noun.
	log = nil
	_, drop, err = r.Route(standInKind, "d-2", payload("posted", "mallory"))
	require.NoError(t, err)
	require.Equal(t, ingress.DropUnauthorized, drop)
	require.NotEmpty(t, log)
	_, _, detail := classify(log[len(log)-1])
	require.Equal(t, "a stand-in note from @mallory, who is not authorized, was dropped", detail)
}
