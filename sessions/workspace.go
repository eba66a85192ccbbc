package sessions

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/internal/atomicfile"
	"github.com/theloop-dev/theloop/internal/lazyre"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/workitem"
)

// WorkspaceConfig configures Workspaces.
type WorkspaceConfig struct {
	// Root holds every clone and worktree (absolute).
	Root string
	// GitBinary is the git program (default "git").
	GitBinary string
	// Timeout bounds each git command (default 10 minutes: clones are slow).
	Timeout time.Duration
	// LockTimeout bounds the wait for another preparation of the same
	// repository (default 2 minutes).
	LockTimeout time.Duration
}

// Workspace is a prepared checkout for one work item.
type Workspace struct {
	// Item is the owner of the worktree.
	Item workitem.Ref
	// Dir is the worktree: the session's working directory.
	Dir string
	// Clone is the shared clone of the repository the worktree hangs off.
	Clone string
	// Branch is the branch checked out in Dir.
	Branch string
	// Reused reports that the worktree already existed.
	Reused bool
	// FetchErr is the error of the refreshing fetch of an existing clone, if
	// it failed; the worktree is still usable, from older refs.
	FetchErr error
}

// PrepareOptions refine Prepare.
type PrepareOptions struct {
	// CloneURL overrides https://<host>/<owner>/<repo>.git (e.g. an ssh URL
	// or, in tests, a local path).
	CloneURL string
	// Branch overrides issue-<n>.
	Branch string
	// RequireBranch refuses to create Branch when neither the clone nor
	// origin has it (ErrBranchMissing), instead of starting it from
	// origin's default branch: a pull request's checkout must be its head.
	RequireBranch bool
	// FetchRef, when set, is fetched from origin into origin/<Branch>
	// first — a pull request from a fork is refs/pull/<n>/head of the base
	// repository, not a branch of it. It must be refs/pull/<n>/head.
	FetchRef string
}

// pullHeadRef is the only shape FetchRef may take.
var pullHeadRef = lazyre.New(`^refs/pull/[1-9][0-9]{0,9}/head$`)

// Workspaces keeps one clone per repository under Root/<host>/<owner>/<repo>
// and one git worktree per work item under
// Root/.worktrees/<host>/<owner>/<repo>/<slug>.
//
// Each worktree has exactly one owner: the work item's ref is written beside
// it (<slug>.owner) before the worktree is created, and a different work
// item asking for the same path is refused. Git operations on a clone are
// serialised across processes by a lock file beside the clone.
//
// Git runs with hooks disabled (core.hooksPath=/dev/null) and the ext
// transport off: no code from a watched repository ever runs.
type Workspaces struct {
	cfg    WorkspaceConfig
	runner run.Runner
}

// NewWorkspaces validates cfg and returns a Workspaces.
func NewWorkspaces(cfg WorkspaceConfig, runner run.Runner) (*Workspaces, error) {
	if !filepath.IsAbs(cfg.Root) {
		return nil, fmt.Errorf("workspace config: Root %q must be an absolute directory", cfg.Root)
	}
	cfg.Root = filepath.Clean(cfg.Root)
	if cfg.GitBinary == "" {
		cfg.GitBinary = "git"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Minute
	}
	if cfg.LockTimeout <= 0 {
		cfg.LockTimeout = 2 * time.Minute
	}
	if runner == nil {
		return nil, errors.New("sessions.NewWorkspaces: nil runner (pass run.Exec{})")
	}
	return &Workspaces{cfg: cfg, runner: runner}, nil
}

