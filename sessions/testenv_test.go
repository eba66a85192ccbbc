package sessions

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
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/fakeclaude"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/run"
)

// Test environment: real tmux on a private server per test, real git, and a
// fake `claude` that behaves enough like Claude Code for the session
// machinery: it records its argv and environment, remembers the
// conversations it started (so --resume of a known id works and an unknown
// one fails the way Claude Code does), turns on bracketed paste, logs
// every line it receives, and exits on the line __DIE__. A conversation
// file holding "crash-after-resume" makes a resume of it die silently
// after 0.6 s, past a short resume probe but before it is ready.

func requireTool(t testing.TB, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s is not installed; .ci/run installs it", name)
	}
}

// newTestTmux returns a Tmux on a fresh private server that is killed when
// the test ends. Timings are tightened for tests; deadlines stay generous
// for loaded machines.
func newTestTmux(t testing.TB, edit func(*TmuxConfig)) *Tmux {
	t.Helper()
	requireTool(t, "tmux")
	cfg := DefaultTmuxConfig()
	cfg.SocketPath = shortdir.Tmux(t) // killed, and its socket removed, when the test ends
	cfg.Width, cfg.Height = 160, 40
	cfg.ReadySettle = 150 * time.Millisecond
	cfg.PollInterval = 20 * time.Millisecond
	cfg.ReadyTimeout = 10 * time.Second
	cfg.ReceiptTimeout = 10 * time.Second
	cfg.TempDir = t.TempDir()
	if edit != nil {
		edit(&cfg)
	}
	tm, err := NewTmux(cfg, run.Exec{})
	require.NoError(t, err)
	return tm
}

// tmuxRaw runs a tmux command on tm's server, bypassing the runner's
// checks (to set up sessions theloop would not make).
func tmuxRaw(t testing.TB, tm *Tmux, args ...string) string {
	t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", tm.cfg.SocketPath}, args...)...).CombinedOutput()
	require.NoError(t, err, "tmux %v: %s", args, out)
	return string(out)
}

func panePID(t testing.TB, tm *Tmux, name string) int {
	t.Helper()
	out := tmuxRaw(t, tm, "list-panes", "-t", "="+name+":", "-F", "#{pane_pid}")
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	require.NoError(t, err)
	return pid
}

// killHarness crashes the harness in a session (SIGKILL, like an OOM kill)
// and waits until tmux sees the pane dead or the session gone.
func killHarness(t testing.TB, tm *Tmux, name string) {
	t.Helper()
	require.NoError(t, syscall.Kill(panePID(t, tm, name), syscall.SIGKILL))
	waitFor(t, "harness to die", func() bool {
		l, _ := tm.Probe(context.Background(), name)
		return l == LivenessDead || l == LivenessAbsent
	})
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type fakeClaude struct {
	root string
	bin  string
}

type fakeRun struct {
	PID                       int
	Cwd, WorkItem, SessionEnv string
	Args                      []string
}

// writeFakeClaude writes the fake into a temp dir. Tests that run it by
// absolute path use this and may run in parallel.
func writeFakeClaude(t testing.TB) *fakeClaude {
	t.Helper()
	requireTool(t, "bash")
	root := t.TempDir()
	bin, err := fakeclaude.Install(root)
	require.NoError(t, err)
	return &fakeClaude{root: root, bin: bin}
}

// installFakeClaude also puts the fake first on PATH (for this test only),
// where the Manager looks the harness up like the daemon would.
func installFakeClaude(t testing.TB) *fakeClaude {
	t.Helper()
	f := writeFakeClaude(t)
	t.Setenv("PATH", filepath.Dir(f.bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	return f
}

func (f *fakeClaude) runs(t testing.TB) []fakeRun {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.root, "argv.log"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var runs []fakeRun
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		// pid, cwd, mode, id, work item, session env, args (fakeclaude's format)
		p := strings.SplitN(line, "\t", 7)
		require.Len(t, p, 7, line)
		pid, _ := strconv.Atoi(p[0])
		runs = append(runs, fakeRun{PID: pid, Cwd: p[1], WorkItem: p[4], SessionEnv: p[5], Args: strings.Fields(p[6])})
	}
	return runs
}

// received returns the lines the fake read in conversation id.
func (f *fakeClaude) received(t testing.TB, id string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.root, "received.log"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if got, ok := strings.CutPrefix(l, id+"\t"); ok {
			lines = append(lines, got)
		}
	}
	return lines
}

// waitReceived waits until conversation id has read the line want.
func (f *fakeClaude) waitReceived(t testing.TB, id, want string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%q in conversation %s", want, id), func() bool {
		for _, l := range f.received(t, id) {
			if l == want {
				return true
			}
		}
		return false
	})
}

// crashAfterResume makes the next resume of id die during start-up.
func (f *fakeClaude) crashAfterResume(t testing.TB, id string) {
	require.NoError(t, os.WriteFile(filepath.Join(f.root, "conversations", id), []byte("crash-after-resume"), 0o644))
}

// forget makes the fake unable to resume id, like a conversation Claude Code
// has lost.
func (f *fakeClaude) forget(t testing.TB, id string) {
	require.NoError(t, os.Remove(filepath.Join(f.root, "conversations", id)))
}
