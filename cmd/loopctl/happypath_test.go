package main

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
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/loop"
	demoagent "github.com/theloop-dev/theloop/loop/demo/agent"
)

// runtimeClaimer is demoagent's Claimer over one in-process runtime: the
// call `loopctl graph complete` makes, without the CLI config.
type runtimeClaimer struct{ rt *graph.Runtime }

func (c runtimeClaimer) Current(ctx context.Context, id string) (demoagent.Position, error) {
	rep, err := c.rt.Status(ctx, id, false)
	if err != nil {
		return demoagent.Position{}, err
	}
	pos := demoagent.Position{Node: rep.CurrentNode}
	if n, ok := c.rt.Graph().Node(rep.CurrentNode); ok {
		pos.Human, pos.Terminal = n.IsHuman(), n.Terminal
	}
	return pos, nil
}

func (c runtimeClaimer) Complete(ctx context.Context, id string) (*graph.Claim, error) {
	return c.rt.Complete(ctx, id, "", "cli")
}

// TestTrustedHappyPath is issue 20 part E (docs/decisions.md §21): a work
// item walked by the shipped pdlc-work-item-loop, the agent doing each node
// as the plugin's commands say (the scripted agent's turns, drafts the gates
// refuse included), every gate decided by an authorized comment and signed
// as the daemon signs it, reaches complete — and the README's CI line with
// the daemon's key as trust anchor passes. Before the fix, verification had
// the agent tick testing-plan.md after design-approval had locked it, and
// the trusted check put the item back at design-approval, blocked.
func TestTrustedHappyPath(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ctx := context.Background()
	repo := t.TempDir()
	require.NoError(t, demoagent.InitRepo(ctx, repo, "demo", "widgets", "dana"))
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	signer := loop.NewSigner(priv)
	tickets := graphtest.NewTickets()
	const id, ref = "issue-1", "github:demo/widgets#1"
	// The daemon's side: it signs what it decides and trusts only that.
	rt, err := loop.Open(repo, loop.Options{WorkItem: id, Integrations: tickets, AuthorizedUsers: []string{"dana"},
		DecisionSigner: signer, DecisionVerifier: signer.Verifier()})
	require.NoError(t, err)
	_, err = rt.Start(ctx, id)
	require.NoError(t, err)

	var out bytes.Buffer
	agent := &demoagent.Agent{Dir: repo, SpecDir: "docs/specs", WorkItem: id, Claimer: runtimeClaimer{rt}, Out: &out}
	human := func(n int, body string) {
		t.Helper()
		c := tickets.Comment(ref, "dana", body)
		rep, err := rt.Advance(ctx, id, &graph.Event{ID: fmt.Sprint("d", n), Kind: "issue_comment", Comments: []graph.Comment{c}})
		require.NoError(t, err)
		require.True(t, rep.Moved, "%q moved nothing: %+v\n%s", body, rep, out.String())
	}
	human(0, "the-loop execute\n\n- [ ] brainstorming\n- [ ] capability-docs")
	locked := map[string][]byte{} // gated artifact → its bytes when its gate decided
	for i, gate := range []string{"requirements-approval", "design-approval", "human-approval"} {
		require.NoError(t, agent.Wake(ctx))
		cur, err := rt.Status(ctx, id, false)
		require.NoError(t, err)
		require.Equal(t, gate, cur.CurrentNode, out.String())
		human(i+1, "Approved")
		for _, name := range []string{"requirements.md", "design.md", "testing-plan.md"} {
			if b, err := os.ReadFile(filepath.Join(repo, "docs/specs", id, name)); err == nil && locked[name] == nil && strings.Contains(string(b), "status: approved") {
				locked[name] = b
			}
		}
	}
	require.Len(t, locked, 3, "each spec artifact was locked at its gate")
	cur, err := rt.Status(ctx, id, false)
	require.NoError(t, err)
	require.Equal(t, "complete", cur.CurrentNode, out.String())

	// No node after a gate asked the agent to edit what the gate locked.
	for name, b := range locked {
		now, err := os.ReadFile(filepath.Join(repo, "docs/specs", id, name))
		require.NoError(t, err)
		require.Equal(t, string(b), string(now), "%s changed after its gate locked it", name)
	}
	logText, err := os.ReadFile(filepath.Join(repo, "docs/specs", id, "execution-log.md"))
	require.NoError(t, err)
	require.Contains(t, string(logText), "## Verification results", "verification recorded its results in the execution log")

	// The CI line of the README, with the daemon's key as trust anchor —
	// by flag, by environment — and the Stop hook agree: complete, nothing
	// blocks.
	key := signer.PublicKey()
	for _, anchor := range []struct {
		env  []string
		args []string
	}{{nil, []string{"--trust-key", key}}, {[]string{loop.TrustKeysEnv + "=" + key}, nil}} {
		rep, r := ciCheck(t, repo, id, anchor.env, anchor.args...)
		require.Equal(t, 0, r.code, "stdout %s\nstderr %s", r.stdout, r.stderr)
		require.Equal(t, "complete", rep.CurrentNode, r.stdout)
		for _, n := range rep.Nodes {
			require.NotEqual(t, graph.StatusBlock, n.Status, "%s: %v", n.Node, n.Messages)
		}
		require.NotContains(t, r.stderr, unverifiedWarningFragment)
	}
	g := stopHook(t, repo, id, []string{loop.TrustKeysEnv + "=" + key})
	require.Equal(t, 0, g.code, g.stderr)
	require.NotContains(t, g.stdout, `"decision":"block"`)
}
