package agent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/theloop-dev/theloop/run"
)

// DemoSocketPrefix starts the name of every tmux server loopd demo runs.
// The scripted agent only ever ends a server so named.
const DemoSocketPrefix = "theloop-demo-"

// watchDemo ends the agent's own tmux server when the process that started
// the demo (pid) is gone without cleaning up — killed hard, or by a closed
// pipe — so no session outlives its demo. The server is the one $TMUX names
// (tmux sets it in every pane), addressed by its socket path, and only if
// that is a demo server (DemoSocketPrefix); it returns when ctx ends.
func watchDemo(ctx context.Context, pid int, lookupEnv func(string) (string, bool), every time.Duration, runner run.Runner) {
	if pid <= 0 {
		return
	}
	v, _ := lookupEnv("TMUX")
	socket, _, _ := strings.Cut(v, ",")
	if socket == "" || !filepath.IsAbs(socket) || !strings.HasPrefix(filepath.Base(socket), DemoSocketPrefix) {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if processGone(pid) {
			_, _ = runner.Run(context.WithoutCancel(ctx), run.Cmd{Name: "tmux", Args: []string{"-S", socket, "kill-server"}, Timeout: 10 * time.Second})
			return
		}
	}
}

// processGone reports whether pid no longer exists.
func processGone(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	err = p.Signal(syscall.Signal(0))
	return errors.Is(err, os.ErrProcessDone) || errors.Is(err, syscall.ESRCH)
}
