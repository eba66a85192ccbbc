package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/plugin"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// gateBinary is loop-gate built once for the whole package; buildErr says
// why when it could not be.
var gateBinary, buildErr = "", error(nil)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loop-gate-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gateBinary = filepath.Join(dir, "loop-gate")
	if runtime.GOOS == "windows" {
		gateBinary += ".exe"
	}
	buildErr = buildGate(gateBinary, "")
	faultDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// faultBinary is loop-gate built with the loopgate_faults tag (fault.go),
// once, on first use.
func faultBinary(t testing.TB) string {
	t.Helper()
	bin, err := buildFaultBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

var faultDir string

var buildFaultBinary = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(faultDir, "loop-gate-faults")
	return bin, buildGate(bin, "loopgate_faults")
})

// buildGate builds loop-gate the way the README installs it (stripped:
// fewer pages to fault in), with the build tags given.
func buildGate(bin, tags string) error {
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-tags", tags, "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build -tags %q ./cmd/loop-gate: %v\n%s", tags, err, out)
	}
	return nil
}

// gate is one loop-gate process's environment.
type gate struct {
	t       testing.TB
	home    string
	env     map[string]string
	workDir string
	bin     string // "": gateBinary
}

func newGate(t testing.TB) *gate {
	t.Helper()
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	home := t.TempDir()
	return &gate{t: t, home: home, env: map[string]string{
		"HOME":                home,
		"XDG_CACHE_HOME":      filepath.Join(home, "cache"),
		"THE_LOOP_STATE_ROOT": filepath.Join(home, "state"),
		"PATH":                os.Getenv("PATH"),
	}}
}

type result struct {
	code           int
	stdout, stderr string
	// unverified counts the unverified-decisions warning lines.
	unverified int
}

func (g *gate) run(payload []byte, args ...string) result {
	g.t.Helper()
	return g.exec(payload, exec.Command(g.binary(), args...))
}

// runAsInstalled runs the Stop hook as Claude Code does: the command line
// the plugin and `loopctl install` write, through a shell. A hook ended by
// a signal shows as the shell's 128+n.
func (g *gate) runAsInstalled(payload []byte, harness string) result {
	g.t.Helper()
	return g.exec(payload, exec.Command("sh", "-c", plugin.GateCommand(g.binary(), harness)))
}

// withBinary is g running another build of loop-gate.
func (g *gate) withBinary(bin string) *gate {
	c := *g
	c.bin = bin
	return &c
}

func (g *gate) binary() string {
	if g.bin != "" {
		return g.bin
	}
	return gateBinary
}

func (g *gate) exec(payload []byte, cmd *exec.Cmd) result {
	g.t.Helper()
	// A safety net for a hung hook, not a measure: the tests that make
	// the check hang expect an answer within seconds.
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdin = bytes.NewReader(payload)
	cmd.Dir = g.workDir
	for k, v := range g.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		// Ended by a signal: reported as a shell does (128+n), whether the
		// shell waited for loop-gate or exec'd it.
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	} else {
		require.NoError(g.t, err)
	}
	// The one warning line of a run without a trust anchor is checked by
	// TestUnverifiedWarning; the other tests look at the rest.
	warning := "loop-gate: " + loop.UnverifiedWarning + "\n"
	stderr := errOut.String()
	return result{code: code, stdout: out.String(), stderr: strings.Replace(stderr, warning, "", 1), unverified: strings.Count(stderr, warning)}
}

// Real payload shapes.

func claudePayload(cwd string) []byte {
	return fmt.Appendf(nil, `{"session_id":"0b6f8f57-2d3c-4a54-9d8e-5f1f3e0c9a11","transcript_path":"/home/dev/.claude/projects/x/0b6f8f57.jsonl","cwd":%q,"permission_mode":"default","hook_event_name":"Stop","stop_hook_active":false}`, cwd)
}

func cursorPayload(root, status string) []byte {
	return fmt.Appendf(nil, `{"conversation_id":"cdefee2d-2727-4b73-bf77-d9d830f31d2a","generation_id":"26b45fb6-bdea-439c-b2dc-5e97ee00ecea","model":"claude-4-sonnet","status":%q,"loop_count":0,"hook_event_name":"stop","cursor_version":"1.7.2","workspace_roots":[%q],"user_email":null}`, status, root)
}

type claudeAnswer struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason"`
}

func decodeStrict(t testing.TB, s string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "stdout: %q", s)
}

func requireClaudeBlock(t testing.TB, r result) claudeAnswer {
	t.Helper()
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	var a claudeAnswer
	decodeStrict(t, r.stdout, &a)
	require.Equal(t, "block", a.Decision)
	return a
}

func requireAllowed(t testing.TB, r result) {
	t.Helper()
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	require.Empty(t, r.stdout, "an allowed stop prints nothing on stdout")
}