// layout returns the clone and worktree paths, validating every component
// that came from the work item.
func (w *Workspaces) layout(item workitem.Ref) (clone, worktree string, err error) {
	host := strings.ReplaceAll(item.HostOrDefault(), ":", "_")
	repo := strings.TrimSuffix(item.Repo, ".git")
	for _, p := range []struct{ what, v string }{
		{"host", host}, {"owner", item.Owner}, {"repo", repo}, {"slug", item.Slug()},
	} {
		if !validPathPart(p.v) {
			return "", "", fmt.Errorf("%w: %s %q of %s cannot be a directory name", ErrInvalidName, p.what, p.v, item)
		}
	}
	clone = filepath.Join(w.cfg.Root, host, item.Owner, repo)
	worktree = filepath.Join(w.cfg.Root, ".worktrees", host, item.Owner, repo, item.Slug())
	return clone, worktree, nil
}

// Path returns where the work item's worktree lives (whether or not it
// exists yet).
func (w *Workspaces) Path(item workitem.Ref) (string, error) {
	_, wt, err := w.layout(item)
	return wt, err
}

// git runs git with repository code disabled and prompts off.
func (w *Workspaces) git(ctx context.Context, dir string, args ...string) (run.Result, error) {
	full := []string{"-c", "core.hooksPath=/dev/null", "-c", "protocol.ext.allow=never"}
	if dir != "" {
		full = append(full, "-C", dir)
	}
	full = append(full, args...)
	return w.runner.Run(ctx, run.Cmd{
		Name: w.cfg.GitBinary, Args: full, Timeout: w.cfg.Timeout,
		Env: []string{"GIT_TERMINAL_PROMPT=0"},
	})
}

// cloneURL is the URL to clone from: the override, validated, or
// https://<host>/<owner>/<repo>.git.
func cloneURL(item workitem.Ref, override string) (string, error) {
	if override == "" {
		if item.HostOrDefault() == "" {
			return "", fmt.Errorf("%w: %s names no host; pass a clone URL", ErrInvalidName, item)
		}
		return fmt.Sprintf("https://%s/%s/%s.git", item.HostOrDefault(), item.Owner, strings.TrimSuffix(item.Repo, ".git")), nil
	}
	switch {
	case strings.HasPrefix(override, "-"):
		return "", fmt.Errorf("%w: clone URL %q starts with \"-\"", ErrUnsafeArgument, override)
	case strings.ContainsAny(override, "\x00\n\r"):
		return "", fmt.Errorf("%w: clone URL %q contains control characters", ErrUnsafeArgument, override)
	case strings.Contains(override, "::"):
		return "", fmt.Errorf("%w: clone URL %q uses a remote helper (<transport>::); use https, ssh or a path", ErrUnsafeArgument, override)
	}
	return override, nil
}

