package daemon_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// Pull-request endpoints (docs/daemon.md §6.7) and branch-linkage verification
// (docs/daemon.md §6.2), end to end: real daemon, githubsim, real tmux, real git.

// pushBranch pushes a branch with one commit of its own to the remote.
func (w *world) pushBranch(branch string) {
	w.t.Helper()
	dir := filepath.Join(w.t.TempDir(), "push")
	git(w.t, filepath.Dir(dir), "clone", "-q", w.remote, dir)
	git(w.t, dir, "checkout", "-q", "-b", branch)
	require.NoError(w.t, os.WriteFile(filepath.Join(dir, "widget.txt"), []byte("widget\n"), 0o644))
	git(w.t, dir, "add", ".")
	git(w.t, dir, "commit", "-q", "-m", "widget")
	git(w.t, dir, "push", "-q", "origin", branch)
}

func (w *world) record(ref string) (sessions.Record, bool) {
	w.t.Helper()
	reg, err := sessions.OpenRegistry(sessions.RegistryDir(w.cfg.StateRoot))
	require.NoError(w.t, err)
	it, err := workitem.Parse(ref)
	require.NoError(w.t, err)
	r, err := reg.Get(it)
	return r, err == nil
}

func (w *world) hasTmux(name string) bool {
	return exec.Command("tmux", "-S", w.socket, "has-session", "-t", "="+name).Run() == nil
}

// receivedBy is what the conversation id read.
func (w *world) receivedBy(id string) string {
	var b strings.Builder
	for _, line := range strings.Split(w.received(), "\n") {
		if rest, ok := strings.CutPrefix(line, id+"\t"); ok {
			b.WriteString(rest + "\n")
		}
	}
	return b.String()
}

func (w *world) eventField(name, key string) []any {
	w.obsMu.Lock()
	defer w.obsMu.Unlock()
	var out []any
	for _, o := range w.obs {
		if o.Name == name {
			out = append(out, o.Fields[key])
		}
	}
	return out
}

