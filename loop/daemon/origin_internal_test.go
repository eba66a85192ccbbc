package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
}

// The origin of a checkout (a clone, or a linked worktree of the older
// layout) is read from its config file as it stands at each use, with no
// program run: a planted core.fsmonitor stays unrun, and an include is
// refused rather than followed.
func TestOriginIsReadFromTheConfigFile(t *testing.T) {
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
	marker := filepath.Join(base, "ran")
	evil := filepath.Join(base, "evil")
	require.NoError(t, os.WriteFile(evil, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755))
	gitIn(t, main, "config", "core.fsmonitor", evil)

	c := newOriginCache()
	for _, cwd := range []string{main, wt} {
		u, err := c.url(ctx, cwd)
		require.NoError(t, err)
		require.Equal(t, "https://github.com/octo/demo.git", u)
	}
	gitIn(t, main, "remote", "set-url", "origin", "https://github.com/evil/demo.git")
	u, err := c.url(ctx, wt)
	require.NoError(t, err)
	require.Equal(t, "https://github.com/evil/demo.git", u, "a change is seen")
	require.NoFileExists(t, marker)

	inc := filepath.Join(base, "inc.config")
	require.NoError(t, os.WriteFile(inc, []byte("[remote \"origin\"]\n\turl = https://github.com/inc/demo.git\n"), 0o644))
	gitIn(t, main, "config", "include.path", inc)
	_, err = c.url(ctx, main)
	require.Error(t, err, "an include is not followed")
}
