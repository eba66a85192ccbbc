package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/fakeclaude"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/loop/stopgate"
)

// TestEachHarnessWalksTheGraph: loopd hosts cursor-agent, codex and gemini
// like Claude Code — picked by routing.defaultHarness, or by the work
// item's "the-loop: harness-<name>" label — through real tmux and the
// sandbox, with a stand-in on each binary's name: spawn → the assignment
// pasted → an authorized "the-loop execute" → a stop blocked in the
// harness's own answer form → claims → the authorized
// "Approved" decides the gate → the next assignment pasted, in the same
// session.
func TestEachHarnessWalksTheGraph(t *testing.T) {
	for _, tc := range []struct {
		name, binary string
		byLabel      bool
	}{
		{"codex", "codex", false},
		{"gemini", "gemini", false},
		{"cursor", "cursor-agent", false},
		{"codex", "codex", true},
	} {
		how := "default"
		if tc.byLabel {
			how = "label"
		}
		t.Run(tc.name+" by "+how, func(t *testing.T) {
			w := newWorld(t, func(c *daemon.Config) {
				landlockOnly(c)
				// The stand-in logs where the claude one does
				// (SandboxWritable[0] is its root).
				_, err := fakeclaude.InstallAs(c.SandboxWritable[0], tc.binary)
				require.NoError(t, err)
				if !tc.byLabel {
					c.Routing.DefaultHarness = tc.name
				}
			})
			is, err := w.sim.OpenIssue(repoFull, human, "Add a widget", "Please add a widget.")
			require.NoError(t, err)
			n := is.Number
			if tc.byLabel {
				require.NoError(t, w.sim.AddLabel(repoFull, n, human, "the-loop: harness-"+tc.name))
			}
			require.NoError(t, w.sim.AddLabel(repoFull, n, human, label))
			w.eventually("the spawn prompt with the assignment", func() bool {
				return strings.Contains(w.received(), "you are now at node: phase-selection")
			})
			w.waitIdle()
			starts := harnessStarts(t, w)
			require.Len(t, starts, 1, "one session")
			require.Equal(t, tc.binary, filepath.Base(starts[0].bin), "the session runs %s", tc.binary)

			_, err = w.sim.Comment(repoFull, n, human, "the-loop execute")
			require.NoError(t, err)
			w.waitIdle()
			require.Equal(t, "brainstorming", w.state(n).CurrentNode)
			w.eventually("the brainstorming assignment", func() bool {
				return strings.Contains(w.received(), "/the-loop:brainstorm issue-1")
			})
			// The agent stops with brainstorm.md missing: its Stop hook
			// (loop-gate's check, in process) answers in the harness's own
			// form and keeps it on the node.
			requireGateBlocks(t, tc.name, w.checkout(n))
			w.claim(n, "brainstorming", map[string]string{"brainstorm.md": brainstormMD})
			c := w.claim(n, "requirements-definition", map[string]string{"requirements.md": requirementsMD})
			require.Equal(t, "requirements-approval", c.CurrentNode)

			_, err = w.sim.Comment(repoFull, n, human, "Approved")
			require.NoError(t, err)
			w.waitIdle()
			require.Equal(t, "design", w.state(n).CurrentNode)
			w.eventually("the design assignment pasted", func() bool {
				return strings.Contains(w.received(), "/the-loop:create-design issue-1")
			})
			require.Len(t, harnessStarts(t, w), 1, "the same session throughout")
		})
	}
}

// requireGateBlocks runs the Stop gate as the harness's hook would in the
// session's checkout (THE_LOOP_WORK_ITEM is in the session's environment)
// and checks the block arrives in that harness's form.
func requireGateBlocks(t *testing.T, harness, checkout string) {
	t.Helper()
	payload := map[string]string{
		"claude": `{"session_id":"s","cwd":%q,"hook_event_name":"Stop","stop_hook_active":false}`,
		"codex":  `{"session_id":"019a8f5e-7c1d-7a42-9b1e-3f0c2d4e5a61","turn_id":"1","cwd":%q,"hook_event_name":"Stop","model":"m","permission_mode":"default","stop_hook_active":false,"last_assistant_message":"done"}`,
		"gemini": `{"session_id":"s","cwd":%q,"hook_event_name":"AfterAgent","prompt":"p","prompt_response":"r","stop_hook_active":false}`,
		"cursor": `{"conversation_id":"c","status":"completed","loop_count":0,"hook_event_name":"stop","workspace_roots":[%q]}`,
	}[harness]
	var out, errOut bytes.Buffer
	h, err := stopgate.ParseHarness(harness)
	require.NoError(t, err)
	code := stopgate.Run(context.Background(), stopgate.Options{
		Harness: h, Stdin: strings.NewReader(fmt.Sprintf(payload, checkout)), Stdout: &out, Stderr: &errOut,
		Getenv:   func(k string) string { return map[string]string{stopgate.WorkItemEnv: "issue-1"}[k] },
		Counters: stopgate.Counters{Dir: t.TempDir()},
		Events:   graph.SinkFunc(func(graph.LogEvent) {}),
	})
	require.Equal(t, 0, code, errOut.String())
	var answer map[string]string
	require.NoError(t, json.Unmarshal(out.Bytes(), &answer), "stdout %q, stderr %s", out.String(), errOut.String())
	reason := answer["reason"]
	switch harness {
	case "cursor":
		reason = answer["followup_message"]
	case "gemini":
		require.Equal(t, "deny", answer["decision"])
	default:
		require.Equal(t, "block", answer["decision"])
	}
	require.Regexp(t, "^theloop: issue-1 is at node `[a-z-]+`, which is not done:\n", reason)
}

type harnessStart struct{ bin, args string }

// harnessStarts reads the stand-ins' start log (fakeclaude's argv.log);
// the program is found from the process's /proc entry when it still runs,
// else from the argv shape.
func harnessStarts(t *testing.T, w *world) []harnessStart {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.claude, "argv.log"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []harnessStart
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		f := strings.SplitN(line, "\t", 7)
		require.Len(t, f, 7, line)
		cmdline, _ := os.ReadFile("/proc/" + f[0] + "/cmdline")
		parts := strings.Split(string(cmdline), "\x00")
		bin := ""
		// bash runs the script: argv is [bash, /path/to/<binary>, args…].
		if len(parts) > 1 {
			bin = parts[1]
		}
		out = append(out, harnessStart{bin: bin, args: f[6]})
	}
	return out
}
