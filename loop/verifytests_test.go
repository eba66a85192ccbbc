package loop_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/run"
)

// testedGraph is the shape of the shipped implementation node: verify-tests
// at the end of its exit chain, declaring no command (the harness config
// supplies it).
const testedGraph = `name: tested
start: implementation
nodes:
  - id: implementation
    maxAttempts: 10
    exit: [verify-tests]
  - {id: done, terminal: true}
edges:
  - {from: implementation, on: pass, to: done}
`

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// testRepo is a real git repository whose harness config names a test
// command; it returns the repository and its compiled test graph.
func testRepo(t *testing.T, verification string) (string, *graph.Graph) {
	t.Helper()
	for _, p := range []string{"git", "sh", "sleep"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skip(p + " is not installed; verify-tests is tested with the real program")
		}
	}
	repo := t.TempDir()
	gitRun(t, repo, "init", "-q", "-b", "main")
	writeFile(t, repo, ".the-loop/harness-config.yaml", "version: \"0.2.0\"\n"+verification)
	writeFile(t, repo, "docs/specs/issue-3/execution-log.md", "# Execution log\n")
	gitRun(t, repo, "add", ".")
	gitRun(t, repo, "commit", "-q", "-m", "init")
	g, err := graphfile.Load("tested.yaml", []byte(testedGraph), loop.ShippedHooks())
	require.NoError(t, err)
	return repo, g
}

func readRuns(t *testing.T, repo string) []hooks.TestRun {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, "docs/specs/issue-3", hooks.TestRunsFile))
	require.NoError(t, err)
	var f struct {
		Runs []hooks.TestRun `json:"runs"`
	}
	require.NoError(t, json.Unmarshal(b, &f))
	return f.Runs
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	require.NoError(t, err)
	return strings.Count(string(b), "\n")
}

// The repository's verification.testCommand runs at a node that declares
// verify-tests — a real shell command in a real git checkout — when the
// CLI claims the node; the run (exit code, tail, command, commit and tree)
// is recorded, and check and a daemon-side runtime read the record without
// running anything.
func TestVerifyTestsRunsTheConfiguredCommand(t *testing.T) {
	repo, g := testRepo(t, `verification:
  testCommand: "sh -c 'echo ran >> runs.log; test -f ok || { echo FAIL: ok is missing; exit 3; }'"
  timeout: 60
`)
	head := gitRun(t, repo, "rev-parse", "HEAD")
	tree := gitRun(t, repo, "rev-parse", "HEAD^{tree}")
	runsLog := filepath.Join(repo, "runs.log")
	cli, err := loop.Open(repo, loop.Options{Graph: g,
		Commands:     loop.Commands{Runner: run.Exec{}, Root: repo},
		RepoCommands: loop.Commands{Runner: run.Exec{}, Root: repo}})
	require.NoError(t, err)
	// The daemon's runtime: theloop's own runner, never the repository's.
	daemon, err := loop.Open(repo, loop.Options{Graph: g, Commands: loop.Commands{Runner: run.Exec{}, Root: repo}})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = cli.Start(ctx, "issue-3")
	require.NoError(t, err)

	// Before any run: check cannot know (skip), the daemon waits for the
	// agent's claim; neither runs the command.
	rep, err := cli.Status(ctx, "issue-3", true)
	require.NoError(t, err)
	nr, _ := rep.Node("implementation")
	require.Equal(t, graph.StatusPass, nr.Status, "a skip is not a block: %+v", nr)
	step, err := daemon.Advance(ctx, "issue-3", nil)
	require.NoError(t, err)
	require.Equal(t, graph.StatusWait, step.Status, "%+v", step)
	require.Contains(t, strings.Join(step.Messages, "\n"), "the daemon never runs a repository's code")
	require.Zero(t, countLines(t, runsLog), "neither check nor the daemon ran the command")

	claim, err := cli.Complete(ctx, "issue-3", "", "agent")
	require.NoError(t, err)
	require.False(t, claim.Moved)
	msgs := strings.Join(claim.Messages, "\n")
	require.Contains(t, msgs, "tests failed (sh -c echo ran >> runs.log; test -f ok || { echo FAIL: ok is missing; exit 3; }), exit 3")
	require.Contains(t, msgs, "FAIL: ok is missing", "the output's tail comes back")
	require.Equal(t, 1, countLines(t, runsLog))
	runs := readRuns(t, repo)
	require.Len(t, runs, 1)
	r := runs[0]
	require.Equal(t, 3, r.ExitCode)
	require.Equal(t, head, r.Commit)
	require.Equal(t, tree, r.Tree)
	require.Equal(t, "implementation", r.Node)
	require.Equal(t, []string{"sh", "-c", "echo ran >> runs.log; test -f ok || { echo FAIL: ok is missing; exit 3; }"}, r.Command)
	require.Equal(t, []string{"FAIL: ok is missing"}, r.Tail)
	require.True(t, r.Dirty == false, "runs.log is untracked: tracked files are as committed")
	logged, err := os.ReadFile(filepath.Join(repo, "docs/specs/issue-3/execution-log.md"))
	require.NoError(t, err)
	require.Contains(t, string(logged), "tests at implementation: failed (exit 3)")

	// check reads the failed record: block, nothing run.
	rep, err = cli.Status(ctx, "issue-3", true)
	require.NoError(t, err)
	nr, _ = rep.Node("implementation")
	require.Equal(t, graph.StatusBlock, nr.Status)
	require.Contains(t, strings.Join(nr.Messages, "\n"), "tests failed at the last recorded run")
	step, err = daemon.Advance(ctx, "issue-3", nil)
	require.NoError(t, err)
	require.Equal(t, graph.StatusBlock, step.Status, "%+v", step)
	require.Equal(t, 1, countLines(t, runsLog), "neither check nor the daemon ran the command")

	// The same failure twice in a row escalates; a fix then lifts it: the
	// claim runs the tests anew rather than trusting the recorded failure.
	claim, err = cli.Complete(ctx, "issue-3", "", "agent")
	require.NoError(t, err)
	require.Equal(t, graph.StatusBlock, claim.Status, "%+v", claim)
	claim, err = cli.Complete(ctx, "issue-3", "", "agent")
	require.NoError(t, err)
	require.Equal(t, graph.StepEscalated, claim.Status, "%+v", claim)
	writeFile(t, repo, "ok", "")
	claim, err = cli.Complete(ctx, "issue-3", "", "agent")
	require.NoError(t, err)
	require.True(t, claim.Moved, "%+v", claim)
	require.Equal(t, 4, countLines(t, runsLog))
	runs = readRuns(t, repo)
	require.Len(t, runs, 1, "one record per node: the latest run")
	require.True(t, runs[0].Passed())
	require.True(t, runs[0].Dirty, "the spec directory's files changed since the commit")
}