// A PR opened from a same-repository head branch and linked to issue #1
// (sessionPerPr: always) gets its own session in its own worktree on the
// head branch, announced on the PR; the PR's comments go there, not to the
// issue's session; merging the PR ends the PR's session (kept for a
// post-mortem, harness terminated) and leaves the issue's session open.
func TestPROwnSessionInOwnWorktree(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) {
		landlockOnly(c)
		c.Routing.Tmux.SessionPerPr = loop.SessionPerPrAlways
	})
	n := w.openLabeled()
	w.waitIdle()
	issue, ok := w.record("github:octo/demo#1")
	require.True(t, ok)

	w.pushBranch("feature-widget")
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Add the widget", Body: "Fixes #1", Head: "feature-widget"})
	require.NoError(t, err)
	w.waitIdle()

	prRef := "github:octo/demo#" + itoa(pr.Number)
	ep, ok := w.record(prRef)
	require.True(t, ok, "the PR has its own session record\n%s", w.eventNames())
	require.Equal(t, sessions.StatusActive, ep.Status)
	require.Equal(t, w.item(n), ep.Parent)
	require.NotEqual(t, issue.Cwd, ep.Cwd, "its own checkout")
	out, err := exec.Command("git", "-C", ep.Cwd, "rev-parse", "--abbrev-ref", "HEAD").Output()
	require.NoError(t, err)
	require.Equal(t, "feature-widget", strings.TrimSpace(string(out)), "the checkout is the PR's head branch")
	require.FileExists(t, filepath.Join(ep.Cwd, "widget.txt"))
	require.True(t, w.hasTmux(ep.TmuxName), "its own tmux session")
	require.NotEqual(t, issue.TmuxName, ep.TmuxName)
	argv, _ := os.ReadFile(filepath.Join(w.claude, "argv.log"))
	require.Contains(t, string(argv), ep.Cwd+"\tnew\t"+ep.SessionID+"\tissue-1\t", "the PR's harness runs in its checkout, for work item issue-1")
	require.Equal(t, 1, w.count("session.pr_spawned"))
	require.Equal(t, 1, w.count("session.pr_linked"))
	issue, _ = w.record("github:octo/demo#1")
	link, ok := issue.PR(w.item(pr.Number))
	require.True(t, ok, "the issue's record lists the PR")
	require.Equal(t, "feature-widget", link.Branch)

	comments, err := w.sim.Comments(repoFull, pr.Number)
	require.NoError(t, err)
	var announced bool
	for _, c := range comments {
		announced = announced || strings.Contains(c.Body, "attach -t "+ep.TmuxName)
	}
	require.True(t, announced, "the PR's session is announced on the PR")
	w.eventually("the PR spawn prompt in the PR's session", func() bool { return strings.Contains(w.receivedBy(ep.SessionID), "Add the widget") })
	// The PR's inner loop (pdlc-pr-loop) started beside the work item's
	// state, and its first assignment went to the PR's session.
	inner := w.innerState(issue.Cwd, pr.Number)
	require.Equal(t, "pdlc-pr-loop", inner.Loop)
	require.Equal(t, "implementation", inner.CurrentNode)
	w.eventually("the inner loop's assignment in the PR's session", func() bool {
		return strings.Contains(w.receivedBy(ep.SessionID), "the-loop assignment for pull request #"+itoa(pr.Number)+"'s pdlc-pr-loop on issue-1")
	})

	_, err = w.sim.Comment(repoFull, pr.Number, human, "please rename the widget to gadget")
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the PR comment in the PR's session", func() bool {
		return strings.Contains(w.receivedBy(ep.SessionID), "please rename the widget to gadget")
	})
	require.NotContains(t, w.receivedBy(issue.SessionID), "please rename the widget", "not in the issue's session")

	pid := procOf(t, w.harnessPIDOf(ep.TmuxName))
	require.NoError(t, w.sim.MergePullRequest(repoFull, pr.Number, human))
	w.waitIdle()
	ep, _ = w.record(prRef)
	require.Equal(t, sessions.StatusClosed, ep.Status, "the PR's session ended")
	require.True(t, w.hasTmux(ep.TmuxName), "kept for a post-mortem")
	w.eventually("the PR's harness to be gone", func() bool { return !pid.alive() })
	require.NoDirExists(t, ep.Cwd, "the PR's checkout is removed")
	require.Equal(t, sessions.StatusActive, w.status(n), "the work item's session stays open")
	require.True(t, w.hasTmux(issue.TmuxName))
	require.Equal(t, 1, w.count("session.pr_closed"))
	require.Equal(t, 1, w.count("session.kept_open"))
	require.Equal(t, 2, w.spawns(), "the issue's and the PR's")
	inner = w.innerState(issue.Cwd, pr.Number)
	require.Equal(t, "complete", inner.CurrentNode, "merging forces the PR's inner loop to complete")
}

// A PR that cannot have a checkout of its own gets no session of its own:
// its event is pasted into the issue's session and the refusal is
// reported with its reason.
func TestPRWithoutSeparateCheckoutIsDeclinedIntoIssueSession(t *testing.T) {
	for name, tc := range map[string]struct {
		edit   func(c *daemon.Config, t *testing.T)
		head   string
		reason string
	}{
		// The PR's head is the branch the issue's session works on.
		"shared worktree": {head: "issue-1", reason: sessions.DeclinedSharedWorktree},
		// No workspace root: sessions run in one directory.
		"no workspace": {
			edit: func(c *daemon.Config, t *testing.T) {
				c.Routing.WorkspaceRoot, c.Routing.SpawnWorkdir = "", t.TempDir()
			},
			head:   "feature-x",
			reason: sessions.DeclinedNoSeparateCheckout,
		},
		// A same-repository PR whose head branch is not on the remote.
		"head branch missing": {head: "feature-never-pushed", reason: sessions.DeclinedWorkspaceFailed},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, func(c *daemon.Config) {
				c.Routing.Tmux.SessionPerPr = loop.SessionPerPrAlways
				if tc.edit != nil {
					tc.edit(c, t)
				}
			})
			n := w.openLabeled()
			w.waitIdle()
			issue, ok := w.record("github:octo/demo#1")
			require.True(t, ok)
			pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Widget PR without its own checkout", Body: "Fixes #1", Head: tc.head})
			require.NoError(t, err)
			w.waitIdle()
			require.Equal(t, []any{tc.reason}, w.eventField("session.pr_session_declined", "reason"), "%s", w.eventNames())
			_, own := w.record("github:octo/demo#" + itoa(pr.Number))
			require.False(t, own, "no session of its own")
			require.False(t, w.hasTmux(sessions.TmuxName(w.item(pr.Number))))
			w.eventually("the PR event in the issue's session", func() bool {
				return strings.Contains(w.receivedBy(issue.SessionID), "Widget PR without its own checkout")
			})
			require.Equal(t, 1, w.spawns())
			require.Equal(t, 1, w.count("session.pr_linked"))
			require.Equal(t, sessions.StatusActive, w.status(n))
		})
	}
}

