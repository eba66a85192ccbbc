package plugin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSyncIsIdempotentAndReplacesOnUpgrade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mkt")
	tree, err := Marketplace(Options{})
	require.NoError(t, err)

	changes, err := Sync(dir, tree)
	require.NoError(t, err)
	require.Len(t, changes, len(tree), "a fresh directory gets every file")
	for _, c := range changes {
		require.Equal(t, "add", c.Op)
	}
	again, err := Sync(dir, tree)
	require.NoError(t, err)
	require.Empty(t, again, "a second sync changes nothing")
	require.Equal(t, "loop-gate", InstalledGateProgram(dir))

	// An upgrade: a file the new tree lacks goes, changed files are
	// replaced, a link planted where a file belongs is replaced by the file.
	stale := filepath.Join(dir, Name, "commands", "retired.md")
	require.NoError(t, os.WriteFile(stale, []byte("old"), 0o644))
	hooks := filepath.Join(dir, Name, "hooks", "hooks.json")
	require.NoError(t, os.Remove(hooks))
	require.NoError(t, os.Symlink("/etc/passwd", hooks))
	next, err := Marketplace(Options{GateProgram: "/opt/bin/loop-gate"})
	require.NoError(t, err)
	changes, err = Sync(dir, next)
	require.NoError(t, err)
	require.Contains(t, changes, Change{Name + "/commands/retired.md", "remove"})
	require.Contains(t, changes, Change{Name + "/" + HooksPath, "update"})
	require.Contains(t, changes, Change{Name + "/" + ManifestPath, "update"})
	require.NoFileExists(t, stale)
	st, err := os.Lstat(hooks)
	require.NoError(t, err)
	require.True(t, st.Mode().IsRegular())
	require.Equal(t, "/opt/bin/loop-gate", InstalledGateProgram(dir))
	plan, err := Plan(dir, next)
	require.NoError(t, err)
	require.Empty(t, plan)
}

func TestSyncRefusesADirectoryThatIsNotOurs(t *testing.T) {
	dir := t.TempDir()
	mine := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(mine, []byte("keep me"), 0o644))
	tree, err := Marketplace(Options{})
	require.NoError(t, err)
	_, err = Sync(dir, tree)
	require.True(t, errors.Is(err, ErrNotManaged), "%v", err)
	_, err = Remove(dir)
	require.True(t, errors.Is(err, ErrNotManaged), "%v", err)
	require.FileExists(t, mine)

	file := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = Sync(file, tree)
	require.True(t, errors.Is(err, ErrNotManaged), "%v", err)
}

func TestRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mkt")
	removed, err := Remove(dir)
	require.NoError(t, err)
	require.False(t, removed, "nothing to remove")
	tree, err := Marketplace(Options{})
	require.NoError(t, err)
	_, err = Sync(dir, tree)
	require.NoError(t, err)
	removed, err = Remove(dir)
	require.NoError(t, err)
	require.True(t, removed)
	require.NoDirExists(t, dir)
}
