package loop

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return string(out)
}

// TestLockIsNeverUntrackedInACheckout: the store's graph-state.lock (and a
// state root's logs in the checkout) are this machine's working state:
// after a walk writes them, `git status` shows only graph-state.json, in
// the main checkout and in a worktree, and the repository's .gitignore is
// untouched. A second store adds nothing twice.
func TestLockIsNeverUntrackedInACheckout(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	gitIn(t, repo, "init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "README.md"), []byte("x\n"), 0o644))
	gitIn(t, repo, "add", ".")
	gitIn(t, repo, "commit", "-q", "-m", "init")
	wt := filepath.Join(t.TempDir(), "wt")
	gitIn(t, repo, "worktree", "add", "-q", wt)

	for _, root := range []string{repo, wt} {
		st := NewStore(root, "")
		unlock, err := st.Lock(context.Background(), "issue-1", time.Second)
		require.NoError(t, err)
		unlock()
		require.NoError(t, os.MkdirAll(filepath.Join(root, ".the-loop", "logs"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, ".the-loop", "logs", "events.jsonl"), []byte("{}\n"), 0o644))
		status := gitIn(t, root, "status", "--porcelain", "--untracked-files=all")
		require.NotContains(t, status, "graph-state.lock", root)
		require.NotContains(t, status, "events.jsonl", root)
		_, err = os.Stat(filepath.Join(root, ".gitignore"))
		require.ErrorIs(t, err, os.ErrNotExist, "the repository's own files are left alone")
	}
	exclude, err := os.ReadFile(filepath.Join(repo, ".git", "info", "exclude"))
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(exclude), "\n"+LockFileName+"\n"), "once, though two checkouts share it:\n%s", exclude)
}

// A .git file naming something that is not a git directory, or an
// info/exclude that is a symbolic link, gets nothing written.
func TestExcludeWritesOnlyIntoAGitDirectory(t *testing.T) {
	t.Run("gitdir names a plain directory", func(t *testing.T) {
		repo, elsewhere := t.TempDir(), t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(repo, ".git"), []byte("gitdir: "+elsewhere+"\n"), 0o644))
		excludeLocalState(repo)
		entries, err := os.ReadDir(elsewhere)
		require.NoError(t, err)
		require.Empty(t, entries)
	})
	t.Run("info/exclude is a symbolic link", func(t *testing.T) {
		if _, err := exec.LookPath("git"); err != nil {
			t.Skip("git is not installed")
		}
		repo, victim := t.TempDir(), filepath.Join(t.TempDir(), "victim")
		gitIn(t, repo, "init", "-q")
		require.NoError(t, os.WriteFile(victim, []byte("keep\n"), 0o600))
		ex := filepath.Join(repo, ".git", "info", "exclude")
		require.NoError(t, os.Remove(ex))
		require.NoError(t, os.Symlink(victim, ex))
		excludeLocalState(repo)
		b, err := os.ReadFile(victim)
		require.NoError(t, err)
		require.Equal(t, "keep\n", string(b))
	})
}
