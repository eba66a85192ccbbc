package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/internal/fakeclaude"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
)

// killWorld is a real loopd process serving octo/demo from githubsim, its
// agent the fake Claude Code in a real tmux server that outlives loopd (so a
// kill -9 leaves the session live), restarted on the same port and state.
type killWorld struct {
	t          *testing.T
	bin        string
	base       string
	state      string
	claudeRoot string
	cfgPath    string
	sim        *githubsim.Server
	addr       string
	runs       int
	// onDelivery, when set, sees every delivery githubsim makes.
	mu         sync.Mutex
	onDelivery func(githubsim.Delivery)
}

func newKillWorld(t *testing.T) *killWorld {
	t.Helper()
	for _, tool := range []string{"tmux", "git", "bash", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	w := &killWorld{t: t, bin: loopdBinary(t), base: shortdir.New(t)} // base holds the state root and its control socket
	remote := filepath.Join(w.base, "remote", "octo", "demo.git")
	seed := filepath.Join(w.base, "seed")
	require.NoError(t, os.MkdirAll(seed, 0o755))
	gitRun(t, seed, "init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(seed, "README.md"), []byte("demo\n"), 0o644))
	gitRun(t, seed, "add", ".")
	gitRun(t, seed, "commit", "-q", "-m", "init")
	gitRun(t, w.base, "clone", "-q", "--bare", seed, remote)
	// The stand-in harness logs where a confined agent may write: a cache
	// directory under its HOME (HOME=base below).
	w.claudeRoot = filepath.Join(w.base, ".cache", "fakeclaude")
	_, err := fakeclaude.Install(w.claudeRoot)
	require.NoError(t, err)
	tmuxDir := filepath.Join(w.base, "tmux")
	require.NoError(t, os.MkdirAll(tmuxDir, 0o700))
	t.Cleanup(func() {
		// loopd runs its own server (theloop-<hash>) in this directory.
		socks, _ := filepath.Glob(filepath.Join(tmuxDir, "tmux-*", "*"))
		for _, s := range socks {
			_ = exec.Command("tmux", "-S", s, "kill-server").Run()
		}
	})
	w.sim, err = githubsim.Start(githubsim.Config{Token: "tok", BotLogin: "theloop-bot",
		OnDelivery: func(d githubsim.Delivery) {
			w.mu.Lock()
			f := w.onDelivery
			w.mu.Unlock()
			if f != nil {
				f(d)
			}
		}})
	require.NoError(t, err)
	t.Cleanup(w.sim.Close)
	require.NoError(t, w.sim.AddRepo("octo/demo", githubsim.RepoOptions{CloneURL: "file://" + remote}))
	w.state = filepath.Join(w.base, "state")
	w.cfgPath = filepath.Join(w.base, "cli-config.yaml")
	w.writeConfig(0)
	return w
}

func (w *killWorld) setOnDelivery(f func(githubsim.Delivery)) {
	w.mu.Lock()
	w.onDelivery = f
	w.mu.Unlock()
}

// writeConfig writes loopd's configuration. Port 0 on the first start: the
// kernel picks it at bind time (a port the test picked and closed could be
// taken before loopd binds it); a restart reuses the port the first run
// bound, as the hook points there.
func (w *killWorld) writeConfig(port int) {
	require.NoError(w.t, os.WriteFile(w.cfgPath, []byte(fmt.Sprintf(`version: "0.5.0"
state:
  root: %s
repositories: [octo/demo]
webhooks:
  ghWebhook:
    host: 127.0.0.1
    port: %d
routing:
  # The stand-in harness logs what it ran and was sent beside its binary,
  # under HOME: a world's private home would hide it from the test. What
  # these tests count (spawns and pastes across kill -9) is the same in
  # either sandbox.
  sandbox: landlock
  authorizedUsers: [dana]
  spawnOnUnmatched: labeled
  control:
    requireStartCommand: false
  workspace:
    root: %s
    cloneUrl: file://%s
integrations:
  github:
    transport: api
    api:
      baseUrl: %s
`, w.state, port, filepath.Join(w.base, "ws"), filepath.Join(w.base, "remote", "octo", "demo.git"), w.sim.URL())), 0o600))
}

// start runs loopd and returns once it answers /healthz and has logged
// daemon.started for this run (webhooks are taken, and kept, as soon as
// /healthz answers).
func (w *killWorld) start() *exec.Cmd {
	t := w.t
	cmd := exec.Command(w.bin, "run", "--config", w.cfgPath)
	cmd.Dir = w.base
	cmd.Env = append(os.Environ(),
		"THE_LOOP_GH_WEBHOOK_SECRET=s3cret", "GH_TOKEN=tok", "HOME="+w.base, "TMUX_TMPDIR="+filepath.Join(w.base, "tmux"),
		"PATH="+filepath.Join(w.claudeRoot, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	var logb lockedBuffer
	bound := startListening(t, cmd, &logb)
	if w.addr == "" {
		w.addr = bound
		_, port, err := net.SplitHostPort(w.addr)
		require.NoError(t, err)
		p, err := strconv.Atoi(port)
		require.NoError(t, err)
		w.writeConfig(p)
		_, err = w.sim.AddHook(githubsim.Hook{URL: "http://" + w.addr + "/gh-webhook", Secret: "s3cret"})
		require.NoError(t, err)
	}
	require.Equal(t, w.addr, bound, "the restart binds the port the hook points at")
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
		if t.Failed() {
			t.Logf("loopd output:\n%s", logb.String())
		}
	})
	w.runs++
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + w.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				starts, _ := loop.ReadEvents(w.eventLog(), loop.EventQuery{Event: "daemon.started"})
				if len(starts) == w.runs {
					return cmd
				}
			}
		}
		require.True(t, time.Now().Before(deadline), "loopd did not answer /healthz and log daemon.started")
		time.Sleep(20 * time.Millisecond)
	}
}

