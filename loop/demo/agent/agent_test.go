package agent_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop"
	demoagent "github.com/theloop-dev/theloop/loop/demo/agent"
)

const (
	simToken = "sim-token"
	tokenEnv = "DEMOAGENT_TEST_GH_TOKEN"
)

// world is a demo repository whose tickets live on a githubsim, with a
// "daemon side" runtime that starts the work item and applies a human's
// comments, and a CLI config for the agent's claims.
type world struct {
	dir, config string
	sim         *githubsim.Server
	daemon      *graph.Runtime
}

func requireTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed; this test needs the real %s", name, name)
	}
}

func env(k string) (string, bool) {
	if k == tokenEnv {
		return simToken, true
	}
	return "", false
}

func newWorld(t *testing.T) *world {
	t.Helper()
	requireTool(t, "git")
	ctx := context.Background()
	w := &world{dir: t.TempDir()}
	require.NoError(t, demoagent.InitRepo(ctx, w.dir, "demo", "widgets", "dana"))
	sim, err := githubsim.Start(githubsim.Config{Token: simToken})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	w.sim = sim
	_, err = sim.OpenIssue("demo/widgets", "dana", "Export the weekly report as CSV", "Operators need CSV.")
	require.NoError(t, err)
	w.config = filepath.Join(t.TempDir(), "cli-config.yaml")
	require.NoError(t, os.WriteFile(w.config, []byte(fmt.Sprintf(`routing:
  authorizedUsers: [dana]
eventLog: {enabled: false}
integrations:
  github:
    transport: api
    api: {baseUrl: %q, tokenEnv: [%s]}
`, sim.URL(), tokenEnv)), 0o600))
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{Transport: "api",
		API: integrations.GitHubAPIConfig{BaseURL: sim.URL(), TokenEnv: []string{tokenEnv}}}}, integrations.Deps{Env: env})
	require.NoError(t, err)
	// The daemon's side signs each gate decision and trusts only its own
	// key, as loopd does: its recompute is the trusted check.
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	signer := loop.NewSigner(priv)
	w.daemon, err = loop.Open(w.dir, loop.Options{WorkItem: "issue-1", Integrations: set, AuthorizedUsers: []string{"dana"},
		DecisionSigner: signer, DecisionVerifier: signer.Verifier()})
	require.NoError(t, err)
	_, err = w.daemon.Start(ctx, "issue-1")
	require.NoError(t, err)
	return w
}

// human comments on the ticket and the daemon side hands the comment to
// the gate, as the daemon does with an authorized comment webhook.
func (w *world) human(t *testing.T, body string) *graph.StepReport {
	t.Helper()
	c, err := w.sim.Comment("demo/widgets", 1, "dana", body)
	require.NoError(t, err)
	rep, err := w.daemon.Advance(context.Background(), "issue-1", &graph.Event{ID: fmt.Sprint("test-", c.ID), Kind: "issue_comment",
		Comments: []graph.Comment{{ID: fmt.Sprint(c.ID), Author: "dana", Body: body}}})
	require.NoError(t, err)
	return rep
}

func (w *world) current(t *testing.T) string {
	t.Helper()
	rep, err := w.daemon.Status(context.Background(), "issue-1", false)
	require.NoError(t, err)
	return rep.CurrentNode
}

