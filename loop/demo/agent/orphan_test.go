package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/run"
)

func TestWatchDemoEndsOnlyItsOwnDemoServer(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed; this test needs the real tmux")
	}
	start := func(name string) string {
		require.NoError(t, exec.Command("tmux", "-L", name, "new-session", "-d", "-s", "loop-x", "sleep", "60").Run())
		out, err := exec.Command("tmux", "-L", name, "display-message", "-p", "#{socket_path}").Output()
		require.NoError(t, err)
		sock := strings.TrimSpace(string(out))
		// kill-server leaves the socket file behind: remove it too.
		t.Cleanup(func() { _ = exec.Command("tmux", "-L", name, "kill-server").Run(); _ = os.Remove(sock) })
		return sock
	}
	alive := func(name string) bool { return exec.Command("tmux", "-L", name, "has-session").Run() == nil }

	// A process that has exited: the "demo" is gone.
	gone := exec.Command("true")
	require.NoError(t, gone.Run())
	deadPID := gone.Process.Pid

	demoName := fmt.Sprintf("%stest-%d", DemoSocketPrefix, os.Getpid())
	other := fmt.Sprintf("theloop-other-%d", os.Getpid())
	demoSock, otherSock := start(demoName), start(other)
	env := func(sock string) func(string) (string, bool) {
		return func(k string) (string, bool) { return sock + ",1,0", k == "TMUX" }
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The demo still runs (this process): nothing happens.
	wctx, wcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	watchDemo(wctx, os.Getpid(), env(demoSock), 20*time.Millisecond, run.Exec{})
	wcancel()
	require.True(t, alive(demoName))

	// Not a demo server: never touched, even with the demo gone.
	wctx, wcancel = context.WithTimeout(ctx, 200*time.Millisecond)
	watchDemo(wctx, deadPID, env(otherSock), 20*time.Millisecond, run.Exec{})
	wcancel()
	require.True(t, alive(other))

	// The demo is gone: its server ends.
	watchDemo(ctx, deadPID, env(demoSock), 20*time.Millisecond, run.Exec{})
	require.False(t, alive(demoName))
	require.True(t, alive(other))
}
