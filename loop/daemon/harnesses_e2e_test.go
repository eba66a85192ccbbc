package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/fakeclaude"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// TestEachHarnessWalksTheGraph: loopd hosts cursor-agent, codex and gemini
// like Claude Code — picked by routing.defaultHarness, or by the work
// item's "the-loop: harness-<name>" label — through real tmux and the
// sandbox, with a stand-in on each binary's name: spawn → the assignment
// pasted → an authorized "the-loop execute" → claims → the authorized
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
				// The stand-in logs where the claude one does
				// (SandboxWritable[0] is its root).
				_, err := fakeclaude.InstallAs(c.SandboxWritable[0], tc.binary)
				require.NoError(t, err)
				if !tc.byLabel {
					c.DefaultHarness = tc.name
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
