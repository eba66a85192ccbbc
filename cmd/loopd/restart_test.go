package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/plugin"
	"github.com/theloop-dev/theloop/plugin/install"
)

func TestRestartArgv(t *testing.T) {
	args := []string{"loopd", "run", "--state-root", "/s", "--upgrade-plugin"}
	require.Equal(t, []string{"loopd", "run", "--state-root", "/s"}, restartArgv(args, false))
	require.Equal(t, args, restartArgv(args, true), "never twice")
	require.Equal(t, []string{"loopd", "run", "--upgrade-plugin"}, restartArgv([]string{"loopd", "run"}, true))
}

// `loopctl daemon restart --with-upgrade` against the built loopd: the
// operator installed a new loopd over the running one's executable and an
// older plugin is installed; the restart keeps the process (same PID, as
// systemd wants), runs the new executable (its version answers), and the
// plugin's files are this version's again before the new loopd serves.
// A plain restart upgrades nothing. SIGTERM still stops it cleanly.
func TestDaemonRestartWithUpgradeOfTheBinary(t *testing.T) {
	bin := loopdBinary(t)
	dir := shortdir.New(t)
	// The running executable, replaced below as an upgrade would.
	exe := filepath.Join(dir, "bin", "loopd")
	require.NoError(t, os.MkdirAll(filepath.Dir(exe), 0o755))
	copyFile(t, bin, exe)
	loopctl := filepath.Join(dir, "bin", "loopctl")
	out, err := exec.Command("go", "build", "-o", loopctl, "../loopctl").CombinedOutput()
	require.NoError(t, err, "%s", out)
	newer := filepath.Join(dir, "bin", "loopd.new")
	out, err = exec.Command("go", "build", "-ldflags", "-X main.version=v9.9.9-restart-test", "-o", newer, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)

	// An older plugin installed for Claude Code at user scope.
	home := filepath.Join(dir, "home")
	require.NoError(t, os.MkdirAll(home, 0o755))
	envOf := map[string]string{"HOME": home, "PATH": "/usr/bin:/bin"}
	ienv := &install.Env{Getenv: func(k string) string { return envOf[k] }, Getwd: func() (string, error) { return dir, nil }, HomeDir: func() (string, error) { return home, nil }}
	require.NoError(t, install.Install(&install.Options{IO: install.IOStreams{Out: &syncBuffer{}, ErrOut: &syncBuffer{}}, Env: ienv, Harness: "claude", Scope: "user", Command: "loop-gate"}))
	skill := filepath.Join(plugin.MarketplaceDir(ienv.Getenv, home), plugin.Name, "skills", "the-loop", "SKILL.md")
	want, err := os.ReadFile(skill)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(skill, []byte("an older skill\n"), 0o644))

	state := filepath.Join(dir, "state")
	cfg := filepath.Join(dir, "cli-config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("repositories: [octo/demo]\nintegrations:\n  github: {transport: api}\nwebhooks:\n  ghWebhook:\n    port: 0\n"), 0o600))
	cmd := exec.Command(exe, "run", "--state-root", state, "--insecure-accept-unsigned")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "THE_LOOP_CLI_CONFIG=" + cfg, "THE_LOOP_GH_WEBHOOK_SECRET=", "GH_TOKEN=test-token"}
	logb := &syncBuffer{}
	cmd.Stderr, cmd.Stdout = logb, logb
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
		t.Logf("loopd output:\n%s", logb.String())
	})
	sock := filepath.Join(state, api.SocketName)
	cl := api.NewSocketClient(sock)
	ctx := context.Background()
	var before api.Status
	require.Eventually(t, func() bool { return cl.Do(ctx, "GET", "/status", nil, nil, &before) == nil }, 30*time.Second, 20*time.Millisecond, logb.String())
	require.Empty(t, before.PluginUpgrade, "an ordinary start upgrades nothing")

	// The operator installs the new loopd over the running one's file.
	require.NoError(t, os.Rename(newer, exe))

	lc := exec.Command(loopctl, "daemon", "restart", "--with-upgrade", "--socket", sock)
	lc.Env = cmd.Env
	out, err = lc.CombinedOutput()
	require.NoError(t, err, "%s\nloopd:\n%s", out, logb.String())
	require.Contains(t, string(out), "loopd v9.9.9-restart-test restarted (pid "+strconv.Itoa(cmd.Process.Pid)+")")
	require.Contains(t, string(out), "plugin: claude: ")
	require.Contains(t, string(out), "file(s) written or removed")
	got, err := os.ReadFile(skill)
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "the plugin is this version's again")

	var after api.Status
	require.NoError(t, cl.Do(ctx, "GET", "/status", nil, nil, &after))
	require.Equal(t, cmd.Process.Pid, after.PID, "the same process: systemd keeps its main PID")
	require.Equal(t, "v9.9.9-restart-test", after.Version, "the executable on disk now runs")
	require.True(t, after.StartedAt.After(before.StartedAt))

	// A plain restart: nothing upgraded, --format json is the new status.
	lc = exec.Command(loopctl, "daemon", "restart", "--socket", sock, "--jq", ".pluginUpgrade | length")
	lc.Env = cmd.Env
	out, err = lc.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "0", strings.TrimSpace(string(out)))
	events, err := os.ReadFile(filepath.Join(state, "logs", "audit.jsonl"))
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(string(events), `"event":"daemon.restart_requested"`), "both restarts are in the audit log")
	require.Contains(t, string(events), `"event":"daemon.plugin_upgraded"`)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "SIGTERM is a clean exit after restarts")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, 0o755))
}
