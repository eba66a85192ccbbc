package daemon

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/run"
)

type countingGit struct {
	run.Exec
	n atomic.Int64
}

func (c *countingGit) Run(ctx context.Context, cmd run.Cmd) (run.Result, error) {
	c.n.Add(1)
	return c.Exec.Run(ctx, cmd)
}

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
}

// The origin of a checkout is asked of git once and kept while the files
// it came from are unchanged; any change to them — even one that restores
// the file's size and modification time — is seen at the next use.
func TestOriginCacheFollowsTheConfig(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	ctx := context.Background()
	base := t.TempDir()
	main := filepath.Join(base, "main")
	require.NoError(t, os.MkdirAll(main, 0o755))
	gitIn(t, main, "init", "-q", "-b", "main")
	gitIn(t, main, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x")
	gitIn(t, main, "remote", "add", "origin", "https://github.com/octo/demo.git")
	wt := filepath.Join(base, "wt")
	gitIn(t, main, "worktree", "add", "-q", wt)

	for _, cwd := range []string{main, wt} {
		g := &countingGit{}
		c := newOriginCache(g)
		for range 3 {
			u, err := c.url(ctx, cwd)
			require.NoError(t, err)
			require.Equal(t, "https://github.com/octo/demo.git", u)
		}
		require.EqualValues(t, 1, g.n.Load(), "%s: git ran once", cwd)

		cfg := filepath.Join(main, ".git", "config")
		fi, err := os.Stat(cfg)
		require.NoError(t, err)
		// Edited in place (same inode, same size), its modification time
		// set back: only the change time tells.
		b, err := os.ReadFile(cfg)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(cfg, bytes.Replace(b, []byte("/octo/"), []byte("/evil/"), 1), 0o644))
		require.NoError(t, os.Chtimes(cfg, fi.ModTime(), fi.ModTime()))
		u, err := c.url(ctx, cwd)
		require.NoError(t, err)
		require.Equal(t, "https://github.com/evil/demo.git", u, "%s: a change is seen", cwd)
		gitIn(t, main, "remote", "set-url", "origin", "https://github.com/octo/demo.git")
	}

	// A config that includes another file is asked of git every time.
	inc := filepath.Join(base, "inc.config")
	require.NoError(t, os.WriteFile(inc, []byte("[remote \"origin\"]\n\turl = https://github.com/inc/demo.git\n"), 0o644))
	gitIn(t, main, "config", "include.path", inc)
	g := &countingGit{}
	c := newOriginCache(g)
	for range 2 {
		u, err := c.url(ctx, main)
		require.NoError(t, err)
		require.Equal(t, "https://github.com/inc/demo.git", u)
	}
	require.EqualValues(t, 2, g.n.Load(), "not kept")
}