func TestBlockAtTheCurrentNode(t *testing.T) {
	root := writeRepo(t, atDesignBlock)

	t.Run("claude", func(t *testing.T) {
		g := newGate(t)
		g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
		a := requireClaudeBlock(t, g.run(claudePayload(root), "claude"))
		require.Equal(t, "theloop: issue-42 is at node `design`, which is not done:\n"+
			"  · required section is missing: Security design (docs/specs/issue-42/design.md)\n"+
			"  · required section is missing: Testing strategy (docs/specs/issue-42/design.md)\n"+
			"\nFix these, then run `loopctl graph complete issue-42`. (attempt 1/3)", a.Reason)
	})

	t.Run("claude is the default harness", func(t *testing.T) {
		g := newGate(t)
		g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
		requireClaudeBlock(t, g.run(claudePayload(root)))
	})

	t.Run("cursor", func(t *testing.T) {
		g := newGate(t)
		g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
		r := g.run(cursorPayload(root, "completed"), "cursor")
		require.Equal(t, 0, r.code, r.stderr)
		var a struct {
			FollowupMessage string `json:"followup_message"`
		}
		decodeStrict(t, r.stdout, &a)
		require.True(t, strings.HasPrefix(a.FollowupMessage, "theloop: issue-42 is at node `design`, which is not done:\n"), a.FollowupMessage)
		require.Contains(t, a.FollowupMessage, "(attempt 1/3)")
	})

	t.Run("from a sub-directory, with the stored pointer elsewhere", func(t *testing.T) {
		g := newGate(t)
		g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
		setStage(t, root, atImplementationBlock)
		defer setStage(t, root, atDesignBlock)
		a := requireClaudeBlock(t, g.run(claudePayload(filepath.Join(root, "docs", "specs")), "claude"))
		require.Contains(t, a.Reason, "at node `implementation`")
		require.Contains(t, a.Reason, "1 task(s) still unticked (docs/specs/issue-42/tasks.md)")
	})

	t.Run("empty stdin: the process's directory", func(t *testing.T) {
		g := newGate(t)
		g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
		g.workDir = root
		requireClaudeBlock(t, g.run(nil, "claude"))
	})
}

func TestStopsThatAreAllowed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		stage   stage
		payload func(root string) []byte
		harness string
	}{
		{"a human gate waits", atDesignApprovalWait, claudePayload, "claude"},
		{"a human gate waits (cursor)", atDesignApprovalWait, func(r string) []byte { return cursorPayload(r, "completed") }, "cursor"},
		{"every node satisfied", allDone, claudePayload, "claude"},
		{"cursor: the user aborted", atDesignBlock, func(r string) []byte { return cursorPayload(r, "aborted") }, "cursor"},
		{"cursor: the agent errored", atDesignBlock, func(r string) []byte { return cursorPayload(r, "error") }, "cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := writeRepo(t, tc.stage)
			g := newGate(t)
			g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
			r := g.run(tc.payload(root), tc.harness)
			requireAllowed(t, r)
			require.Empty(t, r.stderr)
		})
	}
}

func TestNoWorkItemStopsQuietly(t *testing.T) {
	root := writeRepo(t, atDesignBlock)
	for name, payload := range map[string][]byte{
		"claude":                     claudePayload(root),
		"cursor":                     cursorPayload(root, "completed"),
		"empty stdin":                nil,
		"session id not an id":       []byte(`{"session_id":"../../etc/passwd","cwd":"/"}`),
		"registry state root absent": claudePayload(root),
	} {
		t.Run(name, func(t *testing.T) {
			g := newGate(t)
			g.workDir = root
			r := g.run(payload, "claude")
			requireAllowed(t, r)
			require.Empty(t, r.stderr)
		})
	}
}

