package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
)

// verify-tests runs the repository's test command where running the
// repository's code is allowed, and records what happened; everywhere else
// it reads that record (docs/graph.md, "Tests that run"):
//
//   - live, with hc.RepoCommands (loopctl graph complete, in the agent's
//     sandbox): runs the command under a timeout, writes the run to
//     TestRunsFile and a line to the execution log, and passes or blocks on
//     the exit code;
//   - under check (never a subprocess) and live without RepoCommands (loopd,
//     which never executes repository code): a recorded run of the same
//     command at this node decides — failed blocks, passed passes. With no
//     such record check reports skip (it cannot know), and loopd waits for
//     the agent's claim to run the tests.
//
// The command is the reference's `with: command`, else the harness
// config's verification.testCommand; with neither, the hook skips.

// TestRunsFile is the spec-directory file verify-tests records its runs in,
// one per loop, work item and node (the latest).
const TestRunsFile = "test-runs.json"

// maxTestRunsBytes bounds the record file a hook reads: the agent can
// write it, and a run keeps only a short tail.
const maxTestRunsBytes = 1 << 20

// Tail bounds: the lines kept of a run's output, and the characters of each.
const (
	tailKeep    = 40
	tailShow    = 20
	tailLineMax = 400
)

// TestRun is one recorded run of a test command.
type TestRun struct {
	Loop     string   `json:"loop"`
	WorkItem string   `json:"workItem"`
	Node     string   `json:"node"`
	Command  []string `json:"command"`
	ExitCode int      `json:"exitCode"`
	// Error says why the command produced no exit code of its own
	// ("timed out", "not found", "could not start").
	Error      string `json:"error,omitempty"`
	DurationMs int64  `json:"durationMs"`
	// Commit, Tree and Dirty say what the command ran on: HEAD, its tree,
	// and whether tracked files differed from it.
	Commit string `json:"commit,omitempty"`
	Tree   string `json:"tree,omitempty"`
	Dirty  bool   `json:"dirty,omitempty"`
	At     string `json:"at"`
	// Tail is the output's last lines (stdout, then stderr).
	Tail []string `json:"tail"`
}

// Passed reports whether the run passed.
func (r TestRun) Passed() bool { return r.Error == "" && r.ExitCode == 0 }

// testRuns is TestRunsFile's content.
type testRuns struct {
	Version int       `json:"version"`
	Runs    []TestRun `json:"runs"`
}

func verifyTests(ctx context.Context, hc *graph.HookContext) graph.HookResult {
	argv, key, err := testCommand(hc)
	if err != nil {
		r := graph.Block(graph.Finding(fmt.Sprintf("verify-tests at %s: %s cannot be parsed (%v); write it as words without shell syntax, e.g. \"go test ./...\"", nodeID(hc), key, err), ""))
		r.Retriable = false
		return r
	}
	if argv == nil {
		return graph.Skip("no test command: set verification.testCommand in .the-loop/harness-config.yaml")
	}
	if hc.Mode == graph.ModeCheck || hc.RepoCommands == nil {
		return fromRecord(hc, argv)
	}
	return runTests(ctx, hc, argv)
}

// testCommand returns the command to run and the key it came from (nil
// when none is declared).
func testCommand(hc *graph.HookContext) ([]string, string, error) {
	key, v := "with.command", hc.Params["command"]
	if !hc.Params.Has("command") {
		key, v = "verification.testCommand", hc.Config["testCommand"]
		if v == nil {
			return nil, key, nil
		}
	}
	argv, err := commandArgv(v)
	if err == nil && (len(argv) == 0 || strings.TrimSpace(argv[0]) == "") {
		err = errors.New("it is empty")
	}
	return argv, key, err
}

func nodeID(hc *graph.HookContext) string {
	if hc.Node == nil {
		return "?"
	}
	return hc.Node.ID
}

// runKey identifies a run: the loop, the work item (a PR loop's ref names
// its pull request) and the node.
func runKey(hc *graph.HookContext) (loop, item, node string) {
	if hc.Graph != nil {
		loop = hc.Graph.Name
	}
	item = hc.WorkItem.Ref
	if item == "" {
		item = hc.WorkItem.ID
	}
	return loop, item, nodeID(hc)
}