// TestAgentWalksTheLoopWithTheRealRuntime runs the scripted agent's Wake
// against the real runtime (the claims loopctl makes), a real git checkout
// and the GitHub stand-in, through the whole of pdlc-work-item-loop.
func TestAgentWalksTheLoopWithTheRealRuntime(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	require.Equal(t, "phase-selection", w.current(t))

	var out bytes.Buffer
	live := &demoagent.Live{Dir: w.dir, ConfigPath: w.config, LookupEnv: env, Warn: &out}
	agent := &demoagent.Agent{Dir: w.dir, SpecDir: "docs/specs", WorkItem: "issue-1", Claimer: live, Out: &out}

	// At a human gate the agent does nothing.
	require.NoError(t, agent.Wake(ctx))
	require.Contains(t, out.String(), "waits at phase-selection, a human gate")
	require.Equal(t, "phase-selection", w.current(t))

	w.human(t, "the-loop execute\n\n- [ ] brainstorming\n- [ ] capability-docs")
	require.Equal(t, "requirements-definition", w.current(t))

	// The first requirements turn is blocked (no security section), the
	// second passes, and the agent stops at the approval gate.
	out.Reset()
	require.NoError(t, agent.Wake(ctx))
	require.Equal(t, "requirements-approval", w.current(t), out.String())
	require.Contains(t, out.String(), "requirements-definition: block")
	require.Contains(t, out.String(), "Security considerations")
	require.Contains(t, out.String(), "waits at requirements-approval")

	rep := w.human(t, "Approved")
	require.True(t, rep.Moved, "%+v", rep)
	req, err := os.ReadFile(filepath.Join(w.dir, "docs", "specs", "issue-1", "requirements.md"))
	require.NoError(t, err)
	require.Contains(t, string(req), "status: approved", "the gate wrote the lock")

	out.Reset()
	require.NoError(t, agent.Wake(ctx))
	require.Equal(t, "design-approval", w.current(t), out.String())
	t.Logf("the agent from requirements-approval to design-approval:\n%s", out.String())
	req2, err := os.ReadFile(filepath.Join(w.dir, "docs", "specs", "issue-1", "requirements.md"))
	require.NoError(t, err)
	require.Equal(t, string(req), string(req2), "the agent left the locked requirements alone")

	w.human(t, "LGTM")
	lockedPlan, err := os.ReadFile(filepath.Join(w.dir, "docs", "specs", "issue-1", "testing-plan.md"))
	require.NoError(t, err)
	out.Reset()
	require.NoError(t, agent.Wake(ctx))
	require.Equal(t, "human-approval", w.current(t), out.String())

	w.human(t, "Approved — ship it")
	require.Equal(t, "complete", w.current(t))
	out.Reset()
	require.NoError(t, agent.Wake(ctx))
	require.Contains(t, out.String(), "is complete")

	rep2, err := w.daemon.Status(ctx, "issue-1", true)
	require.NoError(t, err)
	require.True(t, rep2.OK, "check --recompute with the daemon's key as trust anchor agrees the walk is complete: %+v", rep2)
	// docs/decisions.md §21: the testing plan is exactly what design-approval locked
	// (its lock and the recorded review included); verification recorded
	// its results in the execution log.
	plan, err := os.ReadFile(filepath.Join(w.dir, "docs", "specs", "issue-1", "testing-plan.md"))
	require.NoError(t, err)
	require.Equal(t, string(lockedPlan), string(plan), "the agent left the locked testing plan alone")
	require.Contains(t, string(plan), "status: approved")
	require.Contains(t, string(plan), "## Review comments\n\n### ")
	require.Contains(t, string(plan), "**@dana** wrote:\n\nLGTM")
	logText, err := os.ReadFile(filepath.Join(w.dir, "docs", "specs", "issue-1", "execution-log.md"))
	require.NoError(t, err)
	require.Contains(t, string(logText), "## Verification results\n\n- [x] M1 ")

	// The agent's claims reached the ticket through the configured
	// integration: the phase label is the last node's.
	is, err := w.sim.Issue("demo/widgets", 1)
	require.NoError(t, err)
	require.Contains(t, is.Labels, "loop:complete")
	var fromAgent int
	for _, r := range w.sim.Requests() {
		if r.Method == "POST" && strings.HasSuffix(r.Path, "/labels") {
			fromAgent++
		}
	}
	require.Greater(t, fromAgent, 3)

	// Every turn was committed.
	log, err := exec.Command("git", "-C", w.dir, "log", "--oneline").Output()
	require.NoError(t, err)
	require.Contains(t, string(log), "docs(issue-1): writes requirements.md")
	require.Contains(t, string(log), "docs(issue-1): reviewer briefing recorded")
}

func TestAgentGivesUpAfterItsTurns(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	w.human(t, "the-loop execute\n\n- [ ] brainstorming\n- [ ] capability-docs")
	var out bytes.Buffer
	script := demoagent.Script()
	script["requirements-definition"] = script["requirements-definition"][:1] // only the draft
	agent := &demoagent.Agent{Dir: w.dir, SpecDir: "docs/specs", WorkItem: "issue-1",
		Claimer: &demoagent.Live{Dir: w.dir, ConfigPath: w.config, LookupEnv: env}, Out: &out, Script: script}
	require.NoError(t, agent.Wake(ctx))
	require.Contains(t, out.String(), "tried everything I know at requirements-definition")
	require.Equal(t, "requirements-definition", w.current(t))
}

func TestLiveRefusesWithoutAConfig(t *testing.T) {
	_, err := (&demoagent.Live{Dir: t.TempDir()}).Current(context.Background(), "issue-1")
	require.ErrorContains(t, err, "--config")
}