// Prepare returns the work item's worktree, creating what is missing: the
// shared clone (cloned once; refreshed with `git fetch --prune` afterwards,
// a failure of which is reported in FetchErr, not fatal) and the worktree on
// branch issue-<n> — the existing local branch, else a tracking branch of
// origin/issue-<n>, else a new branch from origin's default branch. An
// existing worktree owned by the same work item is reused as is.
func (w *Workspaces) Prepare(ctx context.Context, item workitem.Ref, opts PrepareOptions) (Workspace, error) {
	clone, wt, err := w.layout(item)
	if err != nil {
		return Workspace{}, err
	}
	branch := opts.Branch
	if branch == "" {
		branch = item.Branch()
	}
	if err := ValidateBranch(branch); err != nil {
		return Workspace{}, err
	}
	if opts.FetchRef != "" && !pullHeadRef.MatchString(opts.FetchRef) {
		return Workspace{}, fmt.Errorf("%w: fetch ref %q (only refs/pull/<n>/head)", ErrInvalidName, opts.FetchRef)
	}
	url, err := cloneURL(item, opts.CloneURL)
	if err != nil {
		return Workspace{}, err
	}
	if err := os.MkdirAll(filepath.Dir(clone), 0o755); err != nil {
		return Workspace{}, fmt.Errorf("preparing workspace for %s: %w", item, err)
	}
	lockCtx, cancel := context.WithTimeout(ctx, w.cfg.LockTimeout)
	unlock, err := lockFile(lockCtx, clone+".lock")
	cancel()
	if err != nil {
		return Workspace{}, err
	}
	defer unlock()

	ws := Workspace{Item: item, Dir: wt, Clone: clone, Branch: branch}
	if err := w.ensureClone(ctx, clone, url, &ws); err != nil {
		return Workspace{}, err
	}
	if opts.FetchRef != "" {
		if _, err := w.git(ctx, clone, "fetch", "--quiet", "origin", "+"+opts.FetchRef+":refs/remotes/origin/"+branch); err != nil {
			return Workspace{}, fmt.Errorf("%w: fetching %s from %s: %v", ErrBranchMissing, opts.FetchRef, url, err)
		}
	}
	if err := claimOwner(wt, item); err != nil {
		return Workspace{}, err
	}
	registered, err := w.isWorktree(ctx, clone, wt)
	if err != nil {
		return Workspace{}, err
	}
	if registered {
		if _, err := os.Stat(wt); err == nil {
			ws.Reused = true
			return ws, nil
		}
		// Registered but deleted by hand: let git forget it, then recreate.
		if _, err := w.git(ctx, clone, "worktree", "prune"); err != nil {
			return Workspace{}, fmt.Errorf("pruning stale worktree %s: %w", wt, err)
		}
	} else if _, err := os.Lstat(wt); err == nil {
		return Workspace{}, fmt.Errorf("%w: %s exists but is not a worktree of %s; move it away and retry", ErrWorkspaceConflict, wt, clone)
	}
	if err := os.MkdirAll(filepath.Dir(wt), 0o755); err != nil {
		return Workspace{}, fmt.Errorf("preparing worktree for %s: %w", item, err)
	}
	if opts.RequireBranch && !w.refExists(ctx, clone, "refs/heads/"+branch) && !w.refExists(ctx, clone, "refs/remotes/origin/"+branch) {
		return Workspace{}, fmt.Errorf("%w: %s has no branch %s (push it, or check the pull request's head)", ErrBranchMissing, clone, branch)
	}
	if err := w.addWorktree(ctx, clone, wt, branch); err != nil {
		return Workspace{}, err
	}
	return ws, nil
}

func (w *Workspaces) ensureClone(ctx context.Context, clone, url string, ws *Workspace) error {
	if fi, err := os.Stat(filepath.Join(clone, ".git")); err == nil && fi.IsDir() {
		if _, err := w.git(ctx, clone, "fetch", "--prune", "--quiet", "origin"); err != nil {
			ws.FetchErr = fmt.Errorf("refreshing %s: %w", clone, err)
		}
		return nil
	}
	if entries, err := os.ReadDir(clone); err == nil && len(entries) > 0 {
		return fmt.Errorf("%w: %s exists, is not empty and is not a git clone; move it away and retry", ErrWorkspaceConflict, clone)
	}
	// Clone beside the target and rename, so an interrupted clone never
	// leaves a half-filled directory that looks like a clone.
	tmp, err := os.MkdirTemp(filepath.Dir(clone), "."+filepath.Base(clone)+".clone-*")
	if err != nil {
		return fmt.Errorf("cloning %s: %w", url, err)
	}
	defer os.RemoveAll(tmp)
	if _, err := w.git(ctx, "", "clone", "--quiet", "--", url, tmp); err != nil {
		return fmt.Errorf("cloning %s (check the URL and the operator's git credentials): %w", url, err)
	}
	_ = os.Remove(clone) // an empty directory in the way
	if err := os.Rename(tmp, clone); err != nil {
		return fmt.Errorf("cloning %s: %w", url, err)
	}
	return nil
}

// ownerFile is where a worktree's owning ref is recorded.
func ownerFile(worktree string) string { return worktree + ".owner" }

// claimOwner records item as the worktree's owner, or refuses if another
// work item owns it.
func claimOwner(worktree string, item workitem.Ref) error {
	path := ownerFile(worktree)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		owner := strings.TrimSpace(string(data))
		if owner != item.String() {
			return fmt.Errorf("%w: %s belongs to %s, not %s (remove that work item's workspace first)", ErrWorktreeOwned, worktree, owner, item)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading worktree owner %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, []byte(item.String()+"\n"), 0o644)
}

