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
	// Root holds every mirror and clone (absolute).
	Root string
	// GitBinary is the git program (default "git").
	GitBinary string
	// Timeout bounds each git command (default 10 minutes: clones are slow).
	Timeout time.Duration
	// LockTimeout bounds the wait for another preparation of the same
	// repository (default 2 minutes).
	LockTimeout time.Duration
}

// Workspace is a prepared checkout for one work item, and what the agent's
// sandbox needs to know about it. Dir, ReadOnly and Shared are the contract
// with the sandbox (loop/daemon/sandbox).
type Workspace struct {
	// Item is the owner of the checkout.
	Item workitem.Ref
	// Dir is the session's own clone — its work tree, the agent's working
	// directory, read-write to the agent. No other repository loopd uses
	// shares anything writable with it.
	Dir string
	// ReadOnly are absolute paths inside Dir the agent must not write
	// (ReadOnlyPaths: .git/config, .git/hooks, .git/info,
	// .git/objects/info). Each exists.
	ReadOnly []string
	// Shared are paths outside Dir the sandbox must mount read-only for the
	// clone to work. Empty: the clone's objects are its own copy.
	Shared []string
	// Mirror is loopd's own bare mirror of the repository the clone was
	// made from. It is never mounted in a sandbox, and no agent can write
	// it.
	Mirror string
	// Branch is the branch checked out in Dir when it was cloned.
	Branch string
	// Reused reports that the clone already existed.
	Reused bool
	// MigratedFrom, when set, is the old-layout worktree (of a clone shared
	// by several work items) this clone took its branch from; it is left on
	// disk, untouched, for the operator to delete.
	MigratedFrom string
	// FetchErr is the error of the refreshing fetch into the mirror, if it
	// failed; the clone is still usable, from older refs.
	FetchErr error
}

// PrepareOptions refine Prepare.
type PrepareOptions struct {
	// CloneURL overrides https://<host>/<owner>/<repo>.git (e.g. an ssh URL
	// or, in tests, a local path).
	CloneURL string
	// Branch overrides issue-<n>.
	Branch string
	// RequireBranch refuses to create Branch when origin does not have it
	// (ErrBranchMissing), instead of starting it from origin's default
	// branch: a pull request's checkout must be its head.
	RequireBranch bool
	// FetchRef, when set, is fetched from origin and becomes
	// origin/<Branch> of the clone — a pull request from a fork is
	// refs/pull/<n>/head of the base repository, not a branch of it. It
	// must be refs/pull/<n>/head.
	FetchRef string
}

// pullHeadRef is the only shape FetchRef may take.
var pullHeadRef = lazyre.New(`^refs/pull/[1-9][0-9]{0,9}/head$`)

// Workspaces keeps one bare mirror per repository under
// Root/.mirrors/<host>/<owner>/<repo>.git and one clone of its own per work
// item under Root/.clones/<host>/<owner>/<repo>/<slug> (docs/decisions.md
// §22).
//
// The mirror is loopd's: every fetch from the repository's remote happens
// there, and no sandbox ever mounts it. A session's clone is made from the
// mirror with `git clone --local --no-hardlinks` — its objects a copy, not
// a hard link an agent could chmod and rewrite, nor an alternate — and
// becomes the agent's the moment it is renamed into place. From then on
// loopd never runs git in it: git run there would read the agent's
// configuration, attributes and hooks outside the agent's sandbox. So a
// clone is refreshed only by being made: its branch and origin/* are those
// of the mirror at clone time, and a later Prepare refreshes the mirror
// (for the next clone) but leaves an existing clone as the agent left it.
// What loopd must know about a clone it reads from files
// (CheckedOutBranch, OriginURL).
//
// Each clone has exactly one owner: the work item's ref is written beside
// it (<slug>.owner) before the clone is made, and a different work item
// asking for the same path is refused. Git operations on a mirror are
// serialised across processes by a lock file beside it. Every git runs as
// run.Git makes it: system and user configuration off, every key that runs
// a program pinned, hooks off, only https, ssh and local transports.
//
// Older versions kept one clone per repository (Root/<host>/<owner>/<repo>)
// shared by git worktrees per item (Root/.worktrees/…). Prepare of an item
// whose checkout is such a worktree makes the new clone on the worktree's
// branch, taking the branch's commits from the old shared clone into the
// mirror with a hardened fetch (upload-pack pinned, objects checked), and
// leaves the old worktree untouched; the old shared clone is never used
// otherwise.
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