// Under the default sessionPerPr (cross-repository) a same-repository PR
// never splits off: its events go into the issue's session, nothing is
// declined, the link is recorded.
func TestSameRepoPRUnderDefaultModeGoesToIssueSession(t *testing.T) {
	w := newWorld(t, nil)
	w.openLabeled()
	w.waitIdle()
	issue, _ := w.record("github:octo/demo#1")
	w.pushBranch("feature-widget")
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "A same-repo widget PR", Body: "Fixes #1", Head: "feature-widget"})
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the PR event in the issue's session", func() bool { return strings.Contains(w.receivedBy(issue.SessionID), "A same-repo widget PR") })
	require.Equal(t, 0, w.count("session.pr_session_declined"))
	require.Equal(t, 0, w.count("session.pr_spawned"))
	require.Equal(t, 1, w.count("session.pr_linked"))

	// The linkage survives the PR's body losing its closing keyword: a
	// comment on the PR still reaches the issue's session.
	_, err = w.sim.Comment(repoFull, pr.Number, human, "comment on the PR after the link")
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the PR comment in the issue's session", func() bool {
		return strings.Contains(w.receivedBy(issue.SessionID), "comment on the PR after the link")
	})
	require.Equal(t, 1, w.spawns())
}

// A branch-only ref (feature/issue-99-x) whose issue GitHub does not have
// is dropped (routing.linkage_dropped) before it can spawn a ghost session;
// the answer is cached, so the second event asks GitHub nothing.
func TestBranchRefWhoseIssue404sIsDropped(t *testing.T) {
	w := newWorld(t, nil)
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Branch-named PR", Head: "feature/issue-99-x", Labels: []string{label}})
	require.NoError(t, err)
	w.waitIdle()
	require.GreaterOrEqual(t, w.count("routing.linkage_dropped"), 1, "%s", w.eventNames())
	_, ghost := w.record("github:octo/demo#99")
	require.False(t, ghost, "no session for the invented work item")
	require.False(t, w.hasTmux(sessions.TmuxName(w.item(99))))
	_, own := w.record("github:octo/demo#" + itoa(pr.Number))
	require.True(t, own, "the labeled PR itself is the work item")
	lookups := 0
	for _, r := range w.sim.Requests() {
		if r.Method == "GET" && r.Path == "/repos/octo/demo/issues/99" {
			lookups++
		}
	}
	require.Equal(t, 1, lookups, "the definite answer is cached (two events, one lookup)")
}

// A branch-derived work item that exists is kept: the labeled PR on
// feature/issue-1-x spawns issue #1's session, with the PR linked.
func TestBranchRefWhoseIssueExistsIsKept(t *testing.T) {
	w := newWorld(t, nil)
	is, err := w.sim.OpenIssue(repoFull, human, "Add a widget", "Please add a widget.")
	require.NoError(t, err)
	w.pushBranch("feature/issue-1-x")
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Branch-named PR", Head: "feature/issue-1-x", Labels: []string{label}})
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, 0, w.count("routing.linkage_dropped"))
	rec, ok := w.record("github:octo/demo#" + itoa(is.Number))
	require.True(t, ok, "the issue named by the branch got the session\n%s", w.eventNames())
	_, linked := rec.PR(w.item(pr.Number))
	require.True(t, linked, "the PR is recorded at the moment the session is spawned")
	require.Equal(t, 1, w.spawns())
}

// A 404 from the announcement (the work item named by a closing keyword
// does not exist) marks the work item missing; the session is not killed
// and the dispatch is not retried.
func TestAnnouncement404MarksWorkItemMissing(t *testing.T) {
	w := newWorld(t, landlockOnly)
	_, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Fixes a ghost", Body: "Fixes #77", Head: "feature-ghost", Labels: []string{label}})
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, 1, w.count("session.work_item_missing"), "%s", w.eventNames())
	rec, ok := w.record("github:octo/demo#77")
	require.True(t, ok)
	require.Equal(t, sessions.StatusActive, rec.Status, "the session is not killed")
	require.True(t, w.hasTmux(rec.TmuxName))
	dead, err := w.d.DeadLetters(t.Context())
	require.NoError(t, err)
	require.Empty(t, dead)
}

