package integrations

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/ops"
)

// runEntry runs a shipped node's entry chain the way the runtime does, with
// set as the hooks' Integrations.
func runEntry(t *testing.T, g *graph.Graph, nodeID string, set graph.Integrations, arts *graphtest.Artifacts) graph.ChainOutcome {
	t.Helper()
	n, ok := g.Node(nodeID)
	require.True(t, ok, nodeID)
	hc := &graph.HookContext{
		WorkItem:     graph.WorkItem{ID: "issue-7", Ref: "github:octo/repo#7", SpecDir: "docs/specs/issue-7"},
		Node:         n,
		Boundary:     graph.Entry,
		Mode:         graph.ModeLive,
		Artifacts:    arts,
		Config:       graph.Values{"authorizedUsers": []any{"dana"}},
		Integrations: set,
		Graph:        g,
		Now:          time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
	}
	return graph.RunChain(context.Background(), n.Entry, hc)
}

// TestShippedHooksGiveTheSameVerdictOnBothTransports is R6.10 at the hook
// level: the shipped graph's entry chains (set-phase-label, post-phase-
// selection — which reads comments to post only once — request-review,
// notify) return the same HookResults over the api and the cli transport,
// in a healthy GitHub and in an outage.
func TestShippedHooksGiveTheSameVerdictOnBothTransports(t *testing.T) {
	g, err := loop.ShippedGraph("pdlc-work-item-loop")
	require.NoError(t, err)
	apiGH, cliGH := fixtureServer(t, ""), fixtureServer(t, "")
	installFakeGh(t, cliGH.URL(), testToken)
	api := apiSet(t, apiGH, newWorld(mapEnv{"GH_TOKEN": testToken}))
	cli := cliSet(t, newWorld(mapEnv{}), GitHubConfig{})

	compare := func(t *testing.T, nodeID string) []graph.HookResult {
		a := runEntry(t, g, nodeID, api, graphtest.NewArtifacts("docs/specs/issue-7"))
		c := runEntry(t, g, nodeID, cli, graphtest.NewArtifacts("docs/specs/issue-7"))
		// Only the transport's name in an error may differ.
		for i := range c.Results {
			c.Results[i].Degraded = strings.ReplaceAll(c.Results[i].Degraded, "(cli transport)", "(api transport)")
		}
		require.Equal(t, a, c, nodeID)
		return a.Results
	}

	first := compare(t, "phase-selection")
	assert.Equal(t, map[string]any{"applied": true, "label": "loop:phase-selection"}, first[0].Data)
	assert.Equal(t, map[string]any{"posted": true}, first[2].Data)
	again := compare(t, "phase-selection")
	assert.Equal(t, map[string]any{"posted": false, "reason": "already asked"}, again[2].Data, "read back through list-comments")
	// The gate's entry chain: set-phase-label (R4.2: a gate carries its
	// producer's phase), request-review, notify.
	gate := compare(t, "design-approval")
	assert.Equal(t, graph.StatusPass, gate[0].Status)
	assert.Equal(t, graph.StatusPass, gate[1].Status)
	assert.Equal(t, graph.StatusSkip, gate[2].Status, "notify skips: Slack is not configured")
	assert.Equal(t, apiGH.labelsOf("octo/repo", 7), cliGH.labelsOf("octo/repo", 7))
	assert.Equal(t, []string{"bug", "the-loop: auto-execute", "loop:test-planning"}, apiGH.labelsOf("octo/repo", 7), "the gate synced its producer's phase label")

	// An outage: every hook still passes, recording the failure.
	for _, fg := range []*fakeGitHub{apiGH, cliGH} {
		fg.fault(fault{path: "/", status: 502})
	}
	outage := compare(t, "design-approval")
	assert.Equal(t, graph.StatusPass, outage[0].Status)
	assert.Contains(t, outage[0].Degraded, "GitHub answered HTTP 502")
}

// TestVerifyShippedGraphs shows what loading the shipped graphs demands of
// the configuration: GitHub always, Slack wherever notify runs.
func TestVerifyShippedGraphs(t *testing.T) {
	githubOnly := newWorld(mapEnv{"GH_TOKEN": "t0ken-value"}).set(t, Config{})
	withSlack := newWorld(mapEnv{"GH_TOKEN": "t0ken-value", DefaultSlackWebhookURLEnv: "https://hooks.slack.com/services/T/B/X"}).
		set(t, Config{Slack: &SlackConfig{}})
	nothing := newWorld(mapEnv{}).set(t, Config{})
	for _, name := range loop.ShippedLoopNames() {
		t.Run(name, func(t *testing.T) {
			g, err := loop.ShippedGraph(name)
			require.NoError(t, err)
			require.NoError(t, withSlack.Verify(g))

			err = githubOnly.Verify(g)
			var ve *VerifyError
			require.ErrorAs(t, err, &ve)
			for _, p := range ve.Problems {
				assert.Equal(t, ops.SlackPostMessage, p.Operation)
				assert.Equal(t, "notify", p.Hook)
				assert.ErrorIs(t, p.Err, ErrProviderNotConfigured)
			}

			err = nothing.Verify(g)
			require.ErrorIs(t, err, ErrProviderUnavailable)
			assert.Contains(t, err.Error(), "gh auth login")
		})
	}
}

func TestDecodeConfigFromTheCLIConfig(t *testing.T) {
	cfg, err := loop.ParseCLIConfig("cli-config.yaml", []byte(`
integrations:
  github:
    transport: cli
    cli: {host: ghe.corp.example}
  slack:
    transport: webhook
    webhook: {urlEnv: LOOP_SLACK_HOOK}
`))
	require.NoError(t, err)
	got, err := DecodeConfig(cfg.Integrations)
	require.NoError(t, err)
	assert.Equal(t, Config{
		GitHub: &GitHubConfig{Transport: "cli", CLI: GitHubCLIConfig{Host: "ghe.corp.example"}},
		Slack:  &SlackConfig{Transport: "webhook", Webhook: SlackWebhookConfig{URLEnv: "LOOP_SLACK_HOOK"}},
	}, got)

	def, err := DecodeConfig(nil)
	require.NoError(t, err)
	assert.Equal(t, DefaultConfig(), def)

	bad := []struct {
		raw  map[string]any
		want string
	}{
		{map[string]any{"github": map[string]any{"token": "ghp_secretvalue123"}}, `unknown key "token"`},
		{map[string]any{"github": map[string]any{"timeoutSeconds": "ten"}}, "integrations.github.timeoutSeconds"},
		{map[string]any{"github": map[string]any{"transport": "sdk"}}, "integrations.github.transport"},
		{map[string]any{"gitlab": map[string]any{}}, `unknown key "gitlab"`},
	}
	for _, tc := range bad {
		_, err := DecodeConfig(tc.raw)
		require.ErrorIs(t, err, ErrInvalidConfig)
		assert.Contains(t, err.Error(), tc.want)
		assert.NotContains(t, err.Error(), "ghp_secretvalue123")
	}
}
