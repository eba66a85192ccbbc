package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop"
)

// claimWorld is newRepo's issue-42 on a GitHub stand-in (acme/widgets#42),
// with the Factory's integrations reaching it; built reports whether
// loopctl built them (it must not in a loopd-managed session).
func claimWorld(t *testing.T, managed bool) (f *Factory, tio testIO, sim *githubsim.Server, state string, built *bool) {
	t.Helper()
	repo := newRepo(t)
	sim, err := githubsim.Start(githubsim.Config{Token: "tok"})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	for range 42 {
		_, err = sim.OpenIssue("acme/widgets", "dana", "an issue", "")
		require.NoError(t, err)
	}
	f, tio = testFactory(t, repo, nil)
	built = new(bool)
	f.Integrations = func(_ *loop.CLIConfig, sink graph.Sink) (graph.Integrations, []string, error) {
		*built = true
		set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
			Transport: integrations.TransportAPI, MaxAttempts: 1, TimeoutSeconds: 5,
			API: integrations.GitHubAPIConfig{BaseURL: sim.URL()},
		}}, integrations.Deps{Env: func(k string) (string, bool) { return "tok", k == "GH_TOKEN" }, Sink: sink})
		return set, nil, err
	}
	state = t.TempDir()
	if managed {
		base := f.Getenv
		env := map[string]string{"THE_LOOP_SESSION_ID": "sess-9", "THE_LOOP_WORK_ITEM": "issue-42", "THE_LOOP_STATE_ROOT": state}
		f.Getenv = func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			return base(k)
		}
	}
	return f, tio, sim, state, built
}

func readIntents(t *testing.T, state string) []loop.Intent {
	t.Helper()
	lines, _, err := loop.ReadOutboxLines(filepath.Join(loop.OutboxDir(state, "sess-9"), loop.OutboxFileName), 0, 1)
	require.NoError(t, err)
	var out []loop.Intent
	for _, l := range lines {
		in, err := loop.ParseIntent(l.Data) // what loopd will accept
		require.NoError(t, err)
		out = append(out, in)
	}
	return out
}

// In a loopd-managed session a claim's ticket effects are not the
// session's to name: no integration is built, GitHub sees no request, the
// outbox holds the claims (node, status, where the agent's runtime went)
// and no label or comment, and the envelope says loopd derives the rest.
func TestGraphCompleteInALoopdSessionWritesClaims(t *testing.T) {
	f, tio, sim, state, built := claimWorld(t, true)
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "force", "issue-42", "--to", "requirements-definition", "--reason", "agreed offline"}, f), tio.err.String())
	tio.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "complete", "issue-42"}, f), tio.err.String())

	var claim struct {
		graph.Claim
		TicketEffects struct {
			Via     string `json:"via"`
			Pending []struct {
				ID, Op, WorkItem, Summary string
			} `json:"pending"`
		} `json:"ticketEffects"`
	}
	require.NoError(t, json.Unmarshal(tio.out.Bytes(), &claim))
	require.Equal(t, "requirements-approval", claim.CurrentNode)
	require.Equal(t, "loopd", claim.TicketEffects.Via)
	require.Len(t, claim.TicketEffects.Pending, 1, "one claim; the label and the review request are loopd's to derive")
	require.Equal(t, string(loop.IntentClaim), claim.TicketEffects.Pending[0].Op)
	require.Equal(t, "claim requirements-definition pass → requirements-approval", claim.TicketEffects.Pending[0].Summary)

	require.False(t, *built, "no integration (no credential) is used in a loopd session")
	require.Empty(t, sim.Requests(), "GitHub sees no request from the session")

	intents := readIntents(t, state)
	// The force records no claim (loopd's recompute ignores forced
	// flags); the claim records one.
	require.Len(t, intents, 1)
	in := intents[0]
	require.Equal(t, "github:acme/widgets#42", in.WorkItem)
	require.Equal(t, "sess-9-1", in.ID)
	require.Equal(t, "graph complete", in.Source)
	require.Equal(t, loop.Claim{Node: "requirements-definition", Status: loop.ClaimPassed, To: "requirements-approval", Outcome: "pass"}, in.Claim())
	for _, k := range []string{"labels", "body"} {
		require.NotContains(t, in.Params, k, "the outbox carries no label and no comment")
	}
}

// Run by hand outside loopd, the same claim reaches GitHub itself, with
// the developer's credentials, and its reply has no ticketEffects.
func TestGraphCompleteByHandCallsGitHub(t *testing.T) {
	f, tio, sim, state, built := claimWorld(t, false)
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "force", "issue-42", "--to", "requirements-definition", "--reason", "agreed offline"}, f), tio.err.String())
	tio.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "complete", "issue-42"}, f), tio.err.String())
	require.NotContains(t, tio.out.String(), "ticketEffects")
	require.True(t, *built)
	is, err := sim.Issue("acme/widgets", 42)
	require.NoError(t, err)
	require.Equal(t, []string{"loop:requirements-definition"}, is.Labels)
	cs, err := sim.Comments("acme/widgets", 42)
	require.NoError(t, err)
	require.Len(t, cs, 2, "the force's audit comment and the review request")
	require.NoDirExists(t, filepath.Join(state, "outbox"))
}

// loopctl ask in a loopd session records the question for loopd to post.
func TestAskInALoopdSessionWritesAnIntent(t *testing.T) {
	f, tio, sim, state, built := claimWorld(t, true)
	require.Equal(t, exitOK, Main([]string{"loopctl", "ask", "--work-item", "github:acme/widgets#42", "--question", "Which storage backend?"}, f), tio.err.String())
	require.Contains(t, tio.out.String(), "loopd posts it")
	require.Contains(t, tio.out.String(), "intent sess-9-1")
	require.False(t, *built)
	require.Empty(t, sim.Requests())
	intents := readIntents(t, state)
	require.Len(t, intents, 1)
	require.Equal(t, "ask", intents[0].Source)
	require.Equal(t, loop.IntentAsk, intents[0].Op)
	require.Equal(t, "Which storage backend?", intents[0].Question())
}

// A session that says it is loopd's but lacks the state root fails closed.
func TestAManagedSessionWithoutStateRootFails(t *testing.T) {
	f, tio, sim, _, _ := claimWorld(t, false)
	f.Getenv = func(k string) string {
		return map[string]string{"THE_LOOP_SESSION_ID": "sess-9", "THE_LOOP_WORK_ITEM": "issue-42"}[k]
	}
	require.Equal(t, exitFailed, Main([]string{"loopctl", "ask", "--work-item", "github:acme/widgets#42", "--question", "?"}, f))
	require.Contains(t, tio.err.String(), "THE_LOOP_STATE_ROOT is not")
	require.Empty(t, sim.Requests())
}
