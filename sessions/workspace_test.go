package sessions

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

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

// envRunner adds environment entries to every command it runs.
type envRunner struct {
	run.Runner
	env []string
}

func (r envRunner) Run(ctx context.Context, c run.Cmd) (run.Result, error) {
	c.Env = append(append([]string(nil), r.env...), c.Env...)
	return r.Runner.Run(ctx, c)
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

func newTestWorkspaces(t testing.TB, env []string) *Workspaces {
	t.Helper()
	ws, err := NewWorkspaces(WorkspaceConfig{Root: t.TempDir()}, envRunner{run.Exec{}, env})
	require.NoError(t, err)
	return ws
}

func TestWorkspacePrepareCreatesWorktreeOnIssueBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env)
	w := newTestWorkspaces(t, env)
	item := mustItem(t, "github:octo/repo#5")

	ws, err := w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	require.False(t, ws.Reused)
	require.Equal(t, filepath.Join(w.cfg.Root, "github.com", "octo", "repo"), ws.Clone)
	require.Equal(t, filepath.Join(w.cfg.Root, ".worktrees", "github.com", "octo", "repo", "github-octo-repo-5"), ws.Dir)
	require.Equal(t, "issue-5", ws.Branch)
	require.Equal(t, "issue-5", gitTest(t, env, ws.Dir, "rev-parse", "--abbrev-ref", "HEAD"))
	require.FileExists(t, filepath.Join(ws.Dir, "README.md"))
	owner, err := os.ReadFile(ws.Dir + ".owner")
	require.NoError(t, err)
	require.Equal(t, "github:octo/repo#5\n", string(owner))

	again, err := w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	require.True(t, again.Reused)
	require.Equal(t, ws.Dir, again.Dir)
	require.NoError(t, again.FetchErr)
}

func TestWorkspaceUsesExistingRemoteBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env, "issue-7")
	w := newTestWorkspaces(t, env)
	ws, err := w.Prepare(ctx, mustItem(t, "github:octo/repo#7"), PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(ws.Dir, "issue-7.txt"), "the worktree carries the branch's own commits")
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
	require.NoDirExists(t, filepath.Join(w.cfg.Root, ".worktrees", "github.com", "octo", "repo", "github-octo-repo-9"))
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
	_, err = w.Prepare(ctx, mustItem(t, "github:octo/repo#10"), PrepareOptions{CloneURL: origin, Branch: "pr-10", FetchRef: "refs/pull/10/head", RequireBranch: true})
	require.ErrorIs(t, err, ErrBranchMissing)
	_, err = w.Prepare(ctx, mustItem(t, "github:octo/repo#11"), PrepareOptions{CloneURL: origin, Branch: "pr-11", FetchRef: "refs/heads/main:refs/heads/x"})
	require.ErrorIs(t, err, ErrInvalidName)
}

func TestTwoWorkItemsNeverShareAWorktree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env)
	w := newTestWorkspaces(t, env)
	a, b := mustItem(t, "github:octo/repo#1"), mustItem(t, "github:octo/repo#2")

	// Prepared concurrently against a repository not cloned yet: one clone,
	// two worktrees.
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
	require.Equal(t, wa.Clone, wb.Clone)
	require.NotEqual(t, wa.Dir, wb.Dir)
	require.Equal(t, "issue-1", gitTest(t, env, wa.Dir, "rev-parse", "--abbrev-ref", "HEAD"))
	require.Equal(t, "issue-2", gitTest(t, env, wb.Dir, "rev-parse", "--abbrev-ref", "HEAD"))

	require.NoError(t, os.WriteFile(filepath.Join(wa.Dir, "only-a.txt"), []byte("a"), 0o644))
	require.NoFileExists(t, filepath.Join(wb.Dir, "only-a.txt"))

	// A branch is checked out in one worktree only: asking for a's branch
	// for b fails loudly instead of sharing it.
	c := mustItem(t, "github:octo/repo#3")
	_, err := w.Prepare(ctx, c, PrepareOptions{CloneURL: origin, Branch: "issue-1"})
	require.Error(t, err)
	require.Contains(t, err.Error(), "one worktree only")
}

func TestWorktreeHasOneOwner(t *testing.T) {
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

	clone := filepath.Join(w.cfg.Root, "github.com", "octo", "repo")
	require.NoError(t, os.MkdirAll(clone, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(clone, "precious.txt"), []byte("x"), 0o644))
	_, err := w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.ErrorIs(t, err, ErrWorkspaceConflict)
	require.FileExists(t, filepath.Join(clone, "precious.txt"))
	require.NoError(t, os.RemoveAll(clone))

	path, err := w.Path(item)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(path, 0o755))
	_, err = w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.ErrorIs(t, err, ErrWorkspaceConflict)
}

func TestWorkspaceRemoveAndRecreate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env)
	w := newTestWorkspaces(t, env)
	item := mustItem(t, "github:octo/repo#8")
	ws, err := w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(ws.Dir, "wip.txt"), []byte("x"), 0o644))
	gitTest(t, env, ws.Dir, "add", "wip.txt")
	gitTest(t, env, ws.Dir, "commit", "--quiet", "-m", "wip")

	require.NoError(t, w.Remove(ctx, item))
	require.NoDirExists(t, ws.Dir)
	require.NoFileExists(t, ws.Dir+".owner")
	require.NoError(t, w.Remove(ctx, item), "removing twice is fine")

	again, err := w.Prepare(ctx, item, PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(again.Dir, "wip.txt"), "the local branch, with its commits, is kept and reused")
}

func TestWorkspaceRunsNoRepositoryHooks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := gitEnv(t)
	origin := newOrigin(t, env)
	w := newTestWorkspaces(t, env)
	ws, err := w.Prepare(ctx, mustItem(t, "github:octo/repo#1"), PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
	marker := filepath.Join(t.TempDir(), "hook-ran")
	hook := filepath.Join(ws.Clone, ".git", "hooks", "post-checkout")
	require.NoError(t, os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755))

	_, err = w.Prepare(ctx, mustItem(t, "github:octo/repo#2"), PrepareOptions{CloneURL: origin})
	require.NoError(t, err)
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
	require.Equal(t, "/srv/loop/.worktrees/ghe.corp.example_8443/my.org/my.repo/github-ghe.corp.example-8443-my.org-my.repo.git-3", p)
	url, err := cloneURL(mustItem(t, "github:octo/repo#1"), "")
	require.NoError(t, err)
	require.Equal(t, "https://github.com/octo/repo.git", url)
}