// isWorktree reports whether git knows wt as a worktree of clone.
func (w *Workspaces) isWorktree(ctx context.Context, clone, wt string) (bool, error) {
	res, err := w.git(ctx, clone, "worktree", "list", "--porcelain")
	if err != nil {
		return false, fmt.Errorf("listing worktrees of %s: %w", clone, err)
	}
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok && filepath.Clean(p) == wt {
			return true, nil
		}
	}
	return false, nil
}

func (w *Workspaces) refExists(ctx context.Context, clone, ref string) bool {
	_, err := w.git(ctx, clone, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	return err == nil
}

func (w *Workspaces) addWorktree(ctx context.Context, clone, wt, branch string) error {
	var args []string
	switch {
	case w.refExists(ctx, clone, "refs/heads/"+branch):
		args = []string{"worktree", "add", wt, branch}
	case w.refExists(ctx, clone, "refs/remotes/origin/"+branch):
		args = []string{"worktree", "add", "--track", "-b", branch, wt, "origin/" + branch}
	default:
		base := w.defaultBranch(ctx, clone)
		if !w.refExists(ctx, clone, "refs/remotes/origin/"+base) {
			return fmt.Errorf("creating worktree %s: origin has no branch %s to start %s from; push one or pass a branch", wt, base, branch)
		}
		args = []string{"worktree", "add", "--no-track", "-b", branch, wt, "origin/" + base}
	}
	if _, err := w.git(ctx, clone, args...); err != nil {
		return fmt.Errorf("creating worktree %s on %s (a branch can be checked out in one worktree only): %w", wt, branch, err)
	}
	return nil
}

// defaultBranch is origin's HEAD branch, or "main" when origin/HEAD is not
// set.
func (w *Workspaces) defaultBranch(ctx context.Context, clone string) string {
	res, err := w.git(ctx, clone, "rev-parse", "--abbrev-ref", "origin/HEAD")
	if err == nil {
		b := strings.TrimPrefix(strings.TrimSpace(string(res.Stdout)), "origin/")
		if ValidateBranch(b) == nil && b != "HEAD" {
			return b
		}
	}
	return "main"
}

// Remove deletes the work item's worktree (`git worktree remove --force`,
// then prune) and its owner record, keeping the branch and the shared
// clone. Removing a worktree that does not exist is not an error; one owned
// by another work item is refused.
func (w *Workspaces) Remove(ctx context.Context, item workitem.Ref) error {
	clone, wt, err := w.layout(item)
	if err != nil {
		return err
	}
	if data, err := os.ReadFile(ownerFile(wt)); err == nil && strings.TrimSpace(string(data)) != item.String() {
		return fmt.Errorf("%w: not removing %s, it belongs to %s", ErrWorktreeOwned, wt, strings.TrimSpace(string(data)))
	}
	if _, err := os.Stat(filepath.Join(clone, ".git")); err == nil {
		lockCtx, cancel := context.WithTimeout(ctx, w.cfg.LockTimeout)
		unlock, err := lockFile(lockCtx, clone+".lock")
		cancel()
		if err != nil {
			return err
		}
		defer unlock()
		if ok, _ := w.isWorktree(ctx, clone, wt); ok {
			if _, err := w.git(ctx, clone, "worktree", "remove", "--force", wt); err != nil {
				return fmt.Errorf("removing worktree %s: %w", wt, err)
			}
		}
		_, _ = w.git(ctx, clone, "worktree", "prune")
	}
	if err := os.RemoveAll(wt); err != nil {
		return fmt.Errorf("removing %s: %w", wt, err)
	}
	if err := os.Remove(ownerFile(wt)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", ownerFile(wt), err)
	}
	return nil
}
