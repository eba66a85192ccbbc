package daemon_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/internal/fakeclaude"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// The end-to-end world: the real daemon (embedded JetStream, real HTTP
// receiver) against githubsim (signed webhooks, stateful REST), a fake
// `claude` on PATH running in real tmux on a private server, real git
// worktrees cloned from a local bare repository.

const (
	repoFull = "octo/demo"
	secret   = "s3cret"
	human    = "dana"
	stranger = "mallory"
	label    = "the-loop: auto-execute"
)

func requireTools(t testing.TB) {
	t.Helper()
	for _, tool := range []string{"tmux", "git", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed; .ci/run installs it", tool)
		}
	}
}

type world struct {
	t      testing.TB
	sim    *githubsim.Server
	d      *daemon.Daemon
	cfg    daemon.Config
	deps   daemon.Deps
	claude string // fake root
	path   string
	remote string
	// remotes are further repositories' clone URLs by owner/repo.
	remotes map[string]string
	socket  string
	cancel  context.CancelFunc
	done    chan error
	obsMu   sync.Mutex
	obs     []daemon.Observation
}

func git(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
}

func newWorld(t testing.TB, edit func(*daemon.Config)) *world {
	t.Helper()
	return newWorldHooks(t, 1, edit)
}

// newWorldHooks is newWorld with hooks webhook subscriptions on the
// receiver (two model a repository hook plus an app hook).
func newWorldHooks(t testing.TB, hooks int, edit func(*daemon.Config)) *world {
	t.Helper()
	requireTools(t)
	sim, err := githubsim.Start(githubsim.Config{Token: "tok", BotLogin: "theloop-bot"})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	return buildWorld(t, sim, hooks, edit, apiIntegrations, map[string]string{"GH_TOKEN": "tok"})
}

// apiIntegrations is GitHub through its REST API at base (githubsim's),
// with the token from GH_TOKEN.
func apiIntegrations(base string) integrations.Config {
	return integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI, MaxAttempts: 3, TimeoutSeconds: 10,
		API: integrations.GitHubAPIConfig{BaseURL: base},
	}}
}

// newWorldWith is a world on a githubsim of the test's own, with the
// integrations configuration integ builds for its REST root and the
// environment env.
func newWorldWith(t testing.TB, sim *githubsim.Server, edit func(*daemon.Config), integ func(base string) integrations.Config, env map[string]string) *world {
	t.Helper()
	requireTools(t)
	return buildWorld(t, sim, 1, edit, integ, env)
}