// innerState is a PR's inner-loop state in the work item's checkout.
func (w *world) innerState(cwd string, pr int) *graph.State {
	w.t.Helper()
	st, err := loop.NewStore(cwd, "", loop.WithStateSubPath("pr-loops/pr-"+itoa(pr))).Load(context.Background(), "issue-1")
	require.NoError(w.t, err)
	return st
}

func itoa(n int) string { return strconv.Itoa(n) }

func (w *world) harnessPIDOf(name string) int {
	w.t.Helper()
	out, err := exec.Command("tmux", "-S", w.socket, "list-panes", "-t", "="+name+":", "-F", "#{pane_pid}").Output()
	require.NoError(w.t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	require.NoError(w.t, err)
	return pid
}

// proc identifies a process by pid and start time, so a pid the kernel
// reuses (pid_max is small on busy CI machines) is not mistaken for it.
type proc struct {
	pid   int
	start string
}

// procStart reads the process's start time from /proc ("" when it is gone).
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The fields after the parenthesised command name; starttime is the
	// 22nd field overall, the 20th after ")".
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 20 || f[0] == "Z" {
		return "" // a zombie is gone for our purposes
	}
	return f[19]
}

func procOf(t testing.TB, pid int) proc {
	t.Helper()
	p := proc{pid: pid, start: procStart(pid)}
	require.NotEmpty(t, p.start, "process %d is running", pid)
	return p
}

// alive reports whether the very process still runs.
func (p proc) alive() bool { return procStart(p.pid) == p.start }

// An existence check that gets no definite answer (here a 403) keeps the
// ref — refusing real work on a hiccup is worse than a rare ghost — and
// is not cached.
func TestBranchRefUnverifiableIsKept(t *testing.T) {
	w := newWorld(t, nil)
	w.sim.InjectFault(githubsim.Fault{Method: "GET", PathContains: "/issues/99", Status: 403})
	w.pushBranch("feature/issue-99-x")
	_, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Branch-named PR", Head: "feature/issue-99-x", Labels: []string{label}})
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, 0, w.count("routing.linkage_dropped"))
	_, kept := w.record("github:octo/demo#99")
	require.True(t, kept, "the unverifiable work item keeps its place\n%s", w.eventNames())
	lookups := 0
	for _, r := range w.sim.Requests() {
		if r.Method == "GET" && r.Path == "/repos/octo/demo/issues/99" {
			lookups++
		}
	}
	require.Equal(t, 2, lookups, "no definite answer, nothing cached")
}

// newRemote makes a bare repository <base>/remote/<full>.git with main and
// the given branches, registers it in githubsim and as the world's clone
// URL for full.
func (w *world) newRemote(full string, branches ...string) {
	w.t.Helper()
	base := w.t.TempDir()
	remote := filepath.Join(base, "remote", full+".git")
	seed := filepath.Join(base, "seed")
	require.NoError(w.t, os.MkdirAll(seed, 0o755))
	git(w.t, seed, "init", "-q", "-b", "main")
	require.NoError(w.t, os.WriteFile(filepath.Join(seed, "README.md"), []byte(full+"\n"), 0o644))
	git(w.t, seed, "add", ".")
	git(w.t, seed, "commit", "-q", "-m", "init")
	for _, b := range branches {
		git(w.t, seed, "checkout", "-q", "-b", b, "main")
		require.NoError(w.t, os.WriteFile(filepath.Join(seed, "lib.txt"), []byte(b+"\n"), 0o644))
		git(w.t, seed, "add", ".")
		git(w.t, seed, "commit", "-q", "-m", b)
	}
	git(w.t, seed, "checkout", "-q", "main")
	git(w.t, base, "clone", "-q", "--bare", seed, remote)
	require.NoError(w.t, w.sim.AddRepo(full, githubsim.RepoOptions{CloneURL: "file://" + remote}))
	if w.remotes == nil {
		w.remotes = map[string]string{}
	}
	w.remotes[full] = remote
}