// fromRecord decides from the recorded run of argv at this node.
func fromRecord(hc *graph.HookContext, argv []string) graph.HookResult {
	run, found := recordedRun(hc, argv)
	shown := strings.Join(argv, " ")
	if !found {
		if hc.Mode == graph.ModeCheck {
			return graph.Skip("no recorded test run of " + shown + " at this node: check never runs a program; `loopctl graph complete` runs the tests")
		}
		return graph.Wait("the tests (" + shown + ") have not run at this node: the agent's `loopctl graph complete` runs them (the daemon never runs a repository's code)")
	}
	var r graph.HookResult
	if run.Passed() {
		r = graph.Pass(map[string]any{"command": shown, "commit": run.Commit})
		r.Messages = []graph.Message{{Text: fmt.Sprintf("tests passed at the last recorded run (%s) on %s at %s", shown, revision(run), run.At), Path: hc.Artifacts.Path(TestRunsFile), Severity: graph.SeverityInfo}}
	} else {
		msgs := []graph.Message{graph.Finding(fmt.Sprintf("tests failed at the last recorded run (%s), %s, on %s at %s; fix them and claim the node again (`loopctl graph complete` runs them anew)", shown, failure(run), revision(run), run.At), hc.Artifacts.Path(TestRunsFile))}
		r = graph.Block(append(msgs, tailMessages(run.Tail, tailShow)...)...)
	}
	r.FromRecord = true
	return r
}

// recordedRun finds the latest recorded run of argv at this node. An
// unreadable or oversized file records nothing.
func recordedRun(hc *graph.HookContext, argv []string) (TestRun, bool) {
	runs := readRuns(hc.Artifacts)
	loop, item, node := runKey(hc)
	for _, r := range runs.Runs {
		if r.Loop == loop && r.WorkItem == item && r.Node == node {
			if !equalArgv(r.Command, argv) {
				return TestRun{}, false
			}
			return r, true
		}
	}
	return TestRun{}, false
}

func readRuns(a graph.Artifacts) testRuns {
	var runs testRuns
	if a == nil {
		return runs
	}
	b, err := readArtifact(a, TestRunsFile, maxTestRunsBytes)
	if err != nil || json.Unmarshal(b, &runs) != nil {
		return testRuns{}
	}
	return runs
}

