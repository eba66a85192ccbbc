package daemon_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
)

// The agent under the real loopd, in the world loopd builds for it: a
// stand-in harness (on PATH as claude) that, from its pane, goes for
// loopd's key, socket, webhook port, environment, state root and its
// neighbours' sessions, and for the tmux server and git configuration of
// its own world. Every attempt must come back refused, while loopd still
// pastes into it. (loop/daemon/sandbox's escape suite tries the longer
// list against the same world builder.)
func TestWorldEscapeUnderLoopd(t *testing.T) {
	if err := sandbox.CheckNamespaces(); err != nil {
		t.Skipf("the namespace sandbox cannot be built here (.ci/run installs bubblewrap): %v", err)
	}
	if !sandbox.Available() {
		t.Skip("no Landlock (the world's second layer)")
	}
	w := newWorld(t, nil)
	st := w.cfg.StateRoot
	probe := fmt.Sprintf(`#!/bin/bash
st=%q port=%q loopd=%d
try() { if "$@" >/dev/null 2>&1; then echo ok; else echo refused; fi; }
{
echo "key=$(try cat "$st/keys/decision-signing.key")"
echo "socket=$(try sh -c 'test -S "$1/loopd.sock"' - "$st")"
echo "stateroot=$(try sh -c 'ls "$1" | grep -q keys' - "$st")"
echo "webhook=$(try timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$port")"
echo "environ=$(if tr '\0' '\n' < /proc/$loopd/environ 2>/dev/null | grep -q GH_TOKEN; then echo ok; else echo refused; fi)"
echo "tmuxsessions=$(tmux list-sessions -F x 2>/dev/null | wc -l)"
echo "gitconfig=$(try sh -c 'echo "[core] fsmonitor = touch /tmp/pwned" >> .git/config')"
tmux run-shell "hostname > $PWD/runshell.txt; cat $st/keys/decision-signing.key >> $PWD/runshell.txt 2>&1"
echo "hostname=$(hostname)"
} > report.tmp 2>/dev/null
mv report.tmp report
echo "ready>"
while IFS= read -r line; do echo "got:$line" >> report; done
`, st, strings.Split(w.d.Addr(), ":")[1], os.Getpid())
	bin := filepath.Join(w.claude, "bin", "claude")
	require.NoError(t, os.Remove(bin))
	require.NoError(t, os.WriteFile(bin, []byte(probe), 0o755))

	n := w.openLabeled()
	var cwd string
	w.eventually("the session's record", func() bool {
		rec, ok := w.record(fmt.Sprintf("github:octo/demo#%d", n))
		cwd = rec.Cwd
		return ok && cwd != ""
	})
	var report string
	w.eventually("the stand-in's report", func() bool {
		b, err := os.ReadFile(filepath.Join(cwd, "report"))
		report = string(b)
		return err == nil
	})
	t.Logf("report:\n%s", report)
	got := map[string]string{}
	for _, l := range strings.Split(report, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	for _, k := range []string{"key", "socket", "stateroot", "webhook", "environ", "gitconfig"} {
		require.Equal(t, "refused", got[k], "%s: from inside its world the agent reached it", k)
	}
	require.Equal(t, "theloop-agent", got["hostname"], "the harness runs in its world")
	require.Equal(t, "1", got["tmuxsessions"], "the world's tmux server hosts only its own session")
	w.eventually("run-shell's output", func() bool {
		b, err := os.ReadFile(filepath.Join(cwd, "runshell.txt"))
		return err == nil && strings.Contains(string(b), "theloop-agent")
	})
	b, _ := os.ReadFile(filepath.Join(cwd, "runshell.txt"))
	require.NotContains(t, string(b), "PRIVATE", "run-shell ran outside the world")
	// loopd still pastes into it, through its boxed client.
	w.eventually("loopd's paste in the pane", func() bool {
		b, _ := os.ReadFile(filepath.Join(cwd, "report"))
		return strings.Contains(string(b), "got:")
	})
	// And no git loopd runs later has run what the agent tried to plant.
	time.Sleep(200 * time.Millisecond)
	_, err := os.Stat("/tmp/pwned")
	require.True(t, os.IsNotExist(err))
}