// Under the default sessionPerPr (cross-repository), a PR in another
// repository that closes the work item gets its own session, in a checkout
// of that repository on the PR's head branch.
func TestCrossRepoPRGetsOwnSessionByDefault(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) {
		landlockOnly(c)
		c.Repositories = []string{repoFull, "octo/lib"}
	})
	w.newRemote("octo/lib", "lib-widget")
	n := w.openLabeled()
	w.waitIdle()
	issue, _ := w.record("github:octo/demo#1")
	pr, err := w.sim.OpenPullRequestWith("octo/lib", githubsim.PullRequest{Author: human, Title: "Library support for the widget", Body: "Fixes octo/demo#1", Head: "lib-widget"})
	require.NoError(t, err)
	w.waitIdle()
	ep, ok := w.record("github:octo/lib#" + itoa(pr.Number))
	require.True(t, ok, "%s", w.eventNames())
	require.Equal(t, w.item(n), ep.Parent)
	require.Equal(t, "loop-github-octo-lib-"+itoa(pr.Number), ep.TmuxName)
	require.True(t, w.hasTmux(ep.TmuxName))
	require.Contains(t, ep.Cwd, filepath.Join("octo", "lib"))
	require.FileExists(t, filepath.Join(ep.Cwd, "lib.txt"), "a checkout of the other repository's head branch")
	w.eventually("the spawn prompt in the PR's session", func() bool {
		return strings.Contains(w.receivedBy(ep.SessionID), "Library support for the widget")
	})
	require.NotContains(t, w.receivedBy(issue.SessionID), "Library support for the widget")
	require.Equal(t, 0, w.count("session.pr_session_declined"))
}

// Closing the work item ends its PRs' own sessions too (kept for a
// post-mortem with the harness terminated, checkouts removed); a cleanup
// afterwards removes their records.
func TestClosingWorkItemEndsItsPRSessions(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) {
		landlockOnly(c)
		c.Routing.Tmux.SessionPerPr = loop.SessionPerPrAlways
	})
	n := w.openLabeled()
	w.waitIdle()
	w.pushBranch("feature-widget")
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Add the widget", Body: "Fixes #1", Head: "feature-widget"})
	require.NoError(t, err)
	w.waitIdle()
	prRef := "github:octo/demo#" + itoa(pr.Number)
	ep, ok := w.record(prRef)
	require.True(t, ok)
	pid := procOf(t, w.harnessPIDOf(ep.TmuxName))

	require.NoError(t, w.sim.CloseIssue(repoFull, n, human))
	w.waitIdle()
	require.Equal(t, sessions.StatusClosed, w.status(n))
	ep, _ = w.record(prRef)
	require.Equal(t, sessions.StatusClosed, ep.Status, "the PR's session ends with its work item")
	require.True(t, w.hasTmux(ep.TmuxName), "kept for a post-mortem")
	w.eventually("the PR's harness to be gone", func() bool { return !pid.alive() })
	require.NoDirExists(t, ep.Cwd)

	_, err = w.sim.Comment(repoFull, n, human, "the-loop cleanup")
	require.NoError(t, err)
	w.waitIdle()
	_, ok = w.record(prRef)
	require.False(t, ok, "cleanup removes the PR's record\n%s", w.eventNames())
	require.False(t, w.hasTmux(ep.TmuxName))
}

// The session that opened a PR links it (`loopctl sessions link-pr`, over
// the control socket), so a comment on a PR that names no work item still
// comes home; before the link it was dropped.
func TestLinkPROverTheSocketBringsItsCommentsHome(t *testing.T) {
	w := newWorld(t, nil)
	n := w.openLabeled()
	w.waitIdle()
	issue, _ := w.record("github:octo/demo#1")
	pr, err := w.sim.OpenPullRequest(repoFull, human, "Spec PR", "The spec for the widget.")
	require.NoError(t, err)
	_, err = w.sim.Comment(repoFull, pr.Number, human, "a comment before the link")
	require.NoError(t, err)
	w.waitIdle()
	require.NotContains(t, w.received(), "a comment before the link", "nothing ties the PR to the work item yet")

	c := api.NewSocketClient(w.d.ControlSocket())
	ctx := context.Background()
	var res api.LinkPRResult
	require.NoError(t, c.Do(ctx, "POST", "/sessions/link-pr", nil, api.LinkPRRequest{Ref: w.item(n).String(), PullRequest: "#" + itoa(pr.Number)}, &res))
	require.True(t, res.Linked)
	require.Equal(t, "github:octo/demo#"+itoa(pr.Number), res.PullRequest)
	require.NoError(t, c.Do(ctx, "POST", "/sessions/link-pr", nil, api.LinkPRRequest{Ref: w.item(n).String(), PullRequest: itoa(pr.Number)}, &res))
	require.False(t, res.Linked, "linking twice is a no-op")
	_, err = c.Raw(ctx, "POST", "/sessions/link-pr", nil, api.LinkPRRequest{Ref: w.item(n).String(), PullRequest: "not a pr"})
	require.Error(t, err)
	_, err = c.Raw(ctx, "POST", "/sessions/link-pr", nil, api.LinkPRRequest{Ref: "github:octo/demo#404", PullRequest: "#1"})
	require.Error(t, err, "no session to link to")

	_, err = w.sim.Comment(repoFull, pr.Number, human, "a comment after the link")
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the PR comment in the issue's session", func() bool {
		return strings.Contains(w.receivedBy(issue.SessionID), "a comment after the link")
	})
	require.Equal(t, 1, w.spawns())
}