// paths are where one work item's repository and checkout live.
type paths struct {
	mirror      string // bare, loopd's
	clone       string // the item's own clone
	oldClone    string // the shared clone of the older layout
	oldWorktree string // the item's worktree in the older layout
}

// layout returns the work item's paths, validating every component that
// came from the work item.
func (w *Workspaces) layout(item workitem.Ref) (paths, error) {
	host := strings.ReplaceAll(item.HostOrDefault(), ":", "_")
	repo := strings.TrimSuffix(item.Repo, ".git")
	for _, p := range []struct{ what, v string }{
		{"host", host}, {"owner", item.Owner}, {"repo", repo}, {"slug", item.Slug()},
	} {
		if !validPathPart(p.v) {
			return paths{}, fmt.Errorf("%w: %s %q of %s cannot be a directory name", ErrInvalidName, p.what, p.v, item)
		}
	}
	return paths{
		mirror:      filepath.Join(w.cfg.Root, ".mirrors", host, item.Owner, repo+".git"),
		clone:       filepath.Join(w.cfg.Root, ".clones", host, item.Owner, repo, item.Slug()),
		oldClone:    filepath.Join(w.cfg.Root, host, item.Owner, repo),
		oldWorktree: filepath.Join(w.cfg.Root, ".worktrees", host, item.Owner, repo, item.Slug()),
	}, nil
}

// Path returns where the work item's clone lives (whether or not it exists
// yet).
func (w *Workspaces) Path(item workitem.Ref) (string, error) {
	p, err := w.layout(item)
	return p.clone, err
}

// git runs git, hardened (run.Git), in the repository dir (a mirror, or a
// clone not yet handed to an agent); "" runs it without one.
func (w *Workspaces) git(ctx context.Context, dir string, args ...string) (run.Result, error) {
	if dir != "" {
		args = append([]string{"-C", dir}, args...)
	}
	c := run.Git(args...)
	c.Name, c.Timeout = w.cfg.GitBinary, w.cfg.Timeout
	// A fetch over ssh needs the operator's agent; behind a proxy, the
	// proxy. Nothing else of loopd's environment.
	c.Env = append(c.Env, run.Passthrough(gitNetworkEnv...)...)
	return w.runner.Run(ctx, c)
}

// gitNetworkEnv are the variables a fetch from the remote may need besides
// run.BaseEnv: the ssh agent, proxies and CA bundles.
var gitNetworkEnv = []string{
	"SSH_AUTH_SOCK", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
}

// uploadPack pins the program a fetch or clone starts at the other end,
// whatever a configuration names for the remote.
const uploadPack = "--upload-pack=git-upload-pack"

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

