package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// An npm-installed harness (node_modules/.bin/codex → ../@openai/codex/
// bin/codex.js, which runs a native binary from a sibling package) gets
// its whole node_modules tree as read+execute, not only the link's and
// the target's directories.
func TestNPMHarnessGetsItsNodeModules(t *testing.T) {
	root := t.TempDir()
	nm := filepath.Join(root, "tools", "node_modules")
	target := filepath.Join(nm, "@openai", "codex", "bin", "codex.js")
	require.NoError(t, os.MkdirAll(filepath.Dir(target), 0o755))
	require.NoError(t, os.WriteFile(target, []byte("#!/usr/bin/env node\n"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(nm, ".bin"), 0o755))
	link := filepath.Join(nm, ".bin", "codex")
	require.NoError(t, os.Symlink("../@openai/codex/bin/codex.js", link))
	elsewhere := filepath.Join(root, "bin", "claude")
	require.NoError(t, os.MkdirAll(filepath.Dir(elsewhere), 0o755))
	require.NoError(t, os.WriteFile(elsewhere, nil, 0o755))

	p := NewPolicy(PolicyOptions{Worktree: root, Executables: []string{link, elsewhere}})
	require.True(t, slices.Contains(p.ReadExec, nm), "%v", p.ReadExec)
	require.Equal(t, "", nodeModulesRoot(elsewhere))
	require.False(t, slices.Contains(p.ReadExec, root), "nothing wider than the node_modules tree")
}