// Without THE_LOOP_WORK_ITEM the gate finds the work item in the session
// registry by the payload's session id.
func TestWorkItemFromTheSessionRegistry(t *testing.T) {
	root := writeRepo(t, atDesignBlock)
	g := newGate(t)
	item, err := workitem.Parse("github:acme/widgets#42")
	require.NoError(t, err)
	const sid = "0b6f8f57-2d3c-4a54-9d8e-5f1f3e0c9a11"
	rec := sessions.Record{Item: item, Harness: "claude", SessionID: sid, TmuxName: sessions.TmuxName(item), Cwd: root,
		Status: sessions.StatusActive, Created: time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)}
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	dir := sessions.RegistryDir(g.env["THE_LOOP_STATE_ROOT"])
	writeFile(t, filepath.Join(dir, item.Slug()+".json"), string(data))
	// Another session's record does not match.
	other, err := workitem.Parse("github:acme/widgets#7")
	require.NoError(t, err)
	rec2 := rec
	rec2.Item, rec2.SessionID, rec2.TmuxName = other, "11111111-2d3c-4a54-9d8e-5f1f3e0c9a11", sessions.TmuxName(other)
	data2, err := json.Marshal(rec2)
	require.NoError(t, err)
	writeFile(t, filepath.Join(dir, other.Slug()+".json"), string(data2))

	t.Run("payload names the directory", func(t *testing.T) {
		a := requireClaudeBlock(t, g.run(claudePayload(root), "claude"))
		require.Contains(t, a.Reason, "issue-42 is at node `design`")
	})
	t.Run("the record's directory when the payload has none", func(t *testing.T) {
		requireClaudeBlock(t, g.run([]byte(`{"session_id":"`+sid+`"}`), "claude"))
	})
	t.Run("state root from the operator's CLI config", func(t *testing.T) {
		g2 := newGate(t)
		delete(g2.env, "THE_LOOP_STATE_ROOT")
		writeFile(t, filepath.Join(g2.home, ".the-loop", "cli-config.yaml"), "version: \"0.5.0\"\nstate:\n  root: "+g.env["THE_LOOP_STATE_ROOT"]+"\n")
		requireClaudeBlock(t, g2.run(claudePayload(root), "claude"))
	})
	t.Run("never the repository's CLI config", func(t *testing.T) {
		g3 := newGate(t)
		delete(g3.env, "THE_LOOP_STATE_ROOT")
		g3.workDir = root
		writeFile(t, filepath.Join(root, ".the-loop", "cli-config.yaml"), "version: \"0.5.0\"\nstate:\n  root: "+g.env["THE_LOOP_STATE_ROOT"]+"\n")
		defer os.RemoveAll(filepath.Join(root, ".the-loop"))
		r := g3.run(claudePayload(root), "claude")
		requireAllowed(t, r)
		require.Empty(t, r.stderr)
	})
}

func TestPayloadTolerance(t *testing.T) {
	root := writeRepo(t, atDesignBlock)
	bom := []byte{0xEF, 0xBB, 0xBF}
	for name, payload := range map[string][]byte{
		"BOM, claude":            append(append([]byte{}, bom...), claudePayload(root)...),
		"BOM, cursor shape":      append(append([]byte{}, bom...), cursorPayload(root, "completed")...),
		"unknown and odd fields": fmt.Appendf(nil, `{"cwd":%q,"stop_hook_active":"yes","loop_count":"many","extra":{"deep":[1,2,3]},"session_id":17}`, root),
		"whitespace around":      fmt.Appendf(nil, "\n\r\n  %s  \n", claudePayload(root)),
	} {
		t.Run(name, func(t *testing.T) {
			g := newGate(t)
			g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
			r := requireClaudeBlock(t, g.run(payload, "claude"))
			require.Contains(t, r.Reason, "at node `design`")
		})
	}
	t.Run("not JSON: the environment still names the work item", func(t *testing.T) {
		g := newGate(t)
		g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
		g.workDir = root
		r := g.run([]byte("Stop!"), "claude")
		requireClaudeBlock(t, r)
		require.Contains(t, r.stderr, "ignoring the Stop payload")
	})
}

