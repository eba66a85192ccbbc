package sandbox_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/sessions"
)

func TestMain(m *testing.M) {
	sandbox.MaybeRunLauncher()
	if os.Getenv("SBX_LOOPD_STANDIN") == "1" {
		// A stand-in for loopd: started with secrets in its environment,
		// hardened as cmd/loopd hardens itself, still holding them.
		if err := sandbox.Harden(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if os.Getenv("GH_TOKEN") == "" {
			os.Exit(2)
		}
		fmt.Println("hardened")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startLoopdStandIn starts a process with secrets in its environment that
// hardens itself as loopd does, and returns its pid.
func startLoopdStandIn(t *testing.T) int {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "SBX_LOOPD_STANDIN=1", "GH_TOKEN=FAKE-SECRET-standin", "THE_LOOP_GH_WEBHOOK_SECRET=FAKE-SECRET-standin")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	buf := make([]byte, 9)
	_, err = io.ReadFull(out, buf)
	require.NoError(t, err)
	require.Equal(t, "hardened\n", string(buf))
	return cmd.Process.Pid
}

// probe is the stand-in harness: from inside its pane it tries everything
// an agent could try against loopd, writes what happened into its worktree,
// and then echoes what it is sent (so delivery can be checked).
const probe = `#!/bin/bash
wt=$PWD out=$PWD/report st=$THE_LOOP_STATE_ROOT loopd=$1
try() { if "$@" >/dev/null 2>&1; then echo ok; else echo denied; fi; }
{
echo "pid=$$"
echo "keys=$(try cat "$st/keys/signing.key")"
echo "dashboard=$(try cat "$st/dashboard.json")"
echo "config=$(try cat "$st/queue/state.db")"
echo "listroot=$(try ls "$st")"
echo "registry=$(try cat "$st/sessions/github-octo-demo-7.json")"
echo "loopdenv=$(if tr '\0' '\n' < /proc/$loopd/environ | grep -q FAKE-SECRET; then echo ok; else echo denied; fi)"
echo "loopdmem=$(try head -c1 /proc/$loopd/mem)"
echo "killouter=$(try kill -0 $PPID)"
echo "write=$(try touch "$wt/written")"
echo "outbox=$(try sh -c 'echo intent >> "$1/intents.jsonl"' - "$st/outbox/sess-7")"
echo "otheroutbox=$(try sh -c 'echo intent >> "$1/intents.jsonl"' - "$st/outbox/sess-8")"
echo "outboxdone=$(try touch "$st/outbox-done/sess-7")"
echo "home=$(try sh -c 'echo x > "$HOME/.theloop-probe-$1" && rm -f "$HOME/.theloop-probe-$1"' - $$)"
( setsid sleep 120 </dev/null >/dev/null 2>&1 & echo $! > "$wt/orphan.pid" ) &
wait
tmux new-window -d "cat '$st/keys/signing.key' > '$wt/newwindow.txt' 2>&1; echo rc=\$? >> '$wt/newwindow.txt'"
} > "$out.tmp"
tr '\0' '\n' < /proc/$$/environ > "$wt/environ.txt"
mv "$out.tmp" "$out"
echo ready
while IFS= read -r line; do echo "got:$line" >> "$out"; done
`

type fixture struct {
	base, state, ws, wt, reg string
	tm                       *sessions.Tmux
	socket                   string
}

func newFixture(t *testing.T, off bool) *fixture {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed; .ci/run installs it")
	}
	if !off && !sandbox.Available() {
		t.Skip("this kernel offers no Landlock: the sandbox cannot be tested here (loopd would refuse to spawn unless routing.sandbox: off)")
	}
	// A short base: the state root holds a unix socket.
	base, err := os.MkdirTemp("", "sbx")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(base) })
	f := &fixture{base: base, state: filepath.Join(base, "state"), ws: filepath.Join(base, "ws")}
	f.wt = filepath.Join(f.ws, "wt7")
	for _, d := range []string{f.wt, filepath.Join(f.state, "keys"), filepath.Join(f.state, "sessions"), filepath.Join(f.state, "queue"), filepath.Join(base, "bin"),
		filepath.Join(f.state, "outbox", "sess-7"), filepath.Join(f.state, "outbox", "sess-8"), filepath.Join(f.state, "outbox-done")} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	write := func(p, s string) { require.NoError(t, os.WriteFile(p, []byte(s), 0o600)) }
	write(filepath.Join(f.state, "keys", "signing.key"), "PRIVATE-KEY")
	write(filepath.Join(f.state, "dashboard.json"), `{"token":"x"}`)
	write(filepath.Join(f.state, "queue", "state.db"), "queue")
	f.reg = filepath.Join(f.state, "sessions", "github-octo-demo-7.json")
	write(f.reg, `{"item":"github:octo/demo#7"}`)
	ln, err := net.Listen("unix", filepath.Join(f.state, "loopd.sock"))
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	require.NoError(t, os.WriteFile(filepath.Join(base, "bin", "harness"), []byte(probe), 0o755))

	// loopd's environment holds secrets the agent must not see.
	for _, k := range []string{"THE_LOOP_GH_WEBHOOK_SECRET", "GH_TOKEN", "GITHUB_TOKEN", "THE_LOOP_SERVICE_TOKEN", "THE_LOOP_SLACK_BOT_TOKEN", "THE_LOOP_SLACK_APP_TOKEN", "THE_LOOP_SLACK_SIGNING_SECRET", "THE_LOOP_TRUST_KEYS", "CUSTOM_SECRET"} {
		t.Setenv(k, "FAKE-SECRET-"+k)
	}
	t.Setenv("HARNESS_OK", "kept")

	self, err := os.Executable()
	require.NoError(t, err)
	c := &sandbox.Confiner{Self: self, StateRoot: f.state, WorkspaceRoot: f.ws, AgentEnv: []string{"HARNESS_OK"},
		OutboxRoot: filepath.Join(f.state, "outbox"),
		Home:       filepath.Join(base, "home"), Executables: []string{filepath.Join(base, "bin", "harness")}, Off: off}
	require.NoError(t, c.Prepare())
	f.socket = shortdir.TmuxName(t, "sbx") // killed, its socket file removed, when the test ends
	cfg := sessions.DefaultTmuxConfig()
	cfg.Socket = f.socket
	cfg.TempDir = t.TempDir()
	cfg.ReadySettle = 150 * time.Millisecond
	cfg.PollInterval = 20 * time.Millisecond
	// As loopd wires it: its tmux clients carry routing.agentEnv to the
	// server the launcher inherits from (Daemon.tmuxEnviron).
	tmuxRunner := run.Exec{Environ: func() []string { return sandbox.ChildEnv(os.Environ(), c.AgentEnv) }}
	f.tm, err = sessions.NewConfinedTmux(cfg, tmuxRunner, c)
	require.NoError(t, err)
	return f
}