func buildWorld(t testing.TB, sim *githubsim.Server, hooks int, edit func(*daemon.Config), integ func(base string) integrations.Config, env map[string]string) *world {
	t.Helper()
	// The state root holds the control socket: keep it short (shortdir).
	base := shortdir.New(t)
	w := &world{t: t}

	// The remote: a bare repository whose path ends in owner/repo, so the
	// graph link's repository-identity check accepts the clone.
	w.remote = filepath.Join(base, "remote", "octo", "demo.git")
	seed := filepath.Join(base, "seed")
	require.NoError(t, os.MkdirAll(seed, 0o755))
	git(t, seed, "init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(seed, "README.md"), []byte("demo\n"), 0o644))
	git(t, seed, "add", ".")
	git(t, seed, "commit", "-q", "-m", "init")
	git(t, base, "clone", "-q", "--bare", seed, w.remote)

	w.claude = filepath.Join(base, "claude")
	_, err := fakeclaude.Install(w.claude)
	require.NoError(t, err)
	w.path = filepath.Join(w.claude, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")

	require.NoError(t, sim.AddRepo(repoFull, githubsim.RepoOptions{CloneURL: "file://" + w.remote}))
	w.sim = sim

	w.socket = shortdir.Tmux(t)

	cfg := daemon.DefaultConfig()
	cfg.StateRoot = filepath.Join(base, "state")
	cfg.Webhook.Host, cfg.Webhook.Port = "127.0.0.1", 0
	cfg.Secret = []byte(secret)
	cfg.Repositories = []string{repoFull}
	cfg.Routing.AuthorizedUsers = []string{human}
	cfg.Routing.SpawnOnUnmatched = daemon.SpawnLabeled
	cfg.Routing.RequireStartCommand = false
	cfg.Routing.WorkspaceRoot = filepath.Join(base, "ws")
	cfg.ClaudeEnv = &sessions.ClaudeEnvironment{} // never touch a real ~/.claude
	cfg.SandboxWritable = []string{w.claude}      // the stand-in harness logs there
	cfg.ReconcileInterval = -1
	cfg.EventLog.Path = filepath.Join(cfg.StateRoot, "logs", "events.jsonl")
	cfg.Tmux.SocketPath = w.socket
	cfg.Tmux.Width, cfg.Tmux.Height = 200, 50
	cfg.Tmux.ReadySettle = 150 * time.Millisecond
	cfg.Tmux.PollInterval = 20 * time.Millisecond
	cfg.Tmux.ReadyTimeout = 15 * time.Second
	cfg.Tmux.ReceiptTimeout = 15 * time.Second
	cfg.Tmux.TempDir = t.TempDir()
	// The tests that kill a harness to see an event bring it back must not
	// race the liveness watch; liveness_test.go turns it on.
	cfg.Liveness.Off = true
	if edit != nil {
		edit(&cfg)
	}
	w.cfg = cfg

	set, err := integrations.New(integ(sim.URL()), integrations.Deps{
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Sleep: func(ctx context.Context, d time.Duration) error {
			return integrations.SleepContext(ctx, min(d, 50*time.Millisecond))
		},
	})
	require.NoError(t, err)
	w.deps = daemon.Deps{
		Clock:        graph.SystemClock{},
		Integrations: set,
		Path:         w.path,
		CloneURL: func(it workitem.Ref) string {
			if r, ok := w.remotes[it.Owner+"/"+it.Repo]; ok {
				return r
			}
			return w.remote
		},
		Observer: daemon.ObserverFunc(func(o daemon.Observation) {
			w.obsMu.Lock()
			w.obs = append(w.obs, o)
			w.obsMu.Unlock()
		}),
		Log: testLog{t},
	}
	w.start()
	// The daemon picked its port; subscribe it (one hook per subscription:
	// two model a repository hook plus an app hook). A restart keeps the
	// port (see start).
	for range hooks {
		_, err := sim.AddHook(githubsim.Hook{URL: w.d.WebhookURL(), Secret: secret})
		require.NoError(t, err)
	}
	return w
}

type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (w *world) start() {
	t := w.t
	d, err := daemon.New(w.cfg, w.deps)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-done:
		cancel()
		t.Fatalf("daemon did not start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("daemon did not become ready in 30s")
	}
	w.d, w.cancel, w.done = d, cancel, done
	// A restart listens where the webhooks are subscribed.
	host, port, err := net.SplitHostPort(d.Addr())
	require.NoError(t, err)
	w.cfg.Webhook.Host = host
	w.cfg.Webhook.Port, err = strconv.Atoi(port)
	require.NoError(t, err)
	t.Cleanup(w.stop)
}

func (w *world) stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	select {
	case err := <-w.done:
		require.NoError(w.t, err)
	case <-time.After(60 * time.Second):
		w.t.Error("daemon did not stop in 60s")
	}
	w.cancel = nil
}

func (w *world) item(n int) workitem.Ref {
	it, err := workitem.Parse(fmt.Sprintf("github:%s#%d", repoFull, n))
	require.NoError(w.t, err)
	return it
}

// received is what the fake claude read, all conversations.
func (w *world) received() string {
	b, _ := os.ReadFile(filepath.Join(w.claude, "received.log"))
	return string(b)
}

func (w *world) spawns() int {
	b, _ := os.ReadFile(filepath.Join(w.claude, "argv.log"))
	return strings.Count(string(b), "\tnew\t")
}

func (w *world) eventually(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			w.t.Fatalf("timed out waiting for %s\nreceived:\n%s\nevents:\n%s", what, w.received(), w.eventNames())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func (w *world) observed(kind daemon.Kind, name string) []daemon.Observation {
	w.obsMu.Lock()
	defer w.obsMu.Unlock()
	var out []daemon.Observation
	for _, o := range w.obs {
		if o.Kind == kind && (name == "" || o.Name == name) {
			out = append(out, o)
		}
	}
	return out
}

func (w *world) eventNames() string {
	w.obsMu.Lock()
	defer w.obsMu.Unlock()
	var b strings.Builder
	for _, o := range w.obs {
		fmt.Fprintf(&b, "  %s %s %s %v\n", o.Kind, o.Name, o.WorkItem, o.Fields)
	}
	return b.String()
}

func (w *world) count(name string) int {
	w.obsMu.Lock()
	defer w.obsMu.Unlock()
	n := 0
	for _, o := range w.obs {
		if o.Name == name {
			n++
		}
	}
	return n
}

// waitIdle waits until the sim delivered everything and the queue is empty.
func (w *world) waitIdle() {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(w.t, w.sim.WaitDeliveries(ctx))
	w.eventually("the queue to drain", func() bool {
		n, err := w.d.Pending(ctx)
		return err == nil && n == 0
	})
}

func (w *world) checkout(n int) string {
	rec, err := sessions.OpenRegistry(sessions.RegistryDir(w.cfg.StateRoot))
	require.NoError(w.t, err)
	r, err := rec.Get(w.item(n))
	require.NoError(w.t, err)
	return r.Cwd
}

func (w *world) state(n int) *graph.State {
	st, err := loop.NewStore(w.checkout(n), "").Load(context.Background(), fmt.Sprintf("issue-%d", n))
	require.NoError(w.t, err)
	return st
}

// openLabeled opens issue and labels it with the arming label, as dana.
func (w *world) openLabeled() int {
	is, err := w.sim.OpenIssue(repoFull, human, "Add a widget", "Please add a widget.")
	require.NoError(w.t, err)
	require.NoError(w.t, w.sim.AddLabel(repoFull, is.Number, human, label))
	return is.Number
}

// claim does what the agent does when a node's work is done: write the
// artifact and run `loopctl graph complete` (the same runtime call).
func (w *world) claim(n int, node string, files map[string]string) *graph.Claim {
	w.t.Helper()
	return w.claimIn(w.checkout(n), fmt.Sprintf("issue-%d", n), node, files)
}

// claimIn is claim for the work item id checked out at cwd.
func (w *world) claimIn(cwd, id, node string, files map[string]string) *graph.Claim {
	w.t.Helper()
	for name, body := range files {
		p := filepath.Join(cwd, "docs", "specs", id, name)
		require.NoError(w.t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(w.t, os.WriteFile(p, []byte(body), 0o644))
	}
	rt, err := loop.Open(cwd, loop.Options{WorkItem: id, AuthorizedUsers: w.cfg.Routing.AuthorizedUsers})
	require.NoError(w.t, err)
	c, err := rt.Complete(context.Background(), id, node, "agent")
	require.NoError(w.t, err)
	return c
}

// landlockOnly runs a test's sessions under routing.sandbox: landlock, on
// the one tmux server of loopd's own: for tests that drive that server
// directly from the host (a pane's pid, tmux -S on the test's socket).
// Sessions in worlds of their own are the default; TestWorld* and the
// sandbox package's escape suite cover them.
func landlockOnly(c *daemon.Config) { c.Routing.Sandbox = "landlock" }
