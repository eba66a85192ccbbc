package hooks_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
)

// TestHooksBoundWhatTheyRead: the hooks refuse an artifact over
// hooks.MaxArtifactBytes themselves, whatever graph.Artifacts they are given
// (graphtest's in-memory one has no cap): a block naming the file, its size
// and the cap — never a pass.
func TestHooksBoundWhatTheyRead(t *testing.T) {
	big := "# Execution log\n\n## Review cycles\n" + strings.Repeat("x", hooks.MaxArtifactBytes)
	cases := []struct {
		hook   string
		params graph.Values
	}{
		{"validate-artifacts", graph.Values{"validates": "execution-log.md", "sections": []any{"Review cycles"}}},
		{"await-inner-loops", nil},
	}
	for _, tc := range cases {
		t.Run(tc.hook, func(t *testing.T) {
			a := specFolder(t, "")
			a.Set(hooks.ExecutionLog, big)
			r := run(t, tc.hook, ctxFor(a, &graph.Node{ID: "self-review"}), tc.params)
			require.Equal(t, graph.StatusBlock, r.Status, texts(r))
			require.NotEmpty(t, r.Messages)
			assert.Equal(t, "docs/specs/issue-9/execution-log.md", r.Messages[0].Path)
			assert.Contains(t, r.Messages[0].Text, fmt.Sprintf("%d bytes, more than the %d bytes an artifact may have", len(big), hooks.MaxArtifactBytes))
		})
	}
}

// TestOversizedInnerStateIsUnfinished: an inner loop's graph-state.json
// over hooks.MaxInnerStateBytes is not read, and the loop counts as
// unfinished (fail closed), even if its first bytes say complete.
func TestOversizedInnerStateIsUnfinished(t *testing.T) {
	a := specFolder(t, "")
	a.Set("pr-loops/pr-3/graph-state.json", `{"currentNode": "complete"}`+strings.Repeat(" ", hooks.MaxInnerStateBytes))
	r := run(t, "await-inner-loops", ctxFor(a, &graph.Node{ID: "implementation"}), nil)
	require.Equal(t, graph.StatusWait, r.Status, texts(r))
	require.Contains(t, texts(r)[0], "pr-3")

	a.Set("pr-loops/pr-3/graph-state.json", `{"currentNode": "complete"}`)
	r = run(t, "await-inner-loops", ctxFor(a, &graph.Node{ID: "implementation"}), nil)
	require.Equal(t, graph.StatusPass, r.Status, "the same state under the cap is read")
}