// When the PR's own session cannot be spawned (here a stranger's tmux
// session holds its name), the event is pasted into the work item's
// session instead; nothing is spawned over the stranger.
func TestPRSpawnFailureFallsBackToIssueSession(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) {
		landlockOnly(c)
		c.Routing.Tmux.SessionPerPr = loop.SessionPerPrAlways
	})
	w.openLabeled()
	w.waitIdle()
	issue, _ := w.record("github:octo/demo#1")
	w.pushBranch("feature-widget")
	// The PR will be #2; occupy its session name.
	name := sessions.TmuxName(w.item(2))
	require.NoError(t, exec.Command("tmux", "-S", w.socket, "new-session", "-d", "-s", name, "sleep", "600").Run())
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Widget PR whose session cannot start", Body: "Fixes #1", Head: "feature-widget"})
	require.NoError(t, err)
	require.Equal(t, 2, pr.Number)
	w.waitIdle()
	require.Equal(t, 1, w.count("session.pr_spawn_failed"), "%s", w.eventNames())
	w.eventually("the PR event in the issue's session", func() bool {
		return strings.Contains(w.receivedBy(issue.SessionID), "Widget PR whose session cannot start")
	})
	_, own := w.record("github:octo/demo#2")
	require.False(t, own, "no record left for a session that never started")
	require.Equal(t, 1, w.spawns())
	out, err := exec.Command("tmux", "-S", w.socket, "list-panes", "-t", "="+name+":", "-F", "#{pane_current_command}").Output()
	require.NoError(t, err)
	require.Equal(t, "sleep", strings.TrimSpace(string(out)), "the stranger's session is untouched")
}

// A linked PR merged while loopd was down is caught by the reconcile pass
// at start: the PR's own session ends, the work item's stays.
func TestReconcileCatchesAPRMergedWhileDown(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) { c.Routing.Tmux.SessionPerPr = loop.SessionPerPrAlways })
	n := w.openLabeled()
	w.waitIdle()
	w.pushBranch("feature-widget")
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Add the widget", Body: "Fixes #1", Head: "feature-widget"})
	require.NoError(t, err)
	w.waitIdle()
	prRef := "github:octo/demo#" + itoa(pr.Number)
	_, ok := w.record(prRef)
	require.True(t, ok)
	w.stop()
	require.NoError(t, w.sim.MergePullRequest(repoFull, pr.Number, human))
	require.NoError(t, w.sim.WaitDeliveries(context.Background()))
	w.cfg.ReconcileInterval = 0 // once, at start
	w.start()
	w.eventually("the PR's session closed by the reconcile pass", func() bool {
		ep, _ := w.record(prRef)
		return ep.Status == sessions.StatusClosed
	})
	w.waitIdle()
	require.Equal(t, sessions.StatusActive, w.status(n), "the work item's session stays open")
}