// Prepare returns the work item's checkout, creating what is missing: the
// repository's mirror (cloned once; refreshed with a fetch afterwards, a
// failure of which is reported in FetchErr, not fatal) and the item's own
// clone on branch issue-<n> — made from origin's issue-<n> when it has one
// (tracking it), else a new branch from origin's default branch. An
// existing clone owned by the same work item is reused as it is: loopd
// runs no git in it.
func (w *Workspaces) Prepare(ctx context.Context, item workitem.Ref, opts PrepareOptions) (Workspace, error) {
	p, err := w.layout(item)
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
	if err := os.MkdirAll(filepath.Dir(p.mirror), 0o700); err != nil {
		return Workspace{}, fmt.Errorf("preparing workspace for %s: %w", item, err)
	}
	lockCtx, cancel := context.WithTimeout(ctx, w.cfg.LockTimeout)
	unlock, err := lockFile(lockCtx, p.mirror+".lock")
	cancel()
	if err != nil {
		return Workspace{}, err
	}
	defer unlock()

	ws := Workspace{Item: item, Dir: p.clone, Mirror: p.mirror, Branch: branch, ReadOnly: ReadOnlyPaths(p.clone), Shared: []string{}}
	if err := w.ensureMirror(ctx, p.mirror, url, &ws); err != nil {
		return Workspace{}, err
	}
	// The pull request's head lands in the mirror as itself, never as a
	// same-named branch of the base repository.
	startRef := ""
	if opts.FetchRef != "" {
		if _, err := w.git(ctx, p.mirror, "fetch", "--quiet", uploadPack, "--", url, "+"+opts.FetchRef+":"+opts.FetchRef); err != nil {
			return Workspace{}, fmt.Errorf("%w: fetching %s from %s: %v", ErrBranchMissing, opts.FetchRef, url, err)
		}
		startRef = opts.FetchRef
	}
	if err := claimOwner(p.clone, item); err != nil {
		return Workspace{}, err
	}
	if fi, err := os.Lstat(filepath.Join(p.clone, ".git")); err == nil && fi.IsDir() {
		ws.Reused = true
		return ws, nil
	} else if _, err := os.Lstat(p.clone); err == nil {
		return Workspace{}, fmt.Errorf("%w: %s exists but is not a clone; move it away and retry", ErrWorkspaceConflict, p.clone)
	}
	migrated := ""
	if startRef == "" {
		if migrated, err = w.migrate(ctx, p, item, branch); err != nil {
			return Workspace{}, err
		}
	}
	if migrated != "" {
		ws.MigratedFrom = p.oldWorktree
		defer func() { _, _ = w.git(ctx, p.mirror, "update-ref", "-d", migrated) }()
	}
	if startRef == "" && w.refExists(ctx, p.mirror, "refs/heads/"+branch) {
		startRef = "refs/heads/" + branch
	}
	if opts.RequireBranch && startRef == "" && migrated == "" {
		return Workspace{}, fmt.Errorf("%w: %s has no branch %s (push it, or check the pull request's head)", ErrBranchMissing, url, branch)
	}
	if err := w.makeClone(ctx, p, url, branch, startRef, migrated); err != nil {
		return Workspace{}, err
	}
	return ws, nil
}

// ensureMirror makes the bare mirror, or refreshes it. The mirror keeps
// origin's branches as its own refs/heads/*.
func (w *Workspaces) ensureMirror(ctx context.Context, mirror, url string, ws *Workspace) error {
	if fi, err := os.Stat(filepath.Join(mirror, "HEAD")); err == nil && fi.Mode().IsRegular() {
		if _, err := w.git(ctx, mirror, "fetch", "--prune", "--quiet", uploadPack, "--", url, "+refs/heads/*:refs/heads/*"); err != nil {
			ws.FetchErr = fmt.Errorf("refreshing %s from %s: %w", mirror, url, err)
		}
		return nil
	}
	if entries, err := os.ReadDir(mirror); err == nil && len(entries) > 0 {
		return fmt.Errorf("%w: %s exists, is not empty and is not a mirror; move it away and retry", ErrWorkspaceConflict, mirror)
	}
	// Clone beside the target and rename, so an interrupted clone never
	// leaves a half-filled directory that looks like a mirror.
	tmp, err := os.MkdirTemp(filepath.Dir(mirror), "."+filepath.Base(mirror)+".clone-*")
	if err != nil {
		return fmt.Errorf("cloning %s: %w", url, err)
	}
	defer os.RemoveAll(tmp)
	if _, err := w.git(ctx, "", "clone", "--bare", "--quiet", uploadPack, "--", url, tmp); err != nil {
		return fmt.Errorf("cloning %s (check the URL and the operator's git credentials): %w", url, err)
	}
	_ = os.Remove(mirror) // an empty directory in the way
	if err := os.Rename(tmp, mirror); err != nil {
		return fmt.Errorf("cloning %s: %w", url, err)
	}
	return nil
}

