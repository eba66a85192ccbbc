package sessions

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/run/runtest"
	"github.com/theloop-dev/theloop/workitem"
)

// gitEnv keeps the machine's git configuration out of a test and gives
// commits an author. It is passed explicitly (not with t.Setenv) so the
// git tests can run in parallel.
func gitEnv(t testing.TB) []string {
	t.Helper()
	requireTool(t, "git")
	empty := filepath.Join(t.TempDir(), "gitconfig")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	return []string{
		"GIT_CONFIG_GLOBAL=" + empty, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=theloop test", "GIT_COMMITTER_NAME=theloop test",
		"GIT_AUTHOR_EMAIL=test@theloop.invalid", "GIT_COMMITTER_EMAIL=test@theloop.invalid",
	}
}

// gitTest runs git for test set-up and returns its trimmed output.
func gitTest(t testing.TB, env []string, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// newOrigin makes a bare repository with one commit on main, plus the
// given extra branches (each with a commit of its own), and returns its
// path, usable as a clone URL.
func newOrigin(t testing.TB, env []string, branches ...string) string {
	t.Helper()
	base := t.TempDir()
	origin := filepath.Join(base, "origin.git")
	gitTest(t, env, base, "init", "--quiet", "--bare", "-b", "main", origin)
	seed := filepath.Join(base, "seed")
	gitTest(t, env, base, "clone", "--quiet", origin, seed)
	require.NoError(t, os.WriteFile(filepath.Join(seed, "README.md"), []byte("hello\n"), 0o644))
	gitTest(t, env, seed, "add", "README.md")
	gitTest(t, env, seed, "commit", "--quiet", "-m", "initial")
	gitTest(t, env, seed, "push", "--quiet", "origin", "HEAD:main")
	for _, b := range branches {
		gitTest(t, env, seed, "checkout", "--quiet", "-b", b, "main")
		require.NoError(t, os.WriteFile(filepath.Join(seed, b+".txt"), []byte(b+"\n"), 0o644))
		gitTest(t, env, seed, "add", ".")
		gitTest(t, env, seed, "commit", "--quiet", "-m", "work on "+b)
		gitTest(t, env, seed, "push", "--quiet", "origin", b)
	}
	return origin
}

// newTestWorkspaces runs loopd's git as loopd does: run.Exec with its
// allowlisted environment, nothing of the test's git set-up.
func newTestWorkspaces(t testing.TB, _ []string) *Workspaces {
	t.Helper()
	ws, err := NewWorkspaces(WorkspaceConfig{Root: t.TempDir(), Timeout: 2 * time.Minute}, run.Exec{})
	require.NoError(t, err)
	return ws
}

// requireOwnClone checks that dir is a clone of its own: a .git directory,
// no alternates, no object hard-linked to another file, the read-only
// paths present, origin naming url.
func requireOwnClone(t *testing.T, ws Workspace, url string) {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(ws.Dir, ".git"))
	require.NoError(t, err)
	require.True(t, fi.IsDir(), "an own clone, not a worktree")
	require.NoFileExists(t, filepath.Join(ws.Dir, ".git", "objects", "info", "alternates"))
	require.NoError(t, filepath.WalkDir(filepath.Join(ws.Dir, ".git", "objects"), func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		if d.Type().IsRegular() {
			info, err := d.Info()
			require.NoError(t, err)
			require.EqualValues(t, 1, info.Sys().(*syscall.Stat_t).Nlink, "%s is hard-linked: the agent could chmod and rewrite a shared object", p)
		}
		return nil
	}))
	require.Equal(t, ReadOnlyPaths(ws.Dir), ws.ReadOnly)
	for _, p := range ws.ReadOnly {
		require.True(t, strings.HasPrefix(p, ws.Dir+"/"), p)
		_, err := os.Lstat(p)
		require.NoError(t, err, "a read-only path must exist to be mounted")
	}
	require.Empty(t, ws.Shared, "objects are copied: nothing outside the clone to mount")
	require.False(t, strings.HasPrefix(ws.Mirror, ws.Dir), "the mirror is not inside the clone")
	got, err := OriginURL(ws.Dir)
	require.NoError(t, err)
	require.Equal(t, url, got)
}

