package sandbox_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
)

// A path under the home as a world's harness sees it lies in that world's
// private copy on the host (where loopd reads a transcript); other paths,
// and every path without a home, are the host's.
func TestHostPathMapsTheWorldsHome(t *testing.T) {
	root := t.TempDir()
	w := &sandbox.Worlds{Root: root, Confiner: &sandbox.Confiner{Home: "/home/agent"}}
	a := w.HostPath("loop-github-o-r-1", "/home/agent/.claude/projects/x/1.jsonl")
	b := w.HostPath("loop-github-o-r-2", "/home/agent/.claude/projects/x/1.jsonl")
	require.True(t, strings.HasPrefix(a, root+string(filepath.Separator)), a)
	require.True(t, strings.HasSuffix(a, filepath.Join("home", ".claude", "projects", "x", "1.jsonl")), a)
	require.NotEqual(t, a, b, "each world has its own home")
	require.Equal(t, "/home/agentx/f", w.HostPath("loop-github-o-r-1", "/home/agentx/f"), "a sibling of the home is not under it")
	require.Equal(t, "/etc/hosts", w.HostPath("loop-github-o-r-1", "/etc/hosts"))
	require.Equal(t, "/home/agent/f", (&sandbox.Worlds{Root: root, Confiner: &sandbox.Confiner{}}).HostPath("loop-github-o-r-1", "/home/agent/f"))
}