// A PR from a fork whose head branch is called main gets its own checkout
// of the fork's code — refs/pull/<n>/head as pr-<n> — never the base
// repository's main.
func TestForkPRChecksOutThePullHead(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) { c.Routing.Tmux.SessionPerPr = loop.SessionPerPrAlways })
	w.openLabeled()
	w.waitIdle()
	// What GitHub does when a fork opens PR #2: the base repository gets
	// refs/pull/2/head.
	w.pushBranch("fork-work")
	git(t, w.remote, "update-ref", "refs/pull/2/head", "refs/heads/fork-work")
	git(t, w.remote, "update-ref", "-d", "refs/heads/fork-work")
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Widget from a fork", Body: "Fixes #1", Head: "main", HeadRepo: "mallory/demo"})
	require.NoError(t, err)
	require.Equal(t, 2, pr.Number)
	w.waitIdle()
	ep, ok := w.record("github:octo/demo#2")
	require.True(t, ok, "%s", w.eventNames())
	out, err := exec.Command("git", "-C", ep.Cwd, "rev-parse", "--abbrev-ref", "HEAD").Output()
	require.NoError(t, err)
	require.Equal(t, "pr-2", strings.TrimSpace(string(out)))
	require.FileExists(t, filepath.Join(ep.Cwd, "widget.txt"), "the fork's commit, not the base's main")
	issue, _ := w.record("github:octo/demo#1")
	link, _ := issue.PR(w.item(2))
	require.True(t, link.Fork)
}

// A PR once linked to a work item that has since closed can become a work
// item of its own; its later events reach its own session (the stale link
// does not send them to the closed work item, nor respawn over the live
// session).
func TestPRLinkedToAClosedWorkItemCanBeItsOwnWorkItem(t *testing.T) {
	w := newWorld(t, nil)
	n := w.openLabeled()
	w.waitIdle()
	pr, err := w.sim.OpenPullRequest(repoFull, human, "Spec PR", "The spec for the widget.")
	require.NoError(t, err)
	w.waitIdle()
	c := api.NewSocketClient(w.d.ControlSocket())
	var res api.LinkPRResult
	require.NoError(t, c.Do(context.Background(), "POST", "/sessions/link-pr", nil, api.LinkPRRequest{Ref: w.item(n).String(), PullRequest: "#" + itoa(pr.Number)}, &res))
	require.NoError(t, w.sim.CloseIssue(repoFull, n, human))
	w.waitIdle()
	require.Equal(t, sessions.StatusClosed, w.status(n))

	require.NoError(t, w.sim.AddLabel(repoFull, pr.Number, human, label))
	w.waitIdle()
	own, ok := w.record("github:octo/demo#" + itoa(pr.Number))
	require.True(t, ok, "the labeled PR is a work item of its own\n%s", w.eventNames())
	require.True(t, own.Parent.IsZero())
	_, err = w.sim.Comment(repoFull, pr.Number, human, "a comment for the PR's own session")
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the comment in the PR's own session", func() bool {
		return strings.Contains(w.receivedBy(own.SessionID), "a comment for the PR's own session")
	})
	require.Equal(t, 2, w.spawns())
	dead, err := w.d.DeadLetters(context.Background())
	require.NoError(t, err)
	require.Empty(t, dead)
	require.Equal(t, sessions.StatusClosed, w.status(n))
}

// A PR's own session whose harness died is resumed, in the PR's checkout,
// by the PR's next event.
func TestDeadPRSessionIsResumedInItsCheckout(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) {
		landlockOnly(c)
		c.Routing.Tmux.SessionPerPr = loop.SessionPerPrAlways
	})
	w.openLabeled()
	w.waitIdle()
	w.pushBranch("feature-widget")
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Add the widget", Body: "Fixes #1", Head: "feature-widget"})
	require.NoError(t, err)
	w.waitIdle()
	ep, ok := w.record("github:octo/demo#" + itoa(pr.Number))
	require.True(t, ok)
	require.NoError(t, syscall.Kill(w.harnessPIDOf(ep.TmuxName), syscall.SIGKILL))
	w.eventually("the PR's pane to die", func() bool {
		out, _ := exec.Command("tmux", "-S", w.socket, "list-panes", "-t", "="+ep.TmuxName+":", "-F", "#{pane_dead}").Output()
		return strings.TrimSpace(string(out)) == "1"
	})
	_, err = w.sim.Comment(repoFull, pr.Number, human, "a comment after the PR session died")
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the comment in the resumed PR session", func() bool {
		return strings.Contains(w.receivedBy(ep.SessionID), "a comment after the PR session died")
	})
	argv, _ := os.ReadFile(filepath.Join(w.claude, "argv.log"))
	require.Contains(t, string(argv), ep.Cwd+"\tresume\t"+ep.SessionID+"\tissue-1\t", "resumed in the PR's checkout, for work item issue-1")
	require.Equal(t, []any{"github:octo/demo#" + itoa(pr.Number)}, w.eventField("dispatch.respawned", "endpoint"))
}

