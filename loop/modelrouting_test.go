package loop_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

func TestModelRouting(t *testing.T) {
	h, _, err := loop.ParseHarnessConfig("h.yaml", []byte("version: \"0.2.0\"\n"))
	require.NoError(t, err)
	h.Raw = map[string]any{"tokenEconomy": map[string]any{"modelRouting": map[string]any{
		"tiers":         map[string]any{"economy": map[string]any{"model": "haiku"}, "frontier": map[string]any{"claude": "opus", "codex": "--yolo", "vim": "x"}, "huge": map[string]any{}},
		"stages":        map[string]any{"design": "frontier", "evidence": "economy", "tasks": "cheap"},
		"riskTierFloor": map[string]any{"4": "frontier", "9": "economy"},
	}}}
	m, warns := loop.ReadModelRouting(h)
	require.True(t, m.Enabled)
	require.ElementsMatch(t, []string{
		`h.yaml: tokenEconomy.modelRouting.tiers: "huge" is not a tier; use one of economy, standard, frontier`,
		`h.yaml: tokenEconomy.modelRouting.tiers.frontier.codex "--yolo" is not a model name`,
		`h.yaml: tokenEconomy.modelRouting.tiers.frontier.vim: name a harness (claude, codex, cursor, gemini) or model (every harness)`,
		`h.yaml: tokenEconomy.modelRouting.stages.tasks: "cheap" is not a tier; use one of economy, standard, frontier`,
		`h.yaml: tokenEconomy.modelRouting.riskTierFloor.9: a risk tier is 1 to 5`,
	}, warns)
	for _, tc := range []struct {
		stage, harness string
		risk           int
		model, tier    string
		why            string
	}{
		{"design", "claude", 3, "opus", "frontier", ""},
		{"evidence", "codex", 3, "haiku", "economy", ""},
		{"evidence", "claude", 4, "opus", "frontier", ""}, // the floor raises
		{"design", "codex", 3, "", "frontier", "tier frontier names no model for codex"},
		{"tasks", "claude", 3, "", "", "names no tier for stage tasks"},
	} {
		model, tier, why := m.Model(tc.stage, tc.harness, tc.risk)
		require.Equal(t, tc.model, model, "%+v", tc)
		require.Equal(t, tc.tier, tier, "%+v", tc)
		if tc.why != "" {
			require.Contains(t, why, tc.why)
		}
	}
	off := h
	off.Raw = map[string]any{"tokenEconomy": map[string]any{"enabled": false, "modelRouting": map[string]any{"stages": map[string]any{"design": "frontier"}}}}
	m, _ = loop.ReadModelRouting(off)
	model, _, why := m.Model("design", "claude", 3)
	require.Empty(t, model)
	require.Contains(t, why, "off")

	require.Equal(t, "brainstorm", loop.NodeStage(graph.Node{ID: "brainstorming"}))
	require.Equal(t, "critic-review", loop.NodeStage(graph.Node{ID: "design-critic-review"}))
	require.Equal(t, "verification", loop.NodeStage(graph.Node{ID: "verification"}))
	require.Equal(t, "mine", loop.NodeStage(graph.Node{ID: "x", Stage: "mine"}))
}