func equalArgv(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func revision(r TestRun) string {
	if r.Commit == "" {
		return "an unknown commit"
	}
	s := "commit " + short(r.Commit)
	if r.Dirty {
		s += " with uncommitted changes"
	}
	return s
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func failure(r TestRun) string {
	if r.Error != "" {
		return r.Error
	}
	return fmt.Sprintf("exit %d", r.ExitCode)
}

// runTests runs argv through the repository runner, records the run, and
// passes or blocks on it.
func runTests(ctx context.Context, hc *graph.HookContext, argv []string) graph.HookResult {
	timeout := hc.Params.Duration("timeoutSeconds", hc.Config.Duration("testTimeout", DefaultTestTimeout))
	if timeout > MaxTestTimeout {
		timeout = MaxTestTimeout
	}
	loop, item, node := runKey(hc)
	run := TestRun{Loop: loop, WorkItem: item, Node: node, Command: argv, At: hc.Now.UTC().Format(time.RFC3339)}
	run.Commit, run.Tree, run.Dirty = headRevision(ctx, hc.Commands)

	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	started := time.Now()
	res, err := hc.RepoCommands.Run(cctx, argv, "")
	run.DurationMs = time.Since(started).Milliseconds()
	run.ExitCode = res.ExitCode
	run.Tail = outputTail(res.Stdout, res.Stderr, tailKeep)
	shown := strings.Join(argv, " ")
	notFound := false
	switch {
	case errors.Is(err, graph.ErrCommandNotFound):
		run.Error, notFound = "not found", true
	case cctx.Err() != nil:
		run.Error = "timed out after " + timeout.String()
	case err != nil:
		run.Error = "could not start: " + errorKind(err)
	}

	var r graph.HookResult
	switch {
	case notFound:
		r = graph.Block(graph.Finding("test command not found: "+argv[0]+"; install it or fix verification.testCommand in .the-loop/harness-config.yaml", ""))
		r.Retriable = false
	case run.Error != "":
		r = graph.Block(append([]graph.Message{graph.Finding(fmt.Sprintf("tests %s (%s); make them finish within the limit or raise verification.timeout", run.Error, shown), "")}, tailMessages(run.Tail, tailShow)...)...)
	case run.ExitCode != 0:
		r = graph.Block(append([]graph.Message{graph.Finding(fmt.Sprintf("tests failed (%s), exit %d", shown, run.ExitCode), "")}, tailMessages(run.Tail, tailShow)...)...)
	default:
		r = graph.Pass(map[string]any{"command": shown, "commit": run.Commit})
	}
	if werr := recordRun(hc, run); werr != nil {
		r.Degraded = "the test run could not be recorded in " + hc.Artifacts.Path(TestRunsFile) + ": " + errorKind(werr)
	}
	return r
}

// headRevision asks git (theloop's own runner, not the repository's) what
// the command runs on. Unknown stays empty.
func headRevision(ctx context.Context, c graph.Commands) (commit, tree string, dirty bool) {
	if c == nil {
		return "", "", false
	}
	res, err := c.Run(ctx, []string{"git", "rev-parse", "HEAD", "HEAD^{tree}"}, "")
	if err != nil || res.ExitCode != 0 {
		return "", "", false
	}
	lines := strings.Fields(string(res.Stdout))
	if len(lines) != 2 {
		return "", "", false
	}
	commit, tree = lines[0], lines[1]
	st, err := c.Run(ctx, []string{"git", "status", "--porcelain", "--untracked-files=no"}, "")
	dirty = err == nil && st.ExitCode == 0 && strings.TrimSpace(string(st.Stdout)) != ""
	return commit, tree, dirty
}

// recordRun replaces this node's run in TestRunsFile and notes the run in
// the execution log when the work item keeps one.
func recordRun(hc *graph.HookContext, run TestRun) error {
	// The output is a program's: a test that prints its environment must
	// not commit a credential (the run's verdict is its exit code and
	// tree, never its text).
	run.Error = scrubbed(hc.Artifacts, run.Error)
	for i, l := range run.Tail {
		run.Tail[i] = scrubbed(hc.Artifacts, l)
	}
	runs := readRuns(hc.Artifacts)
	runs.Version = 1
	kept := runs.Runs[:0]
	for _, r := range runs.Runs {
		if r.Loop != run.Loop || r.WorkItem != run.WorkItem || r.Node != run.Node {
			kept = append(kept, r)
		}
	}
	runs.Runs = append(kept, run)
	b, err := json.MarshalIndent(runs, "", "  ")
	if err != nil {
		return err
	}
	if err := hc.Artifacts.WriteFile(TestRunsFile, append(b, '\n')); err != nil {
		return err
	}
	if !isFile(hc.Artifacts, ExecutionLog) {
		return nil
	}
	verdict := "passed"
	if !run.Passed() {
		verdict = "failed (" + failure(run) + ")"
	}
	entry := fmt.Sprintf("\n### %s — tests at %s: %s\n\n- **Command:** `%s`\n- **Ran on:** %s\n- **Duration:** %s\n- **Record:** %s\n",
		hc.Now.UTC().Format("2006-01-02"), run.Node, verdict, strings.Join(run.Command, " "), revision(run),
		(time.Duration(run.DurationMs) * time.Millisecond).String(), TestRunsFile)
	return hc.Artifacts.AppendFile(ExecutionLog, []byte(entry))
}

// outputTail keeps the last n non-empty lines of stdout then stderr, each
// cut to tailLineMax bytes (on a rune boundary).
func outputTail(stdout, stderr []byte, n int) []string {
	var lines []string
	for _, src := range [][]byte{stdout, stderr} {
		for _, l := range strings.Split(string(src), "\n") {
			l = strings.TrimRight(l, " \r\t")
			if strings.TrimSpace(l) == "" {
				continue
			}
			if len(l) > tailLineMax {
				cut := tailLineMax
				for cut > 0 && !isRuneStart(l[cut]) {
					cut--
				}
				l = l[:cut] + "…"
			}
			lines = append(lines, strings.ToValidUTF8(l, "�"))
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// tailMessages turns the last n tail lines into info messages. Test output
// is the repository's own text, produced by its declared command — not
// ticket text.
func tailMessages(tail []string, n int) []graph.Message {
	if len(tail) > n {
		tail = tail[len(tail)-n:]
	}
	out := make([]graph.Message, len(tail))
	for i, l := range tail {
		out[i] = graph.Message{Text: l, Severity: graph.SeverityInfo}
	}
	return out
}