// Three blocks per work item and node, then the gate gives up; a satisfied
// check starts the count afresh.
func TestAttemptsAreCapped(t *testing.T) {
	root := writeRepo(t, atDesignBlock)
	g := newGate(t)
	g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
	p := claudePayload(root)
	for i := 1; i <= 3; i++ {
		a := requireClaudeBlock(t, g.run(p, "claude"))
		require.Contains(t, a.Reason, fmt.Sprintf("(attempt %d/3)", i))
	}
	r := g.run(p, "claude")
	requireAllowed(t, r)
	require.Contains(t, r.stderr, "issue-42 is still blocked at node `design` after 3 attempts; giving up")

	// Giving up starts a fresh count: the next turn is gated again.
	a := requireClaudeBlock(t, g.run(p, "claude"))
	require.Contains(t, a.Reason, "(attempt 1/3)")
	a = requireClaudeBlock(t, g.run(p, "claude"))
	require.Contains(t, a.Reason, "(attempt 2/3)")

	// The design is finished: the human gate lets the agent stop, and the
	// counter is cleared.
	setStage(t, root, atDesignApprovalWait)
	r = g.run(p, "claude")
	requireAllowed(t, r)
	require.Empty(t, r.stderr)
	entries, err := os.ReadDir(filepath.Join(g.env["XDG_CACHE_HOME"], "theloop", "gate"))
	require.NoError(t, err)
	require.Empty(t, entries, "a satisfied check clears the work item's counters")

	// A regression is attempt 1 again.
	setStage(t, root, atDesignBlock)
	a = requireClaudeBlock(t, g.run(p, "claude"))
	require.Contains(t, a.Reason, "(attempt 1/3)")

	t.Run("counted per work item", func(t *testing.T) {
		g2 := newGate(t)
		g2.env["THE_LOOP_WORK_ITEM"] = fixtureItem
		g2.env["XDG_CACHE_HOME"] = g.env["XDG_CACHE_HOME"]
		writeFile(t, filepath.Join(root, "docs", "specs", "issue-43", "design.md"), designPartialMD)
		g2.env["THE_LOOP_WORK_ITEM"] = "issue-43"
		r := g2.run(p, "claude")
		require.Equal(t, 0, r.code)
		// issue-43 has no decisions: it waits at phase-selection, and
		// issue-42's count is untouched.
		requireAllowed(t, r)
		g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
		a := requireClaudeBlock(t, g.run(p, "claude"))
		require.Contains(t, a.Reason, "(attempt 2/3)")
	})

	for _, tc := range []struct {
		env    string
		blocks int
	}{{"1", 1}, {"0", 1}, {"-4", 1}, {"2", 2}, {"banana", 3}, {"", 3}} {
		t.Run("THE_LOOP_GATE_MAX_ATTEMPTS="+tc.env, func(t *testing.T) {
			root := writeRepo(t, atDesignBlock)
			g := newGate(t)
			g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
			g.env["THE_LOOP_GATE_MAX_ATTEMPTS"] = tc.env
			p := claudePayload(root)
			for i := 1; i <= tc.blocks; i++ {
				a := requireClaudeBlock(t, g.run(p, "claude"))
				require.Contains(t, a.Reason, fmt.Sprintf("(attempt %d/%d)", i, tc.blocks))
			}
			r := g.run(p, "claude")
			requireAllowed(t, r)
			require.Contains(t, r.stderr, "giving up")
		})
	}

	t.Run("a corrupt counter counts as zero", func(t *testing.T) {
		root := writeRepo(t, atDesignBlock)
		g := newGate(t)
		g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
		p := claudePayload(root)
		requireClaudeBlock(t, g.run(p, "claude"))
		dir := filepath.Join(g.env["XDG_CACHE_HOME"], "theloop", "gate")
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Len(t, entries, 1)
		require.NoError(t, os.WriteFile(filepath.Join(dir, entries[0].Name()), []byte("\x00garbage"), 0o600))
		a := requireClaudeBlock(t, g.run(p, "claude"))
		require.Contains(t, a.Reason, "(attempt 1/3)")
	})
}

// Every internal failure lets the agent stop and says why on stderr.
func TestInternalErrorsLetTheAgentStop(t *testing.T) {
	root := writeRepo(t, atDesignBlock)
	notGit := t.TempDir()
	for _, tc := range []struct {
		name    string
		payload []byte
		item    string
		stderr  string
	}{
		{"repository path missing", claudePayload(filepath.Join(root, "no", "such", "dir")), fixtureItem, "does not exist"},
		{"not a git repository", claudePayload(notGit), fixtureItem, "no git repository at or above"},
		{"work item id with a path in it", claudePayload(root), "../issue-42", "is not a work item id"},
		{"harness config names a spec directory outside the repository", nil, fixtureItem, "could not check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGate(t)
			g.env["THE_LOOP_WORK_ITEM"] = tc.item
			if tc.payload == nil {
				bad := writeRepo(t, atDesignBlock)
				writeFile(t, filepath.Join(bad, ".the-loop", "harness-config.yaml"), "workflow:\n  specDir: ../outside\n")
				tc.payload = claudePayload(bad)
			}
			r := g.run(tc.payload, "claude")
			requireAllowed(t, r)
			require.Contains(t, r.stderr, tc.stderr)
		})
	}
}

func TestUsage(t *testing.T) {
	g := newGate(t)
	r := g.run(nil, "--version")
	require.Equal(t, 0, r.code)
	require.True(t, strings.HasPrefix(r.stdout, "loop-gate "), r.stdout)

	r = g.run(nil, "aider")
	require.Equal(t, 1, r.code, "a misconfigured hook is a non-blocking error, never exit 2")
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, `unknown harness "aider": pass claude, cursor, codex or gemini`)

	r = g.run(nil, "claude", "extra")
	require.Equal(t, 1, r.code)
}

// A graph-state.json that cannot be parsed is not a silent stop: the check
// runs on the state reconstructed from the artifacts, and stderr names the
// file (issue 34).
func TestCorruptStateIsSaidOnStderr(t *testing.T) {
	root := writeRepo(t, atDesignApprovalWait)
	state := filepath.Join(root, "docs", "specs", fixtureItem, "graph-state.json")
	writeFile(t, state, "{not json")
	g := newGate(t)
	g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
	r := g.run(claudePayload(root), "claude")
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	require.Contains(t, r.stderr, "graph-state.json could not be parsed")
	require.Contains(t, r.stderr, state, "the file is named")
}
