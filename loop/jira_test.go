package loop_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/jirasim"
	"github.com/theloop-dev/theloop/loop"
)

const (
	jiraTestEmail = "loop@example.com"
	jiraTestToken = "jira-token-for-the-loop-test-0001"
)

func jiraSet(t *testing.T, baseURL string) *integrations.Set {
	t.Helper()
	env := map[string]string{integrations.DefaultJiraEmailEnv: jiraTestEmail, integrations.DefaultJiraTokenEnv: jiraTestToken}
	set, err := integrations.New(integrations.Config{Jira: &integrations.JiraConfig{API: integrations.JiraAPIConfig{BaseURL: baseURL}}},
		integrations.Deps{Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	require.NoError(t, err)
	return set
}

// A work item whose ticket is a Jira issue (its id an issue key of the
// repository's ticketing.jira.project) gets the ticket effects a GitHub
// issue gets — the phase label (other labels kept), the phase checklist
// comment posted once, the audit comment of a force — through the Jira
// provider, plus the workflow transition the repository maps to the phase.
func TestJiraWorkItemGetsTicketEffects(t *testing.T) {
	jira := jirasim.Start(jirasim.Config{Email: jiraTestEmail, Token: jiraTestToken})
	defer jira.Close()
	jira.AddIssue("LOOP-7", "customer")

	repo := t.TempDir()
	writeFile(t, repo, ".the-loop/harness-config.yaml", `version: "0.2.0"
ticketing:
  jira:
    project: LOOP
    transitions:
      phase-selection: Start Progress
      implementation: In Review
`)
	writeFile(t, repo, "docs/specs/LOOP-7/execution-log.md", "# Execution log\n")
	rt, err := loop.Open(repo, loop.Options{WorkItem: "LOOP-7", Integrations: jiraSet(t, jira.URL())})
	require.NoError(t, err)
	ctx := context.Background()

	rep, err := rt.Start(ctx, "LOOP-7")
	require.NoError(t, err)
	require.Equal(t, "phase-selection", rep.CurrentNode)
	is, _ := jira.Issue("LOOP-7")
	require.Equal(t, []string{"customer", "loop:phase-selection"}, is.Labels)
	require.Equal(t, "In Progress", is.Status, "the mapped transition ran")
	require.Len(t, is.Comments, 1)
	require.True(t, hooks.SelfAuthored(is.Comments[0].Body), "theloop's comments carry its marker")
	require.Contains(t, is.Comments[0].Body, "phase")

	// Entering again posts no second checklist: the Jira comments are read.
	_, err = rt.Force(ctx, "LOOP-7", forceTo("phase-selection"))
	require.NoError(t, err)
	is, _ = jira.Issue("LOOP-7")
	require.Len(t, is.Comments, 2, "the force's audit comment, and no second checklist")
	require.Contains(t, is.Comments[1].Body, "forced transition")

	_, err = rt.Force(ctx, "LOOP-7", forceTo("implementation"))
	require.NoError(t, err)
	is, _ = jira.Issue("LOOP-7")
	require.Equal(t, []string{"customer", "loop:implementation"}, is.Labels, "the phase label moved; other labels kept")
	require.Equal(t, "In Review", is.Status)
	for _, r := range jira.Requests() {
		require.NotContains(t, r.Path, "/repos/", "nothing went to GitHub's API shape")
	}
}

// A Jira that refuses the credentials: the work item's effects are
// reported as failed side effects naming the variables to check — the
// walk goes on, and nothing is sent to GitHub instead.
func TestJiraWorkItemWithRefusedCredentialsNamesTheFix(t *testing.T) {
	jira := jirasim.Start(jirasim.Config{Email: jiraTestEmail, Token: "another-token"})
	defer jira.Close()
	jira.AddIssue("LOOP-7")
	repo := t.TempDir()
	writeFile(t, repo, ".the-loop/harness-config.yaml", "version: \"0.2.0\"\nticketing:\n  jira:\n    project: LOOP\n")
	rt, err := loop.Open(repo, loop.Options{WorkItem: "LOOP-7", Integrations: jiraSet(t, jira.URL())})
	require.NoError(t, err)
	rep, err := rt.Start(context.Background(), "LOOP-7")
	require.NoError(t, err)
	msgs := strings.Join(rep.Messages, "\n")
	require.Contains(t, msgs, "warning: set-phase-label did not complete")
	require.Contains(t, msgs, "Jira rejected the credentials")
	require.Contains(t, msgs, integrations.DefaultJiraTokenEnv)
	require.NotContains(t, msgs, jiraTestToken)
}

func TestJiraProjectKeyIsChecked(t *testing.T) {
	h, warns, err := loop.ParseHarnessConfig("harness-config.yaml", []byte("ticketing:\n  jira:\n    project: loop\n    transitions: {design: 5}\n"))
	require.NoError(t, err)
	require.Empty(t, h.JiraProject)
	require.Len(t, warns, 2, "%q", warns)
	require.Contains(t, warns[0], "ticketing.jira.project: \"loop\" is not a Jira project key")
	require.Contains(t, warns[1], "ticketing.jira.transitions.design: expected a transition id, name or target status")
	require.Equal(t, "", loop.JiraWorkItemRef("LOOP-7", ""))
	require.Equal(t, "jira:LOOP-7", loop.JiraWorkItemRef("LOOP-7", "LOOP"))
	require.Equal(t, "", loop.JiraWorkItemRef("LOOP-07", "LOOP"))
	require.Equal(t, "", loop.JiraWorkItemRef("OTHER-7", "LOOP"))
}

func forceTo(node string) graph.ForceRequest {
	return graph.ForceRequest{To: node, Reason: "test setup", Actor: "test"}
}