func TestWorkspacePrepareCreatesOwnCloneOnIssueBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env)
	w := newTestWorkspaces(t, env)
	item := mustItem(t, "github:octo/repo#5")

	ws, err := w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	require.False(t, ws.Reused)
	require.Equal(t, filepath.Join(w.cfg.Root, ".mirrors", "github.com", "octo", "repo.git"), ws.Mirror)
	require.Equal(t, filepath.Join(w.cfg.Root, ".clones", "github.com", "octo", "repo", "github-octo-repo-5"), ws.Dir)
	require.Equal(t, "issue-5", ws.Branch)
	require.Equal(t, "issue-5", gitTest(t, env, ws.Dir, "rev-parse", "--abbrev-ref", "HEAD"))
	b, err := CheckedOutBranch(ws.Dir)
	require.NoError(t, err)
	require.Equal(t, "issue-5", b)
	require.FileExists(t, filepath.Join(ws.Dir, "README.md"))
	requireOwnClone(t, ws, origin)
	require.Equal(t, "true", gitTest(t, env, ws.Mirror, "rev-parse", "--is-bare-repository"))
	owner, err := os.ReadFile(ws.Dir + ".owner")
	require.NoError(t, err)
	require.Equal(t, "github:octo/repo#5\n", string(owner))

	again, err := w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	require.True(t, again.Reused)
	require.Equal(t, ws.Dir, again.Dir)
	require.NoError(t, again.FetchErr)
}

// A clone made after origin moved starts from the refreshed mirror; an
// existing clone is left as it is.
func TestWorkspaceRefreshIsTheMirrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env)
	w := newTestWorkspaces(t, env)
	first, err := w.Prepare(ctx, mustItem(t, "github:octo/repo#1"), PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	before := gitTest(t, env, first.Dir, "rev-parse", "HEAD")

	seed := filepath.Join(t.TempDir(), "seed")
	gitTest(t, env, filepath.Dir(seed), "clone", "--quiet", origin, seed)
	require.NoError(t, os.WriteFile(filepath.Join(seed, "later.txt"), []byte("later\n"), 0o644))
	gitTest(t, env, seed, "add", "later.txt")
	gitTest(t, env, seed, "commit", "--quiet", "-m", "later")
	gitTest(t, env, seed, "push", "--quiet", "origin", "HEAD:main")

	second, err := w.Prepare(ctx, mustItem(t, "github:octo/repo#2"), PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(second.Dir, "later.txt"), "the mirror was refreshed before the clone")
	again, err := w.Prepare(ctx, mustItem(t, "github:octo/repo#1"), PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	require.True(t, again.Reused)
	require.Equal(t, before, gitTest(t, env, first.Dir, "rev-parse", "HEAD"), "loopd runs no git in an existing clone")
}

func TestWorkspaceUsesExistingRemoteBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env, "issue-7")
	w := newTestWorkspaces(t, env)
	ws, err := w.Prepare(ctx, mustItem(t, "github:octo/repo#7"), PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(ws.Dir, "issue-7.txt"), "the clone carries the branch's own commits")
	require.Equal(t, "origin/issue-7", gitTest(t, env, ws.Dir, "rev-parse", "--abbrev-ref", "@{upstream}"))
}

// A pull request's checkout is its head branch or nothing.
func TestWorkspaceRequireBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env, "feature-widget")
	w := newTestWorkspaces(t, env)
	ws, err := w.Prepare(ctx, mustItem(t, "github:octo/repo#8"), PrepareOptions{CloneURL: origin, Branch: "feature-widget", RequireBranch: true})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(ws.Dir, "feature-widget.txt"))
	_, err = w.Prepare(ctx, mustItem(t, "github:octo/repo#9"), PrepareOptions{CloneURL: origin, Branch: "feature/gone", RequireBranch: true})
	require.ErrorIs(t, err, ErrBranchMissing)
	require.NoDirExists(t, filepath.Join(w.cfg.Root, ".clones", "github.com", "octo", "repo", "github-octo-repo-9"))
	// A pull request whose head is origin's default branch.
	ws, err = w.Prepare(ctx, mustItem(t, "github:octo/repo#10"), PrepareOptions{CloneURL: origin, Branch: "main", RequireBranch: true})
	require.NoError(t, err)
	require.Equal(t, "main", gitTest(t, env, ws.Dir, "rev-parse", "--abbrev-ref", "HEAD"))
}

// A pull request from a fork is refs/pull/<n>/head of the base repository.
func TestWorkspaceFetchesAPullRequestHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env, "forkwork")
	gitTest(t, env, origin, "update-ref", "refs/pull/9/head", "refs/heads/forkwork")
	gitTest(t, env, origin, "update-ref", "-d", "refs/heads/forkwork")
	w := newTestWorkspaces(t, env)
	ws, err := w.Prepare(ctx, mustItem(t, "github:octo/repo#9"), PrepareOptions{CloneURL: origin, Branch: "pr-9", FetchRef: "refs/pull/9/head", RequireBranch: true})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(ws.Dir, "forkwork.txt"), "the fork's commits")
	require.Equal(t, "pr-9", gitTest(t, env, ws.Dir, "rev-parse", "--abbrev-ref", "HEAD"))
	require.Equal(t, "origin/pr-9", gitTest(t, env, ws.Dir, "rev-parse", "--abbrev-ref", "@{upstream}"))
	_, err = w.Prepare(ctx, mustItem(t, "github:octo/repo#10"), PrepareOptions{CloneURL: origin, Branch: "pr-10", FetchRef: "refs/pull/10/head", RequireBranch: true})
	require.ErrorIs(t, err, ErrBranchMissing)
	_, err = w.Prepare(ctx, mustItem(t, "github:octo/repo#11"), PrepareOptions{CloneURL: origin, Branch: "pr-11", FetchRef: "refs/heads/main:refs/heads/x"})
	require.ErrorIs(t, err, ErrInvalidName)
}

