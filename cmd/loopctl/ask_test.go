package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop"
)

func askWorld(t *testing.T) (*Factory, testIO, *githubsim.Server) {
	t.Helper()
	sim, err := githubsim.Start(githubsim.Config{Token: "tok"})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	_, err = sim.OpenIssue("octo/demo", "dana", "Add a widget", "body")
	require.NoError(t, err)
	f, tio := testFactory(t, t.TempDir(), nil)
	f.Integrations = func(_ *loop.CLIConfig, sink graph.Sink) (graph.Integrations, []string, error) {
		set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
			Transport: integrations.TransportAPI, MaxAttempts: 1, TimeoutSeconds: 5,
			API: integrations.GitHubAPIConfig{BaseURL: sim.URL()},
		}}, integrations.Deps{Env: func(k string) (string, bool) { return "tok", k == "GH_TOKEN" }, Sink: sink})
		return set, nil, err
	}
	return f, tio, sim
}

func eventLogOf(t *testing.T, f *Factory) string {
	cfg, err := f.cliConfig("")
	require.NoError(t, err)
	return cfg.EventLogPath
}

func TestAskPostsAMarkedQuestionAndRecordsAwaitingInput(t *testing.T) {
	f, tio, sim := askWorld(t)
	code := Main([]string{"loopctl", "ask", "--work-item", "github:octo/demo#1", "--question", "Which storage backend?"}, f)
	require.Equal(t, exitOK, code, tio.err.String())
	require.Contains(t, tio.out.String(), "end your turn")
	cs, err := sim.Comments("octo/demo", 1)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.True(t, strings.HasPrefix(cs[0].Body, "Which storage backend?"))
	require.Contains(t, cs[0].Body, "<!-- the-loop:agent-comment -->")
	evs, err := loop.ReadEvents(eventLogOf(t, f), loop.EventQuery{Event: "session.awaiting_input"})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	posted, _ := evs[0].Get("comment_posted")
	require.Equal(t, true, posted)
}

func TestAskReadsTheQuestionFromStdin(t *testing.T) {
	f, tio, sim := askWorld(t)
	f.IO.In = strings.NewReader("  Should the API be versioned?\n")
	require.Equal(t, exitOK, Main([]string{"loopctl", "ask", "--work-item", "github:octo/demo#1", "--question-file", "-"}, f), tio.err.String())
	cs, err := sim.Comments("octo/demo", 1)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(cs[0].Body, "Should the API be versioned?"))
}

func TestAskRefusesBadInput(t *testing.T) {
	for _, argv := range [][]string{
		{"ask", "--work-item", "issue-1", "--question", "q"},
		{"ask", "--work-item", "jira:octo/demo#1", "--question", "q"},
		{"ask", "--work-item", "github:octo/demo#1", "--question", "   "},
		{"ask", "--work-item", "github:octo/demo#1"},
		{"ask", "--work-item", "github:octo/demo#1", "--question", "q", "--question-file", filepath.Join(t.TempDir(), "x")},
		{"ask", "--question", "q"},
	} {
		f, _, sim := askWorld(t)
		require.Equal(t, exitRefused, Main(append([]string{"loopctl"}, argv...), f), "%v", argv)
		cs, _ := sim.Comments("octo/demo", 1)
		require.Empty(t, cs, "%v posted nothing", argv)
	}
}

func TestAskFailsWhenGitHubDoesNotTakeTheComment(t *testing.T) {
	f, tio, sim := askWorld(t)
	sim.InjectFault(githubsim.Fault{Status: 502})
	code := Main([]string{"loopctl", "ask", "--work-item", "github:octo/demo#1", "--question", "Which backend?"}, f)
	require.Equal(t, exitFailed, code)
	require.Contains(t, tio.err.String(), "not posted")
	evs, err := loop.ReadEvents(eventLogOf(t, f), loop.EventQuery{Event: "session.awaiting_input"})
	require.NoError(t, err)
	require.Len(t, evs, 1)
	posted, _ := evs[0].Get("comment_posted")
	require.Equal(t, false, posted)
}
