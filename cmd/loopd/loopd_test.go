package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

func testEnv(t *testing.T, vars map[string]string) (*env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &env{
		Stdout: &out, Stderr: &errb,
		Getenv:    func(k string) string { return vars[k] },
		LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok },
		Getwd:     func() (string, error) { return t.TempDir(), nil },
		HomeDir:   func() (string, error) { return t.TempDir(), nil },
		Context:   func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
	}, &out, &errb
}

func TestRunWithoutSecretExits2WithTheFix(t *testing.T) {
	e, _, errb := testEnv(t, map[string]string{})
	code := Main([]string{"loopd", "run", "--state-root", t.TempDir()}, e)
	require.Equal(t, exitRefused, code)
	require.Contains(t, errb.String(), "THE_LOOP_GH_WEBHOOK_SECRET")
	require.Contains(t, errb.String(), "--insecure-accept-unsigned")
}

// TestRunRefusesUnsafeWebhookSettings: loopd run refuses, before binding
// anything, an unsigned receiver on a reachable address and a secret no
// GitHub delivery could match, naming the flag, key or variable to fix.
func TestRunRefusesUnsafeWebhookSettings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config string
		env    map[string]string
		flags  []string
		want   []string
	}{
		{"unsigned on every interface", "webhooks:\n  ghWebhook:\n    host: 0.0.0.0\n    port: 0\n", nil,
			[]string{"--insecure-accept-unsigned"}, []string{"--insecure-accept-unsigned", "webhooks.ghWebhook.host", "0.0.0.0"}},
		{"unsigned on a named host", "webhooks:\n  ghWebhook:\n    host: example.com\n    port: 0\n", nil,
			[]string{"--insecure-accept-unsigned"}, []string{"--insecure-accept-unsigned", "webhooks.ghWebhook.host"}},
		{"secret with a trailing newline", "", map[string]string{"THE_LOOP_GH_WEBHOOK_SECRET": "s3cret\n"}, nil,
			[]string{"THE_LOOP_GH_WEBHOOK_SECRET", "whitespace"}},
		{"blank secret", "", map[string]string{"THE_LOOP_GH_WEBHOOK_SECRET": "   "}, nil,
			[]string{"THE_LOOP_GH_WEBHOOK_SECRET", "blank"}},
		// The Slack Events API fails closed as the webhook does.
		{"slack events without a signing secret", "channels:\n  slack: {enabled: true, channel: C1}\n",
			map[string]string{"THE_LOOP_GH_WEBHOOK_SECRET": "s3cret", "THE_LOOP_SLACK_BOT_TOKEN": "xoxb-1"}, nil,
			[]string{"THE_LOOP_SLACK_SIGNING_SECRET", "channels.slack.signingSecretEnv"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, _, errb := testEnv(t, tc.env)
			args := []string{"loopd", "run", "--state-root", t.TempDir()}
			if tc.config != "" {
				f := filepath.Join(t.TempDir(), "cli-config.yaml")
				require.NoError(t, os.WriteFile(f, []byte(tc.config), 0o600))
				args = append(args, "--config", f)
			}
			args = append(args, tc.flags...)
			require.Equal(t, exitRefused, Main(args, e), errb.String())
			for _, w := range tc.want {
				require.Contains(t, errb.String(), w)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	e, out, _ := testEnv(t, nil)
	require.Equal(t, exitOK, Main([]string{"loopd", "--version"}, e))
	require.Contains(t, out.String(), "loopd version")
}

// TestMain removes the binary built for the process-level tests, which
// would otherwise stay in $TMPDIR after every run.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// The built binary, for process-level tests.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func loopdBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "loopd-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "loopd")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
}

// kill -9 of loopd right after it answered 202 for the spawning webhook:
// after a restart the event is handled exactly once — one session, one
// announcement, the graph started once.
func TestKill9AfterAcceptThenRestartHandlesOnce(t *testing.T) {
	w := newKillWorld(t)
	sim, state, claudeRoot := w.sim, w.state, w.claudeRoot
	accepted := make(chan string, 16)
	w.setOnDelivery(func(d githubsim.Delivery) {
		if d.Action == "labeled" && d.Sender == "dana" && d.Status == http.StatusAccepted {
			accepted <- d.ID
		}
	})
	start := w.start
	cmd := start()
	is, err := sim.OpenIssue("octo/demo", "dana", "Add a widget", "body")
	require.NoError(t, err)
	require.NoError(t, sim.AddLabel("octo/demo", is.Number, "dana", "the-loop: auto-execute"))
	select {
	case <-accepted:
	case <-time.After(30 * time.Second):
		t.Fatal("the labeled webhook was never accepted")
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_, _ = cmd.Process.Wait()

	start()
	announced := func() int {
		cs, err := sim.Comments("octo/demo", is.Number)
		require.NoError(t, err)
		n := 0
		for _, c := range cs {
			if strings.Contains(c.Body, "attach -t loop-github-octo-demo-1") || strings.Contains(c.Body, "attach -t =loop-github-octo-demo-1") {
				n++
			}
		}
		return n
	}
	dumpEvents := func() string {
		b, _ := os.ReadFile(filepath.Join(state, "logs", "events.jsonl"))
		return string(b)
	}
	deadline := time.Now().Add(45 * time.Second)
	for announced() == 0 {
		require.True(t, time.Now().Before(deadline), "no announcement after the restart; events:\n%s", dumpEvents())
		time.Sleep(50 * time.Millisecond)
	}
	cwd := filepath.Join(w.base, "ws", ".clones", "github.com", "octo", "demo", "github-octo-demo-1")
	deadline = time.Now().Add(30 * time.Second)
	for {
		st, err := loop.NewStore(cwd, "").Load(context.Background(), "issue-1")
		if err == nil && st.CurrentNode == "phase-selection" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the graph did not start: %v", err)
		time.Sleep(50 * time.Millisecond)
	}
	// Let any duplicate work surface before counting.
	require.NoError(t, sim.WaitDeliveries(context.Background()))
	time.Sleep(time.Second)
	argv, _ := os.ReadFile(filepath.Join(claudeRoot, "argv.log"))
	require.Equal(t, 1, strings.Count(string(argv), "\tnew\t"), "one session spawned: %s", argv)
	require.Equal(t, 1, announced(), "one announcement")
	received, _ := os.ReadFile(filepath.Join(claudeRoot, "received.log"))
	require.Equal(t, 1, strings.Count(string(received), "Start by running"), "the spawn prompt pasted once")
	evs, err := loop.ReadEvents(filepath.Join(state, "logs", "events.jsonl"), loop.EventQuery{Event: "dispatch.spawned"})
	require.NoError(t, err)
	require.Len(t, evs, 1, "one spawn in the event log across both runs")
	starts, err := loop.ReadEvents(filepath.Join(state, "logs", "events.jsonl"), loop.EventQuery{Event: "daemon.started"})
	require.NoError(t, err)
	require.Len(t, starts, 2)
	t.Logf("spawned by the run started at %s (runs: %s, %s)", evs[0].Time, starts[0].Time, starts[1].Time)
}

// loopd's resident memory when idle (embedded JetStream included), read
// from /proc after start-up settles. A generous bound catches a leak or a
// mis-sized buffer; the figure is logged for the README.
func TestIdleRSS(t *testing.T) {
	for _, tracked := range []int{0, 1000} {
		t.Run(fmt.Sprintf("tracked=%d", tracked), func(t *testing.T) { idleRSS(t, tracked) })
	}
}

func idleRSS(t *testing.T, tracked int) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc on this system")
	}
	bin := loopdBinary(t)
	base := shortdir.New(t) // holds the state root and its control socket
	if tracked > 0 {
		reg, err := sessions.OpenRegistry(sessions.RegistryDir(filepath.Join(base, "state")))
		require.NoError(t, err)
		for i := 1; i <= tracked; i++ {
			item, err := workitem.Parse(fmt.Sprintf("github:octo/demo#%d", i))
			require.NoError(t, err)
			id, err := sessions.NewSessionID()
			require.NoError(t, err)
			require.NoError(t, reg.Put(context.Background(), sessions.Record{Item: item, Harness: "claude", SessionID: id,
				TmuxName: sessions.TmuxName(item), Cwd: base, Status: sessions.StatusActive, Created: time.Now().UTC().Truncate(time.Second)}))
		}
	}
	cmd := exec.Command(bin, "run", "--state-root", filepath.Join(base, "state"), "--insecure-accept-unsigned")
	cmd.Dir = base
	cfg := filepath.Join(base, "cli-config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("webhooks:\n  ghWebhook:\n    port: 0\nrepositories: [octo/demo]\n"), 0o600))
	cmd.Args = append(cmd.Args, "--config", cfg)
	cmd.Env = append(os.Environ(), "HOME="+base, "THE_LOOP_GH_WEBHOOK_SECRET=", "GH_TOKEN=x")
	var logs lockedBuffer
	addr := startListening(t, cmd, &logs)
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _, _ = cmd.Process.Wait() }()
	waitAnswering(t, addr)
	time.Sleep(2 * time.Second)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	require.NoError(t, err)
	// VmRSS counts the executable's own pages too (clean, shared with
	// every loopd, given back under pressure); on kernels that map a
	// cached executable with 2 MB pages it is nearly the whole file. The
	// anonymous part is the memory loopd allocates.
	kb := map[string]int{}
	for _, line := range strings.Split(string(status), "\n") {
		for _, key := range []string{"VmRSS", "RssAnon", "RssFile"} {
			if v, ok := strings.CutPrefix(line, key+":"); ok {
				var n int
				_, err := fmt.Sscanf(v, "%d", &n)
				require.NoError(t, err)
				kb[key] = n
			}
		}
	}
	t.Logf("loopd idle RSS with %d tracked work items: %.1f MB (anonymous %.1f MB, the executable's file pages %.1f MB)",
		tracked, float64(kb["VmRSS"])/1024, float64(kb["RssAnon"])/1024, float64(kb["RssFile"])/1024)
	require.NotZero(t, kb["VmRSS"], "VmRSS read from /proc")
	require.Less(t, kb["VmRSS"], 150*1024, "idle RSS")
}

// SIGTERM stops loopd cleanly (exit 0) and frees the state root for the
// next instance; a second instance on the same state root is refused.
func TestOneInstancePerStateRootAndSIGTERMExitsCleanly(t *testing.T) {
	bin := loopdBinary(t)
	base := shortdir.New(t) // holds the state root and its control socket
	state := filepath.Join(base, "state")
	cfg := filepath.Join(base, "cfg.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("webhooks:\n  ghWebhook:\n    port: 0\nrepositories: [octo/demo]\n"), 0o600))
	run := func() *exec.Cmd {
		cmd := exec.Command(bin, "run", "--state-root", state, "--config", cfg)
		cmd.Dir = base
		cmd.Env = append(os.Environ(), "HOME="+base, "THE_LOOP_GH_WEBHOOK_SECRET=s", "GH_TOKEN=x")
		return cmd
	}
	first := run()
	var logs lockedBuffer
	addr := startListening(t, first, &logs)
	waitAnswering(t, addr)
	second := run()
	out, err := second.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, exitRefused, ee.ExitCode())
	require.Contains(t, string(out), "another loopd")

	require.NoError(t, first.Process.Signal(syscall.SIGTERM))
	require.NoError(t, first.Wait(), "SIGTERM is a clean exit")
}

// loopd exits 2 at start when it could not work (docs/decisions.md
// §20): no repository served, or a GitHub transport without credentials —
// naming the key and the fix, instead of starting "healthy".
func TestRunThatCannotWorkExits2NamingTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
		says       []string
	}{
		{"no repository", "integrations:\n  github: {transport: api}\n", map[string]string{"GH_TOKEN": "t"}, []string{"no repository is served", "repositories: [owner/repo]"}},
		{"api without a token", "repositories: [octo/demo]\nintegrations:\n  github: {transport: api}\n", nil, []string{"integrations.github (transport api)", "GH_TOKEN", "github.set-labels"}},
		{"state root in a checkout", "repositories: [octo/demo]\nintegrations:\n  github: {transport: api}\n", map[string]string{"GH_TOKEN": "t", "_git": "1"}, []string{"is inside the git checkout", "pass --state-root"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "cli-config.yaml")
			require.NoError(t, os.WriteFile(path, []byte(tc.yaml), 0o600))
			if tc.env["_git"] != "" {
				require.NoError(t, os.Mkdir(filepath.Join(dir, ".git"), 0o755))
				delete(tc.env, "_git")
			}
			vars := map[string]string{daemon.DefaultSecretEnv: "s3cret"}
			for k, v := range tc.env {
				vars[k] = v
			}
			e, _, stderr := testEnv(t, vars)
			code := Main([]string{"loopd", "run", "--config", path, "--state-root", filepath.Join(dir, "st")}, e)
			require.Equal(t, exitRefused, code, stderr.String())
			for _, s := range tc.says {
				require.Contains(t, stderr.String(), s)
			}
		})
	}
}