// A test command that outlives verification.timeout is stopped and the
// node blocks naming the timeout and the key that sets it.
func TestVerifyTestsTimesOut(t *testing.T) {
	repo, g := testRepo(t, `verification:
  testCommand: [sleep, "30"]
  timeout: 300ms
`)
	rt, err := loop.Open(repo, loop.Options{Graph: g, RepoCommands: loop.Commands{Runner: run.Exec{}, Root: repo}})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "issue-3")
	require.NoError(t, err)
	claim, err := rt.Complete(ctx, "issue-3", "", "agent")
	require.NoError(t, err)
	require.False(t, claim.Moved)
	require.Contains(t, strings.Join(claim.Messages, "\n"), "tests timed out after 300ms (sleep 30); make them finish within the limit or raise verification.timeout")
	runs := readRuns(t, repo)
	require.Len(t, runs, 1)
	require.Equal(t, "timed out after 300ms", runs[0].Error)
	require.Empty(t, runs[0].Commit, "without theloop's own runner the revision is unknown")
}

// Without a test command anywhere the hook skips, saying which key to set.
func TestVerifyTestsSkipsWithoutACommand(t *testing.T) {
	repo, g := testRepo(t, "")
	rt, err := loop.Open(repo, loop.Options{Graph: g, RepoCommands: loop.Commands{Runner: run.Exec{}, Root: repo}})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "issue-3")
	require.NoError(t, err)
	claim, err := rt.Complete(ctx, "issue-3", "", "agent")
	require.NoError(t, err)
	require.True(t, claim.Moved, "%+v", claim)
	_, err = os.Stat(filepath.Join(repo, "docs/specs/issue-3", hooks.TestRunsFile))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// A bad verification key is named with its fix and left out.
func TestVerificationKeysAreChecked(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, warning string
		argv                []string
	}{
		{"list", "verification:\n  testCommand: [go, test, ./...]\n", "", []string{"go", "test", "./..."}},
		{"words", "verification:\n  testCommand: \"make 'unit tests'\"\n", "", []string{"make", "unit tests"}},
		{"unterminated", "verification:\n  testCommand: \"sh -c 'exit 1\"\n", "verification.testCommand: unterminated quote", nil},
		{"number", "verification:\n  testCommand: 7\n", "verification.testCommand: expected a command string or a list of strings", nil},
		{"empty", "verification:\n  testCommand: \"  \"\n", "verification.testCommand: is empty", nil},
		{"bad timeout", "verification:\n  testCommand: make\n  timeout: soon\n", "verification.timeout: expected seconds or a duration", []string{"make"}},
		{"timeout alone", "verification:\n  timeout: 10\n", "verification.timeout: set without verification.testCommand", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, warns, err := loop.ParseHarnessConfig("harness-config.yaml", []byte(tc.yaml))
			require.NoError(t, err)
			require.Equal(t, tc.argv, h.TestCommand)
			if tc.warning == "" {
				require.Empty(t, warns)
				return
			}
			require.Len(t, warns, 1)
			require.Contains(t, warns[0], tc.warning)
		})
	}
}

// A test command that prints a credential (a token-shaped one) does not
// commit it: the recorded run's tail and the execution log are scrubbed,
// and the verdict (the exit code) is the run's as before.
func TestVerifyTestsRecordsNoToken(t *testing.T) {
	token := "ghp_" + strings.Repeat("Q", 36)
	// The command assembles the token, so that only its output holds it.
	repo, g := testRepo(t, "verification:\n  testCommand: \"sh -c 'P=ghp; echo leaked ${P}_"+strings.Repeat("Q", 36)+"; exit 1'\"\n  timeout: 60\n")
	cli, err := loop.Open(repo, loop.Options{Graph: g, Scrub: loop.CredentialScrub(func(string) (string, bool) { return "", false }),
		Commands:     loop.Commands{Runner: run.Exec{}, Root: repo},
		RepoCommands: loop.Commands{Runner: run.Exec{}, Root: repo}})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = cli.Start(ctx, "issue-3")
	require.NoError(t, err)
	claim, err := cli.Complete(ctx, "issue-3", "", "agent")
	require.NoError(t, err)
	require.False(t, claim.Moved)
	runs := readRuns(t, repo)
	require.Len(t, runs, 1)
	require.Equal(t, 1, runs[0].ExitCode)
	require.Equal(t, []string{"leaked [redacted]"}, runs[0].Tail)
	for _, f := range []string{hooks.TestRunsFile, "execution-log.md", "graph-state.json"} {
		b, err := os.ReadFile(filepath.Join(repo, "docs/specs/issue-3", f))
		require.NoError(t, err)
		require.NotContains(t, string(b), token, f)
	}
}
