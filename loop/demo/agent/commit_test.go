package agent

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/run"
)

// stepClaimer stands at node "write" until claimed, then at a human gate.
type stepClaimer struct{ claims int }

func (c *stepClaimer) Current(context.Context, string) (Position, error) {
	if c.claims > 0 {
		return Position{Node: "gate", Human: true}, nil
	}
	return Position{Node: "write"}, nil
}

func (c *stepClaimer) Complete(context.Context, string) (*graph.Claim, error) {
	c.claims++
	return &graph.Claim{Node: "write", Outcome: "done", Moved: true, CurrentNode: "gate"}, nil
}

// flakyGit runs the real git, except that the first failAdds `git add`
// calls fail as git does when a file it listed vanishes; on every call it
// checks that the work item's state lock is held (by the agent).
type flakyGit struct {
	t          *testing.T
	store      *loop.FileStore
	failAdds   int
	adds       int
	lockedRuns int
}

func (f *flakyGit) Run(ctx context.Context, c run.Cmd) (run.Result, error) {
	if _, err := f.store.Lock(ctx, "issue-1", time.Millisecond); errors.Is(err, graph.ErrBusy) {
		f.lockedRuns++
	} else if err == nil {
		f.t.Errorf("git %v ran while graph-state.lock was free: a daemon save could interleave", c.Args)
	}
	if strings.Contains(strings.Join(c.Args, " "), " add -A") {
		f.adds++
		if f.adds <= f.failAdds {
			return run.Result{}, errors.New("git: exit status 128: fatal: unable to stat 'docs/specs/issue-1/.graph-state.json.tmp-1': No such file or directory")
		}
	}
	return run.Exec{}.Run(ctx, c)
}

func newCommitAgent(t *testing.T, failAdds int) (*Agent, *flakyGit, *stepClaimer, *bytes.Buffer) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed; this test needs the real git")
	}
	// Short: the failure line it checks is cut at a width, and a long
	// $TMPDIR would cut away the git message the test looks for.
	dir := shortdir.New(t)
	require.NoError(t, InitRepo(context.Background(), dir, "demo", "widgets", "dana"))
	g := &flakyGit{t: t, store: loop.NewStore(dir, "docs/specs"), failAdds: failAdds}
	c := &stepClaimer{}
	var out bytes.Buffer
	a := &Agent{Dir: dir, SpecDir: "docs/specs", WorkItem: "issue-1", Claimer: c, Out: &out, runner: g,
		Script: map[string][]Turn{"write": {
			{Say: "writes requirements.md", Files: map[string]string{"requirements.md": "# Requirements\n"}},
			{Say: "second turn", Files: map[string]string{"requirements.md": "# Requirements v2\n"}},
		}}}
	return a, g, c, &out
}

func gitLog(t *testing.T, dir string) string {
	t.Helper()
	b, err := exec.Command("git", "-C", dir, "log", "--format=%s").Output()
	require.NoError(t, err)
	return string(b)
}

func TestCommitRetriesAFailedGitAddVisibly(t *testing.T) {
	old := gitRetryDelay
	gitRetryDelay = time.Millisecond
	t.Cleanup(func() { gitRetryDelay = old })

	a, g, c, out := newCommitAgent(t, 1)
	require.NoError(t, a.Wake(context.Background()))
	require.Contains(t, out.String(), "✗ git add in ")
	require.Contains(t, out.String(), "unable to stat")
	require.Contains(t, out.String(), "retrying in 1ms (attempt 2 of 3)")
	require.Equal(t, 1, c.claims)
	require.Contains(t, gitLog(t, a.Dir), "docs(issue-1): writes requirements.md")
	require.Equal(t, 3, g.lockedRuns, "add (failed), add, commit: all under the state lock")
}

func TestFailedCommitIsReportedAndTheTurnIsRetried(t *testing.T) {
	old := gitRetryDelay
	gitRetryDelay = time.Millisecond
	t.Cleanup(func() { gitRetryDelay = old })

	a, g, c, out := newCommitAgent(t, gitAttempts)
	err := a.Wake(context.Background())
	require.Error(t, err)
	require.ErrorContains(t, err, `write, turn 1 ("writes requirements.md") did not land and is not claimed; the next message retries it`)
	require.ErrorContains(t, err, "failed 3 times")
	require.ErrorContains(t, err, "unable to stat")
	require.Equal(t, 2, strings.Count(out.String(), "✗ git add"), "the two retried failures are printed; the last is returned")
	require.Zero(t, c.claims, "nothing is claimed for work that was not committed")
	require.NotContains(t, gitLog(t, a.Dir), "writes requirements.md")

	// The next message retries the same turn rather than skipping to the
	// second one.
	out.Reset()
	require.NoError(t, a.Wake(context.Background()))
	require.Equal(t, 1, c.claims)
	require.Equal(t, gitAttempts+1, g.adds)
	log := gitLog(t, a.Dir)
	require.Contains(t, log, "docs(issue-1): writes requirements.md")
	require.NotContains(t, log, "second turn")
}
