package loop_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/loop"
)

func shippedHook(t *testing.T, name string) graph.HookSpec {
	t.Helper()
	for _, s := range hooks.Specs() {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no shipped hook %s", name)
	return graph.HookSpec{}
}

// TestOversizedExecutionLogBlocks: the agent writes execution-log.md; one
// grown past loop.MaxArtifactBytes (a sparse 1 GB file here) is refused
// unread, and the hooks that read it block with a finding that names the
// file, its size and the cap — never a pass, never a gigabyte in memory.
func TestOversizedExecutionLogBlocks(t *testing.T) {
	const size = 1 << 30
	cases := []struct {
		hook   string
		params graph.Values
	}{
		{"validate-artifacts", graph.Values{"validates": "execution-log.md", "sections": []any{"Review cycles"}}},
		{"await-inner-loops", nil},
	}
	for _, tc := range cases {
		t.Run(tc.hook, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, hooks.ExecutionLog)
			require.NoError(t, os.WriteFile(log, []byte("# Execution log\n\n## Review cycles\n"), 0o644))
			require.NoError(t, os.Truncate(log, size))
			hc := &graph.HookContext{
				WorkItem:  graph.WorkItem{ID: "issue-1", SpecDir: "docs/specs/issue-1"},
				Node:      &graph.Node{ID: "self-review"},
				Mode:      graph.ModeCheck,
				Artifacts: loop.NewFileArtifacts(dir, "docs/specs/issue-1"),
				Params:    tc.params,
			}
			res := shippedHook(t, tc.hook).Run(context.Background(), hc)
			require.Equal(t, graph.StatusBlock, res.Status, "%+v", res)
			require.NotEmpty(t, res.Messages)
			msg := res.Messages[0]
			assert.Equal(t, "docs/specs/issue-1/execution-log.md", msg.Path, "the finding names the file")
			assert.Contains(t, msg.Text, fmt.Sprintf("%d bytes, more than the %d bytes an artifact may have", size, loop.MaxArtifactBytes))
		})
	}
}