// A paused work item holds delivery for its PRs' own sessions too.
func TestPausedWorkItemHoldsItsPRSessions(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) { c.Routing.Tmux.SessionPerPr = loop.SessionPerPrAlways })
	n := w.openLabeled()
	w.waitIdle()
	w.pushBranch("feature-widget")
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Add the widget", Body: "Fixes #1", Head: "feature-widget"})
	require.NoError(t, err)
	w.waitIdle()
	ep, ok := w.record("github:octo/demo#" + itoa(pr.Number))
	require.True(t, ok)
	_, err = w.sim.Comment(repoFull, n, human, "the-loop pause")
	require.NoError(t, err)
	w.waitIdle()
	_, err = w.sim.Comment(repoFull, pr.Number, human, "held while paused")
	require.NoError(t, err)
	w.waitIdle()
	_, err = w.sim.Comment(repoFull, n, human, "the-loop resume")
	require.NoError(t, err)
	_, err = w.sim.Comment(repoFull, pr.Number, human, "delivered after resume")
	require.NoError(t, err)
	w.waitIdle()
	w.eventually("the comment after resume in the PR's session", func() bool {
		return strings.Contains(w.receivedBy(ep.SessionID), "delivered after resume")
	})
	require.NotContains(t, w.received(), "held while paused")
}

// A PR's inner loop waiting at its human gate (pr-approval) is consulted
// before the PR's event is rendered: an authorized "Approved" on the PR
// completes the inner loop, and the PR's session hears the verdict.
func TestPRInnerGateConsultedFirst(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) { c.Routing.Tmux.SessionPerPr = loop.SessionPerPrAlways })
	n := w.openLabeled()
	w.waitIdle()
	issue, _ := w.record("github:octo/demo#1")
	w.pushBranch("feature-widget")
	pr, err := w.sim.OpenPullRequestWith(repoFull, githubsim.PullRequest{Author: human, Title: "Add the widget", Body: "Fixes #1", Head: "feature-widget"})
	require.NoError(t, err)
	w.waitIdle()
	ep, ok := w.record("github:octo/demo#" + itoa(pr.Number))
	require.True(t, ok)
	require.Equal(t, "implementation", w.innerState(issue.Cwd, pr.Number).CurrentNode)

	// The agent's work is done up to the human gate: the execution log the
	// inner loop's nodes check (loopd's recompute reads it, docs/decisions.md
	// §23), and the pointer forced there.
	require.NoError(t, os.WriteFile(filepath.Join(issue.Cwd, "docs", "specs", "issue-"+itoa(n), "execution-log.md"),
		[]byte("# Execution log\n\n## Review cycles\n\n- cycle 1: no findings\n\n## Security review (gate)\n\n- no new trust boundary\n\n## Pull requests\n\n- #"+itoa(pr.Number)+"\n"), 0o644))
	rt, err := loop.Open(issue.Cwd, loop.Options{WorkItem: "issue-" + itoa(n), PR: pr.Number, AuthorizedUsers: w.cfg.Routing.AuthorizedUsers})
	require.NoError(t, err)
	_, err = rt.Force(context.Background(), "issue-"+itoa(n), graph.ForceRequest{To: "pr-approval", Reason: "test: the agent's nodes are done", Actor: "test"})
	require.NoError(t, err)
	require.Equal(t, "pr-approval", w.innerState(issue.Cwd, pr.Number).CurrentNode)

	_, err = w.sim.Comment(repoFull, pr.Number, stranger, "Approved")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, "pr-approval", w.innerState(issue.Cwd, pr.Number).CurrentNode, "a stranger's approval changes nothing")

	_, err = w.sim.Comment(repoFull, pr.Number, human, "Approved")
	require.NoError(t, err)
	w.waitIdle()
	require.Equal(t, "complete", w.innerState(issue.Cwd, pr.Number).CurrentNode)
	w.eventually("the verdict in the PR's session", func() bool {
		return strings.Contains(w.receivedBy(ep.SessionID), "the gate was consulted with this event first")
	})
	require.Equal(t, "phase-selection", w.state(n).CurrentNode, "the work item's own loop did not move")
}