func TestTwoWorkItemsNeverShareACheckout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env)
	w := newTestWorkspaces(t, env)
	a, b := mustItem(t, "github:octo/repo#1"), mustItem(t, "github:octo/repo#2")

	// Prepared concurrently against a repository not mirrored yet: one
	// mirror, two clones.
	var wg sync.WaitGroup
	results := make([]Workspace, 2)
	errs := make([]error, 2)
	for i, item := range []workitem.Ref{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
		}()
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	wa, wb := results[0], results[1]
	require.Equal(t, wa.Mirror, wb.Mirror)
	require.NotEqual(t, wa.Dir, wb.Dir)
	require.Equal(t, "issue-1", gitTest(t, env, wa.Dir, "rev-parse", "--abbrev-ref", "HEAD"))
	require.Equal(t, "issue-2", gitTest(t, env, wb.Dir, "rev-parse", "--abbrev-ref", "HEAD"))

	// Nothing is shared: a file, a commit, a ref, a config of one clone is
	// not the other's.
	require.NoError(t, os.WriteFile(filepath.Join(wa.Dir, "only-a.txt"), []byte("a"), 0o644))
	gitTest(t, env, wa.Dir, "add", "only-a.txt")
	gitTest(t, env, wa.Dir, "commit", "--quiet", "-m", "a's work")
	gitTest(t, env, wa.Dir, "config", "core.fsmonitor", "/nonexistent/evil")
	require.NoFileExists(t, filepath.Join(wb.Dir, "only-a.txt"))
	out, err := exec.Command("git", "-C", wb.Dir, "rev-parse", "--verify", "--quiet", "refs/heads/issue-1").CombinedOutput()
	require.Error(t, err, "a's branch is not in b's clone: %s", out)
	require.Empty(t, gitTest(t, env, wb.Dir, "config", "--default", "", "core.fsmonitor"))
}

func TestCheckoutHasOneOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env)
	w := newTestWorkspaces(t, env)
	item := mustItem(t, "github:octo/repo#4")
	path, err := w.Path(item)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path+".owner", []byte("github:someone/else#4\n"), 0o644))

	_, err = w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.ErrorIs(t, err, ErrWorktreeOwned)
	require.Contains(t, err.Error(), "github:someone/else#4")
	require.NoDirExists(t, path)
	require.ErrorIs(t, w.Remove(ctx, item), ErrWorktreeOwned)
}

func TestWorkspaceRefusesDirectoriesInTheWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env)
	w := newTestWorkspaces(t, env)
	item := mustItem(t, "github:octo/repo#6")

	mirror := filepath.Join(w.cfg.Root, ".mirrors", "github.com", "octo", "repo.git")
	require.NoError(t, os.MkdirAll(mirror, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mirror, "precious.txt"), []byte("x"), 0o644))
	_, err := w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.ErrorIs(t, err, ErrWorkspaceConflict)
	require.FileExists(t, filepath.Join(mirror, "precious.txt"))
	require.NoError(t, os.RemoveAll(mirror))

	path, err := w.Path(item)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(path, 0o755))
	_, err = w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.ErrorIs(t, err, ErrWorkspaceConflict)
}

// Remove deletes the clone with what was not pushed (loopd takes nothing
// out of an agent's repository); the next Prepare starts from origin.
func TestWorkspaceRemoveAndRecreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env)
	w := newTestWorkspaces(t, env)
	item := mustItem(t, "github:octo/repo#8")
	ws, err := w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	outside := filepath.Join(t.TempDir(), "outside.txt")
	require.NoError(t, os.WriteFile(outside, []byte("keep"), 0o644))
	require.NoError(t, os.Symlink(filepath.Dir(outside), filepath.Join(ws.Dir, "link-out")))
	require.NoError(t, os.WriteFile(filepath.Join(ws.Dir, "wip.txt"), []byte("x"), 0o644))
	gitTest(t, env, ws.Dir, "add", "wip.txt")
	gitTest(t, env, ws.Dir, "commit", "--quiet", "-m", "wip")

	require.NoError(t, w.Remove(ctx, item))
	require.NoDirExists(t, ws.Dir)
	require.NoFileExists(t, ws.Dir+".owner")
	require.FileExists(t, outside, "a link out of the clone is removed, not followed")
	require.NoError(t, w.Remove(ctx, item), "removing twice is fine")

	again, err := w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	require.False(t, again.Reused)
	require.NoFileExists(t, filepath.Join(again.Dir, "wip.txt"))
}

