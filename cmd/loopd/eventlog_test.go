package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
)

// A loopd started in a checkout writes nothing into it: its one event log
// is under its state root (issue 21; a loopd started in a checkout of this
// project once wrote 7 MB of log into it). The working directory holds a
// local ./.the-loop/cli-config.yaml — the case that put the log there.
func TestLoopdWritesNothingUnderItsWorkingDirectory(t *testing.T) {
	bin := loopdBinary(t)
	base := shortdir.New(t) // the state root holds loopd.sock: a long $TMPDIR must not push it past the socket limit
	cwd := filepath.Join(base, "checkout")
	home := filepath.Join(base, "home")
	state := filepath.Join(base, "state")
	require.NoError(t, os.MkdirAll(filepath.Join(cwd, ".the-loop"), 0o755))
	require.NoError(t, os.MkdirAll(home, 0o755))
	cfg := filepath.Join(cwd, ".the-loop", "cli-config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("webhooks:\n  ghWebhook:\n    port: 0\nrepositories: [octo/demo]\n"), 0o600))
	before := listTree(t, cwd)

	cmd := exec.Command(bin, "run", "--state-root", state)
	cmd.Dir = cwd
	cmd.Env = append(os.Environ(), "HOME="+home, "THE_LOOP_GH_WEBHOOK_SECRET=s", "GH_TOKEN=x", "THE_LOOP_CLI_CONFIG=", "THE_LOOP_STATE_ROOT=")
	var logs lockedBuffer
	addr := startListening(t, cmd, &logs)
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _, _ = cmd.Process.Wait() }()
	waitAnswering(t, addr)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())

	recs, err := loop.ReadEvents(loop.DaemonEventLogPath(state, loop.CLIConfig{}), loop.EventQuery{Source: "loopd"})
	require.NoError(t, err)
	require.NotEmpty(t, recs, "loopd's events are in <state root>/%s", loop.DaemonEventLog)
	require.Equal(t, before, listTree(t, cwd), "loopd wrote under its working directory")
}

func listTree(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		out = append(out, p)
		return nil
	}))
	return out
}