// makeClone clones the mirror into a fresh directory beside the item's
// clone path, checks out branch there, points origin at url, and renames
// it into place. Until the rename the directory is loopd's alone: the git
// run in it reads only the configuration that git clone itself wrote.
// startRef (a ref of the mirror) is what origin/<branch> becomes; local (a
// ref of the mirror holding a migrated branch) is what branch itself
// becomes.
func (w *Workspaces) makeClone(ctx context.Context, p paths, url, branch, startRef, local string) error {
	if err := os.MkdirAll(filepath.Dir(p.clone), 0o755); err != nil {
		return fmt.Errorf("preparing a clone for %s: %w", p.clone, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(p.clone), "."+filepath.Base(p.clone)+".clone-*")
	if err != nil {
		return fmt.Errorf("cloning %s: %w", p.mirror, err)
	}
	defer os.RemoveAll(tmp)
	if _, err := w.git(ctx, "", "clone", "--quiet", "--local", "--no-hardlinks", "--no-checkout", uploadPack, "--", p.mirror, tmp); err != nil {
		return fmt.Errorf("cloning %s into %s: %w", p.mirror, p.clone, err)
	}
	var fetch []string
	if startRef != "" && startRef != "refs/heads/"+branch {
		fetch = append(fetch, "+"+startRef+":refs/remotes/origin/"+branch)
	}
	if local != "" {
		fetch = append(fetch, "+"+local+":refs/heads/"+branch)
	}
	if len(fetch) > 0 {
		if _, err := w.git(ctx, tmp, append([]string{"fetch", "--quiet", uploadPack, "--", p.mirror}, fetch...)...); err != nil {
			return fmt.Errorf("cloning %s: fetching %s: %w", p.mirror, strings.Join(fetch, " "), err)
		}
	}
	// -B: the clone already has origin's default branch checked out
	// locally, which may be the one asked for.
	var checkout []string
	switch {
	case local != "":
		checkout = []string{"checkout", "--quiet", branch}
	case startRef != "":
		checkout = []string{"checkout", "--quiet", "--track", "-B", branch, "origin/" + branch}
	default:
		base := w.defaultBranch(ctx, p.mirror)
		if !w.refExists(ctx, p.mirror, "refs/heads/"+base) {
			return fmt.Errorf("creating the clone %s: origin has no branch %s to start %s from; push one or pass a branch", p.clone, base, branch)
		}
		checkout = []string{"checkout", "--quiet", "--no-track", "-B", branch, "origin/" + base}
	}
	if _, err := w.git(ctx, tmp, checkout...); err != nil {
		return fmt.Errorf("creating the clone %s on %s: %w", p.clone, branch, err)
	}
	// origin names the real remote, for the agent and for display; loopd
	// itself fetches into the mirror only.
	if _, err := w.git(ctx, tmp, "remote", "set-url", "origin", url); err != nil {
		return fmt.Errorf("creating the clone %s: %w", p.clone, err)
	}
	for _, d := range []string{"hooks", "info", filepath.Join("objects", "info")} {
		if err := os.MkdirAll(filepath.Join(tmp, ".git", d), 0o755); err != nil {
			return fmt.Errorf("creating the clone %s: %w", p.clone, err)
		}
	}
	if err := os.Rename(tmp, p.clone); err != nil {
		return fmt.Errorf("creating the clone %s: %w", p.clone, err)
	}
	return nil
}

// migrate takes branch's commits from the older layout's shared clone into
// the mirror (as refs/loopd/migrate/<slug>) when the item still has a
// worktree there, and returns that ref; "" when there is nothing to
// migrate. The shared clone was writable by agents, so the fetch pins the
// program it starts there (upload-pack; the rest of what git could run is
// pinned by run.Git and passed down to it) and checks every object it
// receives. A branch that cannot be fetched is not an error: the clone is
// then made as for a new item.
func (w *Workspaces) migrate(ctx context.Context, p paths, item workitem.Ref, branch string) (string, error) {
	if _, err := os.Lstat(p.oldWorktree); err != nil {
		return "", nil
	}
	if data, err := os.ReadFile(ownerFile(p.oldWorktree)); err == nil && strings.TrimSpace(string(data)) != item.String() {
		return "", fmt.Errorf("%w: %s belongs to %s, not %s (remove that work item's workspace first)", ErrWorktreeOwned, p.oldWorktree, strings.TrimSpace(string(data)), item)
	}
	if fi, err := os.Lstat(filepath.Join(p.oldClone, ".git")); err != nil || !fi.IsDir() {
		return "", nil
	}
	ref := "refs/loopd/migrate/" + item.Slug()
	if _, err := w.git(ctx, p.mirror, "-c", "fetch.fsckObjects=true", "fetch", "--quiet", "--no-tags", uploadPack, "--", p.oldClone, "+refs/heads/"+branch+":"+ref); err != nil {
		return "", nil
	}
	return ref, nil
}

// ownerFile is where a checkout's owning ref is recorded.
func ownerFile(dir string) string { return dir + ".owner" }

// claimOwner records item as the checkout's owner, or refuses if another
// work item owns it.
func claimOwner(dir string, item workitem.Ref) error {
	path := ownerFile(dir)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		owner := strings.TrimSpace(string(data))
		if owner != item.String() {
			return fmt.Errorf("%w: %s belongs to %s, not %s (remove that work item's workspace first)", ErrWorktreeOwned, dir, owner, item)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("reading checkout owner %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, []byte(item.String()+"\n"), 0o644)
}

func (w *Workspaces) refExists(ctx context.Context, repo, ref string) bool {
	_, err := w.git(ctx, repo, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	return err == nil
}

// defaultBranch is the mirror's HEAD branch (origin's default when the
// mirror was cloned), or "main".
func (w *Workspaces) defaultBranch(ctx context.Context, mirror string) string {
	res, err := w.git(ctx, mirror, "symbolic-ref", "--quiet", "--short", "HEAD")
	if err == nil {
		b := strings.TrimSpace(string(res.Stdout))
		if ValidateBranch(b) == nil && b != "HEAD" {
			return b
		}
	}
	return "main"
}

// Remove deletes the work item's clone and its owner record — with
// whatever the agent did not push: loopd runs no git in the clone, so it
// saves nothing from it — and an older layout's worktree of the item
// (files only; its stale registration in the old shared clone is
// harmless). The mirror stays. Removing a checkout that does not exist is
// not an error; one owned by another work item is refused.
func (w *Workspaces) Remove(ctx context.Context, item workitem.Ref) error {
	p, err := w.layout(item)
	if err != nil {
		return err
	}
	for _, dir := range []string{p.clone, p.oldWorktree} {
		if data, err := os.ReadFile(ownerFile(dir)); err == nil && strings.TrimSpace(string(data)) != item.String() {
			return fmt.Errorf("%w: not removing %s, it belongs to %s", ErrWorktreeOwned, dir, strings.TrimSpace(string(data)))
		}
	}
	if err := os.MkdirAll(filepath.Dir(p.mirror), 0o700); err != nil {
		return fmt.Errorf("removing the workspace of %s: %w", item, err)
	}
	lockCtx, cancel := context.WithTimeout(ctx, w.cfg.LockTimeout)
	unlock, err := lockFile(lockCtx, p.mirror+".lock")
	cancel()
	if err != nil {
		return err
	}
	defer unlock()
	for _, dir := range []string{p.clone, p.oldWorktree} {
		// RemoveAll removes a symbolic link the agent left, never what it
		// points to.
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("removing %s: %w", dir, err)
		}
		if err := os.Remove(ownerFile(dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", ownerFile(dir), err)
		}
	}
	return nil
}
