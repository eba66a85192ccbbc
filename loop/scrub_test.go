package loop_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/loop"
)

// A scrubbing store writes a state holding no credential byte for byte as
// an unscrubbing one does, and a state that holds one cleaned, still
// readable.
func TestStoreScrub(t *testing.T) {
	ctx := context.Background()
	scrub := loop.CredentialScrub(func(k string) (string, bool) {
		if k == "GH_TOKEN" {
			return "tok-0123456789-secret", true
		}
		return "", false
	})
	plain, clean := t.TempDir(), t.TempDir()
	st := &graph.State{WorkItem: "issue-1", CurrentNode: "design", Forced: []graph.ForceRecord{{To: "design", Reason: "agreed — on the call"}}}
	require.NoError(t, loop.NewStore(plain, "").Save(ctx, "issue-1", st))
	require.NoError(t, loop.NewStore(clean, "", loop.WithStoreScrub(scrub)).Save(ctx, "issue-1", st))
	a, err := os.ReadFile(plain + "/docs/specs/issue-1/graph-state.json")
	require.NoError(t, err)
	b, err := os.ReadFile(clean + "/docs/specs/issue-1/graph-state.json")
	require.NoError(t, err)
	require.Equal(t, string(a), string(b))

	st.Forced[0].Reason = "token tok-0123456789-secret, and xoxb-1234567890-abcdefghij"
	require.NoError(t, loop.NewStore(clean, "", loop.WithStoreScrub(scrub)).Save(ctx, "issue-1", st))
	got, err := loop.NewStore(clean, "").Load(ctx, "issue-1")
	require.NoError(t, err)
	require.Equal(t, "token [redacted], and [redacted]", got.Forced[0].Reason)
	require.Equal(t, "design", got.CurrentNode)
}

// Every writer of the running log from a person's or a program's text is
// scrubbed: a forced move's reason and a skip's reason (execution-log.md,
// graph-state.json and the ticket comment), an approval comment the gate
// records in the artifact, and a critic's review — for a known secret of this shell and a
// token-shaped one alike.
func TestLogWritersAreScrubbed(t *testing.T) {
	const known = "tok-0123456789-secret"
	shaped := "ghp_" + strings.Repeat("Z", 36)
	scrub := loop.CredentialScrub(func(k string) (string, bool) { return known, k == "GH_TOKEN" })
	repo := t.TempDir()
	writeFile(t, repo, ".the-loop/harness-config.yaml", harnessConfig)
	writeFile(t, repo, "docs/specs/issue-42/execution-log.md", "# Execution log\n")
	tickets := graphtest.NewTickets()
	ref := "github:acme/widgets#42"
	rt, err := loop.Open(repo, loop.Options{Integrations: tickets, AuthorizedUsers: []string{"dana"}, Scrub: scrub,
		Clock: graphtest.NewClock(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC))})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "issue-42")
	require.NoError(t, err)
	_, err = rt.Force(ctx, "issue-42", graph.ForceRequest{To: "requirements-definition", Reason: "pasted by mistake: " + shaped + " and " + known, Actor: "dana"})
	require.NoError(t, err)
	_, err = rt.DeclareSkips(ctx, "issue-42", []string{"design"}, "token "+shaped, "dana")
	require.NoError(t, err)
	writeFile(t, repo, "docs/specs/issue-42/requirements.md", "# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nA trust boundary: input.\n")
	_, err = rt.Complete(ctx, "issue-42", "", "agent")
	require.NoError(t, err)
	_, err = rt.Advance(ctx, "issue-42", &graph.Event{ID: "d1", Comments: []graph.Comment{tickets.Comment(ref, "dana", "Approved, but rotate "+known+" soon")}})
	require.NoError(t, err)
	spec := filepath.Join(repo, "docs", "specs", "issue-42")
	_, err = loop.RecordCriticReview(loop.NewFileArtifacts(spec, "docs/specs/issue-42").Scrubbed(scrub), "Review cycles", loop.Critic{Name: "second", Harness: "claude"}, time.Now(), "the env held "+shaped)
	require.NoError(t, err)

	log, err := os.ReadFile(filepath.Join(spec, "execution-log.md"))
	require.NoError(t, err)
	st, err := os.ReadFile(filepath.Join(spec, "graph-state.json"))
	require.NoError(t, err)
	var ours []string // the comments theloop posted (dana's own is hers)
	for _, c := range tickets.Comments(ref) {
		if strings.Contains(c, "the-loop:agent-comment") {
			ours = append(ours, c)
		}
	}
	for what, text := range map[string]string{"execution-log.md": string(log), "graph-state.json": string(st), "the ticket": strings.Join(ours, "\n")} {
		require.NotContains(t, text, shaped, what)
		require.NotContains(t, text, known, what)
	}
	req, err := os.ReadFile(filepath.Join(spec, "requirements.md"))
	require.NoError(t, err)
	require.Contains(t, string(req), "rotate [redacted] soon", "the reviewer's comment, recorded in the artifact")
	require.NotContains(t, string(req), known)
	for _, want := range []string{"**Reason:** pasted by mistake: [redacted] and [redacted]", "- **Reason:** token [redacted]", "the env held [redacted]"} {
		require.Contains(t, string(log), want)
	}
	require.Contains(t, strings.Join(tickets.Comments(ref), "\n"), "**Reason:** pasted by mistake: [redacted] and [redacted]")
}