func (f *fixture) spawn(t *testing.T, name string) map[string]string {
	return f.spawnWatching(t, name, os.Getpid())
}

func (f *fixture) spawnWatching(t *testing.T, name string, loopd int) map[string]string {
	t.Helper()
	err := f.tm.Spawn(context.Background(), sessions.SpawnSpec{Name: name, Cwd: f.wt,
		Env:          []string{"THE_LOOP_WORK_ITEM=7", "THE_LOOP_STATE_ROOT=" + f.state},
		Argv:         []string{filepath.Join(f.base, "bin", "harness"), strconv.Itoa(loopd)},
		RegistryFile: f.reg, OutboxDir: filepath.Join(f.state, "outbox", "sess-7")})
	require.NoError(t, err)
	var report []byte
	require.Eventually(t, func() bool {
		report, err = os.ReadFile(filepath.Join(f.wt, "report"))
		return err == nil
	}, 20*time.Second, 50*time.Millisecond, "the harness never wrote its report")
	got := map[string]string{}
	for _, l := range strings.Split(string(report), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			got[k] = v
		}
	}
	return got
}

func TestAgentCannotReachLoopdSecrets(t *testing.T) {
	f := newFixture(t, false)
	got := f.spawnWatching(t, "loop-github-octo-demo-7", startLoopdStandIn(t))

	t.Logf("report: %v", got)
	for _, k := range []string{"keys", "dashboard", "config", "listroot", "loopdenv", "loopdmem", "killouter", "home", "otheroutbox", "outboxdone"} {
		require.Equal(t, "denied", got[k], "%s must be out of the agent's reach", k)
	}
	require.Equal(t, "ok", got["registry"], "loop-gate reads the session's registry entry")
	require.Equal(t, "ok", got["write"], "the agent writes in its worktree")
	require.Equal(t, "ok", got["outbox"], "a claim records its ticket effects in the session's own outbox")

	env, err := os.ReadFile(filepath.Join(f.wt, "environ.txt"))
	require.NoError(t, err)
	require.NotContains(t, string(env), "FAKE-SECRET", "the harness's /proc/<pid>/environ holds no secret")
	require.Contains(t, string(env), "HARNESS_OK=kept", "routing.agentEnv names pass")
	require.Contains(t, string(env), "THE_LOOP_WORK_ITEM=7")

	// tmux new-window from the pane runs in the server's layer: still no keys.
	var nw []byte
	require.Eventually(t, func() bool {
		nw, err = os.ReadFile(filepath.Join(f.wt, "newwindow.txt"))
		return err == nil && strings.Contains(string(nw), "rc=")
	}, 10*time.Second, 50*time.Millisecond)
	require.NotContains(t, string(nw), "PRIVATE-KEY")
	require.NotContains(t, string(nw), "rc=0")

	// A double-forked, setsid child of the harness is still below a launcher.
	pidb, err := os.ReadFile(filepath.Join(f.wt, "orphan.pid"))
	require.NoError(t, err)
	orphan, err := strconv.Atoi(strings.TrimSpace(string(pidb)))
	require.NoError(t, err)
	in, err := sandbox.InSandbox("/proc", orphan)
	require.NoError(t, err)
	require.True(t, in, "the orphan %d was adopted below a launcher", orphan)
	harness, _ := strconv.Atoi(got["pid"])
	in, err = sandbox.InSandbox("/proc", harness)
	require.NoError(t, err)
	require.True(t, in)
	in, err = sandbox.InSandbox("/proc", os.Getpid())
	require.NoError(t, err)
	require.False(t, in, "loopd itself is not in the sandbox")

	// loopd's later tmux commands still reach the pane: load-buffer,
	// paste-buffer, send-keys, capture-pane.
	rc, err := f.tm.Deliver(context.Background(), "loop-github-octo-demo-7", "hello from loopd")
	require.NoError(t, err)
	require.True(t, rc.Verified())
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(f.wt, "report"))
		return strings.Contains(string(b), "got:hello from loopd")
	}, 10*time.Second, 50*time.Millisecond)
}

// With routing.sandbox: off the environment is still allowlisted and the
// agent still descends from a launcher, but files are not confined.
func TestSandboxOffStillFiltersEnvironment(t *testing.T) {
	f := newFixture(t, true)
	got := f.spawn(t, "loop-github-octo-demo-7")
	require.Equal(t, "ok", got["keys"], "off means off: nothing confines the files")
	env, err := os.ReadFile(filepath.Join(f.wt, "environ.txt"))
	require.NoError(t, err)
	require.NotContains(t, string(env), "FAKE-SECRET")
	harness, _ := strconv.Atoi(got["pid"])
	in, err := sandbox.InSandbox("/proc", harness)
	require.NoError(t, err)
	require.True(t, in)
}