func (w *killWorld) kill9(cmd *exec.Cmd) {
	require.NoError(w.t, cmd.Process.Signal(syscall.SIGKILL))
	_, _ = cmd.Process.Wait()
}

func (w *killWorld) eventLog() string { return filepath.Join(w.state, "logs", "events.jsonl") }

func (w *killWorld) received() string {
	b, _ := os.ReadFile(filepath.Join(w.claudeRoot, "received.log"))
	return string(b)
}

func (w *killWorld) argv() string {
	b, _ := os.ReadFile(filepath.Join(w.claudeRoot, "argv.log"))
	return string(b)
}

// TestTwentySIGKILLsUnderLoadWithALiveSession (issue 34): comments stream
// onto a work item whose agent session is live while loopd is killed with
// SIGKILL 20 times, at random moments, and restarted each time on the same
// state. Every comment reaches the agent exactly once: none is lost (those
// GitHub could not deliver while loopd was down come back by redelivery or
// the poller at the next start), none is pasted twice (a paste's intent is
// recorded before it and looked for in the pane after a crash), and the
// session is never spawned again.
func TestTwentySIGKILLsUnderLoadWithALiveSession(t *testing.T) {
	if testing.Short() {
		t.Skip("kills and restarts loopd 20 times")
	}
	const kills = 20
	w := newKillWorld(t)
	var acked sync.Map // comment note → true, once a delivery of it was answered 202
	w.setOnDelivery(func(d githubsim.Delivery) {
		if d.Event == "issue_comment" && d.Status == http.StatusAccepted {
			var note string
			if i := strings.Index(string(d.Body), "kill-note-"); i >= 0 {
				note = string(d.Body[i : i+len("kill-note-0000")])
				acked.Store(note, true)
			}
		}
	})
	cmd := w.start()
	is, err := w.sim.OpenIssue("octo/demo", "dana", "Add a widget", "body")
	require.NoError(t, err)
	require.NoError(t, w.sim.AddLabel("octo/demo", is.Number, "dana", "the-loop: auto-execute"))
	w.eventually(60*time.Second, "the spawn prompt in the live session", func() bool { return strings.Contains(w.received(), "Start by running") })

	// The load: a comment every 25–75 ms, for as long as the kills go on.
	stop := make(chan struct{})
	var posted []string
	var load sync.WaitGroup
	load.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(25+rand.IntN(50)) * time.Millisecond):
			}
			note := fmt.Sprintf("kill-note-%04d", i)
			if _, err := w.sim.Comment("octo/demo", is.Number, "dana", "please also look at "+note+" when you can"); err != nil {
				t.Errorf("comment: %v", err)
				return
			}
			posted = append(posted, note)
		}
	})
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(300+rand.IntN(900)) * time.Millisecond)
		w.kill9(cmd)
		cmd = w.start()
	}
	close(stop)
	load.Wait()

	// Everything posted reaches the agent: delivered, redelivered at a
	// start, or found by the poller.
	require.NoError(t, w.sim.WaitDeliveries(context.Background()))
	missing := func() []string {
		got := w.received()
		var out []string
		for _, n := range posted {
			if !strings.Contains(got, n) {
				out = append(out, n)
			}
		}
		return out
	}
	deadline := time.Now().Add(3 * time.Minute)
	for len(missing()) > 0 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // let any duplicate surface before counting

	got := w.received()
	ackedN, twice := 0, []string{}
	for _, n := range posted {
		if _, ok := acked.Load(n); ok {
			ackedN++
		}
		if c := strings.Count(got, n); c > 1 {
			twice = append(twice, fmt.Sprintf("%s ×%d", n, c))
		}
	}
	lost := missing()
	found, _ := loop.ReadEvents(w.eventLog(), loop.EventQuery{Event: "dispatch.paste_found"})
	t.Logf("%d SIGKILLs, %d comments posted (%d answered 202 on a first or later delivery): %d lost, %d pasted twice; %d pastes found in the pane after a crash (not pasted again); sessions spawned: %d",
		kills, len(posted), ackedN, len(lost), len(twice), len(found), strings.Count(w.argv(), "\tnew\t"))
	require.Empty(t, lost, "comments that never reached the agent")
	require.Empty(t, twice, "comments pasted into the agent twice")
	require.Equal(t, 1, strings.Count(w.argv(), "\tnew\t"), "one session across every kill: %s", w.argv())
	require.NotEmpty(t, posted)
}

func (w *killWorld) eventually(d time.Duration, what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		require.True(w.t, time.Now().Before(deadline), "timed out waiting for %s", what)
		time.Sleep(50 * time.Millisecond)
	}
}