// An item whose checkout is a worktree of the older shared clone gets its
// own clone on the same branch, with the branch's commits; the old
// worktree is left as it is, and nothing planted in the old shared clone
// runs.
func TestWorkspaceMigratesAnOldWorktree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env)
	w := newTestWorkspaces(t, env)
	item := mustItem(t, "github:octo/repo#3")
	oldClone := filepath.Join(w.cfg.Root, "github.com", "octo", "repo")
	oldWT := filepath.Join(w.cfg.Root, ".worktrees", "github.com", "octo", "repo", item.Slug())
	require.NoError(t, os.MkdirAll(filepath.Dir(oldClone), 0o755))
	gitTest(t, env, filepath.Dir(oldClone), "clone", "--quiet", origin, oldClone)
	require.NoError(t, os.MkdirAll(filepath.Dir(oldWT), 0o755))
	gitTest(t, env, oldClone, "worktree", "add", "--quiet", "-b", "issue-3", oldWT, "origin/main")
	require.NoError(t, os.WriteFile(oldWT+".owner", []byte(item.String()+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(oldWT, "old-work.txt"), []byte("w"), 0o644))
	gitTest(t, env, oldWT, "add", "old-work.txt")
	gitTest(t, env, oldWT, "commit", "--quiet", "-m", "work done in the old layout")
	marker, evil := plantProgram(t)
	appendFile(t, filepath.Join(oldClone, ".git", "config"), "[remote \"origin\"]\n\tuploadpack = "+evil+"\n[core]\n\tfsmonitor = "+evil+"\n\thooksPath = "+filepath.Dir(evil)+"\n")
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(evil), "reference-transaction"), []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755))

	ws, err := w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	require.Equal(t, oldWT, ws.MigratedFrom)
	require.FileExists(t, filepath.Join(ws.Dir, "old-work.txt"), "the branch's commits came along")
	require.Equal(t, "issue-3", gitTest(t, env, ws.Dir, "rev-parse", "--abbrev-ref", "HEAD"))
	requireOwnClone(t, ws, origin)
	require.FileExists(t, filepath.Join(oldWT, "old-work.txt"), "the old worktree is left")
	require.NoFileExists(t, marker, "nothing planted in the old shared clone ran")
	require.Empty(t, gitTest(t, env, ws.Mirror, "for-each-ref", "refs/loopd/"), "the migration ref is gone")

	require.NoError(t, w.Remove(ctx, item))
	require.NoDirExists(t, oldWT)
	require.NoFileExists(t, marker)
}

func TestWorkspaceValidatesBeforeArgv(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	stub := runtest.NewStub(t) // any git call fails the test: all of these are refused first
	w, err := NewWorkspaces(WorkspaceConfig{Root: t.TempDir()}, stub)
	require.NoError(t, err)
	item := mustItem(t, "github:octo/repo#1")
	for name, tc := range map[string]struct {
		opts PrepareOptions
		want error
	}{
		"option as branch":     {PrepareOptions{Branch: "--orphan"}, ErrInvalidName},
		"branch with ..":       {PrepareOptions{Branch: "a..b"}, ErrInvalidName},
		"option as clone URL":  {PrepareOptions{CloneURL: "--upload-pack=touch /tmp/pwned"}, ErrUnsafeArgument},
		"remote helper URL":    {PrepareOptions{CloneURL: "ext::sh -c touch% /tmp/pwned"}, ErrUnsafeArgument},
		"control chars in URL": {PrepareOptions{CloneURL: "https://x/y\n"}, ErrUnsafeArgument},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := w.Prepare(ctx, item, tc.opts)
			require.ErrorIs(t, err, tc.want)
		})
	}
	_, err = NewWorkspaces(WorkspaceConfig{Root: "relative"}, stub)
	require.Error(t, err)
}

func TestWorkspaceLayoutForHostWithPort(t *testing.T) {
	t.Parallel()
	w, err := NewWorkspaces(WorkspaceConfig{Root: "/srv/loop"}, run.Exec{})
	require.NoError(t, err)
	p, err := w.Path(mustItem(t, "github:ghe.corp.example:8443/my.org/my.repo.git#3"))
	require.NoError(t, err)
	require.Equal(t, "/srv/loop/.clones/ghe.corp.example_8443/my.org/my.repo/github-ghe.corp.example-8443-my.org-my.repo.git-3", p)
	url, err := cloneURL(mustItem(t, "github:octo/repo#1"), "")
	require.NoError(t, err)
	require.Equal(t, "https://github.com/octo/repo.git", url)
}
