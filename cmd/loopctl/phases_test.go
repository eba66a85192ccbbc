package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// R9.3: check and graph verify warn where workflow.phases differs from the
// graph, naming the differing phases; check's JSON keeps its shape.
func TestCheckAndVerifyWarnOfDivergingPhases(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(repo, ".git"), 0o755))
	write(t, repo, ".the-loop/harness-config.yaml", "workflow:\n  phases: [not-started, phase-selection, brainstorming, requirements-definition, design, test-planning, tasks-breakdown, implementation, verification, needs-review, complete, cleanup]\n")
	write(t, repo, "docs/specs/issue-1/requirements.md", "# R\n")
	const want = "workflow.phases differs from the phases of graph pdlc-work-item-loop, which is authoritative (the list is derived from it): listed but declared by no node: cleanup"

	f, io := testFactory(t, repo, nil)
	code := Main([]string{"loopctl", "check", "issue-1", "--recompute", "--format", "json"}, f)
	require.Contains(t, []int{exitOK, exitFailed}, code, io.err.String())
	require.Contains(t, io.err.String(), "warning: .the-loop/harness-config.yaml: "+want)
	var rep map[string]any
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &rep), io.out.String())
	require.Equal(t, "issue-1", rep["workItem"])

	f, io = testFactory(t, repo, nil)
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "verify", "--format", "json"}, f), io.err.String())
	var vs []verifiedGraph
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &vs))
	for _, v := range vs {
		if v.Graph == "pdlc-work-item-loop" {
			require.Len(t, v.Warnings, 1)
			require.Contains(t, v.Warnings[0], want)
			continue
		}
		require.Empty(t, v.Warnings, "%s declares a subset of the phases on purpose", v.Graph)
	}

	// A list that matches the graph says nothing.
	write(t, repo, ".the-loop/harness-config.yaml", "workflow:\n  phases: [not-started, phase-selection, brainstorming, requirements-definition, design, test-planning, tasks-breakdown, implementation, verification, needs-review, complete]\n")
	f, io = testFactory(t, repo, nil)
	Main([]string{"loopctl", "check", "issue-1", "--recompute"}, f)
	require.NotContains(t, io.err.String(), "workflow.phases")
}
