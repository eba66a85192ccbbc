package daemon_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/internal/fakeclaude"
	"github.com/theloop-dev/theloop/internal/natstest"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/loop/daemon/dispatch"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// clusterNode is one machine of the cluster test: its own state root,
// workspace root, tmux server and Claude Code (fake) home.
type clusterNode struct {
	name   string
	cfg    daemon.Config
	deps   daemon.Deps
	d      *daemon.Daemon
	claude string
	socket string
	cancel context.CancelFunc
	done   chan error
	dead   atomic.Bool
}

// run starts (or restarts) the node's daemon.
func (n *clusterNode) run(t *testing.T) {
	// The queue's streams need the cluster's meta leader settled.
	for attempt := 0; ; attempt++ {
		d, err := daemon.New(n.cfg, n.deps)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		select {
		case <-d.Ready():
			n.d, n.cancel, n.done = d, cancel, done
			n.dead.Store(false)
			return
		case err := <-done:
			cancel()
			require.Less(t, attempt, 20, "daemon %s did not start: %v", n.name, err)
			time.Sleep(500 * time.Millisecond)
		case <-time.After(60 * time.Second):
			cancel()
			t.Fatalf("daemon %s did not become ready in 60s", n.name)
		}
	}
}

func (n *clusterNode) live(t *testing.T) []string {
	reg, err := sessions.OpenRegistry(sessions.RegistryDir(n.cfg.StateRoot))
	require.NoError(t, err)
	recs, _ := reg.List()
	var out []string
	for _, r := range recs {
		if r.Status.Live() {
			out = append(out, r.Item.String())
		}
	}
	sort.Strings(out)
	return out
}

func (n *clusterNode) received() string {
	b, _ := os.ReadFile(filepath.Join(n.claude, "received.log"))
	return string(b)
}

// TestClusterTakeoverRealSessions: three real loopd (the real daemon:
// receiver, queue, intake, tmux sessions of a fake claude, git worktrees)
// as nodes of an in-process 3-server NATS cluster, behind one webhook URL
// (a round-robin reverse proxy). Six labeled issues spawn six sessions
// spread over the nodes (capacity 3 each). The node with the most items
// stops and its tmux server is killed (the machine is gone): after the
// lease TTL the survivors take its items over — a new worktree and a
// session (its conversation is on the dead machine, so a fresh one seeded
// with the artifacts), recorded as session.takeover — and a later comment
// on a moved item reaches the new owner's session. The ownership log shows
// no item owned by two nodes at once and no node over its capacity.
func TestClusterTakeoverRealSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server NATS cluster and three daemons with tmux")
	}
	requireTools(t)
	urls := natstest.Cluster(t, 3)
	// Sockets (control, tmux) live under base: keep it short (shortdir).
	base := shortdir.New(t)

	remote := filepath.Join(base, "remote", "octo", "demo.git")
	seed := filepath.Join(base, "seed")
	require.NoError(t, os.MkdirAll(seed, 0o755))
	git(t, seed, "init", "-q", "-b", "main")
	require.NoError(t, os.WriteFile(filepath.Join(seed, "README.md"), []byte("demo\n"), 0o644))
	git(t, seed, "add", ".")
	git(t, seed, "commit", "-q", "-m", "init")
	git(t, base, "clone", "-q", "--bare", seed, remote)

	sim, err := githubsim.Start(githubsim.Config{Token: "tok", BotLogin: "theloop-bot"})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	require.NoError(t, sim.AddRepo(repoFull, githubsim.RepoOptions{CloneURL: "file://" + remote}))

	const ttl = 2 * time.Second
	const capacity = 3
	var ownMu sync.Mutex
	var own []dispatch.Ownership
	var obsMu sync.Mutex
	var obs []daemon.Observation

	start := func(i int) *clusterNode {
		name := string(rune('a' + i))
		nb := filepath.Join(base, "node-"+name)
		n := &clusterNode{name: name, claude: filepath.Join(nb, "claude"), socket: shortdir.Tmux(t)}
		_, err := fakeclaude.Install(n.claude)
		require.NoError(t, err)
		cfg := daemon.DefaultConfig()
		cfg.StateRoot = filepath.Join(nb, "state")
		cfg.Webhook.Host, cfg.Webhook.Port = "127.0.0.1", 0
		cfg.Secret = []byte(secret)
		cfg.Repositories = []string{repoFull}
		cfg.Routing.AuthorizedUsers = []string{human}
		cfg.Routing.SpawnOnUnmatched = daemon.SpawnLabeled
		cfg.Routing.RequireStartCommand = false
		cfg.Routing.WorkspaceRoot = filepath.Join(nb, "ws")
		cfg.ClaudeEnv = &sessions.ClaudeEnvironment{}
		cfg.SandboxWritable = []string{n.claude}
		cfg.ReconcileInterval = -1
		cfg.EventLog.Path = filepath.Join(cfg.StateRoot, "logs", "events.jsonl")
		cfg.Tmux.SocketPath = n.socket
		cfg.Tmux.Width, cfg.Tmux.Height = 200, 50
		cfg.Tmux.ReadySettle = 150 * time.Millisecond
		cfg.Tmux.PollInterval = 20 * time.Millisecond
		cfg.Tmux.ReadyTimeout = 20 * time.Second
		cfg.Tmux.ReceiptTimeout = 20 * time.Second
		cfg.Tmux.TempDir = t.TempDir()
		cfg.Queue.URL = urls[i]
		cfg.Settings.Service.Node, cfg.Settings.Service.MaxSessions, cfg.Settings.Service.LeaseTTL, cfg.Queue.Replicas = name, capacity, ttl, 3
		n.cfg = cfg
		set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
			Transport: integrations.TransportAPI, MaxAttempts: 3, TimeoutSeconds: 10,
			API: integrations.GitHubAPIConfig{BaseURL: sim.URL()},
		}}, integrations.Deps{
			Env: func(k string) (string, bool) { return "tok", k == "GH_TOKEN" },
			Sleep: func(ctx context.Context, d time.Duration) error {
				return integrations.SleepContext(ctx, min(d, 50*time.Millisecond))
			},
		})
		require.NoError(t, err)
		deps := daemon.Deps{
			Clock:        graph.SystemClock{},
			Integrations: set,
			Path:         filepath.Join(n.claude, "bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
			CloneURL:     func(workitem.Ref) string { return remote },
			Observer: daemon.ObserverFunc(func(o daemon.Observation) {
				if o.Fields == nil {
					o.Fields = map[string]any{}
				}
				o.Fields["test_node"] = name
				obsMu.Lock()
				obs = append(obs, o)
				obsMu.Unlock()
			}),
			Log: testLog{t},
			Ownership: func(o dispatch.Ownership) {
				ownMu.Lock()
				own = append(own, o)
				ownMu.Unlock()
			},
		}
		n.deps = deps
		n.run(t)
		t.Cleanup(func() {
			if !n.dead.Load() {
				n.cancel()
				<-n.done
			}
		})
		return n
	}
	nodes := []*clusterNode{start(0), start(1), start(2)}

	// One webhook URL in front of every live node (a load balancer).
	var rr atomic.Int64
	front := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		for range len(nodes) {
			n := nodes[int(rr.Add(1))%len(nodes)]
			if n.dead.Load() {
				continue
			}
			u, _ := url.Parse("http://" + n.d.Addr())
			httputil.NewSingleHostReverseProxy(u).ServeHTTP(rw, r)
			return
		}
		http.Error(rw, "no node", http.StatusBadGateway)
	}))
	t.Cleanup(front.Close)
	_, err = sim.AddHook(githubsim.Hook{URL: front.URL + nodes[0].cfg.Webhook.Path, Secret: secret})
	require.NoError(t, err)

	eventually := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(120 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	const items = 6
	for range items {
		is, err := sim.OpenIssue(repoFull, human, "Add a widget", "Please add a widget.")
		require.NoError(t, err)
		require.NoError(t, sim.AddLabel(repoFull, is.Number, human, label))
	}
	liveCount := func(ns ...*clusterNode) int {
		c := 0
		for _, n := range ns {
			c += len(n.live(t))
		}
		return c
	}
	eventually("six sessions spread over the nodes", func() bool { return liveCount(nodes...) == items })
	victim := nodes[0]
	for _, n := range nodes {
		require.LessOrEqual(t, len(n.live(t)), capacity, "%s over its capacity", n.name)
		if len(n.live(t)) > len(victim.live(t)) {
			victim = n
		}
	}
	orphans := victim.live(t)
	// Its status says which items it owns.
	var st api.Status
	require.NoError(t, api.NewSocketClient(victim.d.ControlSocket()).Do(context.Background(), "GET", "/status", nil, nil, &st))
	require.NotNil(t, st.Cluster)
	require.Equal(t, victim.name, st.Cluster.Node)
	require.Len(t, st.Cluster.Owned, len(orphans))
	require.NotEmpty(t, orphans)
	var survivors []*clusterNode
	for _, n := range nodes {
		if n != victim {
			survivors = append(survivors, n)
		}
	}

	// The victim's agent on the first orphan pushed its work so far: the
	// artifacts a fresh session on another machine is pointed at.
	pushed, err := workitem.Parse(orphans[0])
	require.NoError(t, err)
	{
		reg, err := sessions.OpenRegistry(sessions.RegistryDir(victim.cfg.StateRoot))
		require.NoError(t, err)
		rec, err := reg.Get(pushed)
		require.NoError(t, err)
		rel := filepath.Join("docs", "specs", pushed.SpecID(), "requirements.md")
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(rec.Cwd, rel)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(rec.Cwd, rel), []byte("# Requirements\n- a widget\n"), 0o644))
		git(t, rec.Cwd, "add", rel)
		git(t, rec.Cwd, "commit", "-q", "-m", "requirements")
		git(t, rec.Cwd, "push", "-q", "origin", "HEAD:refs/heads/"+pushed.Branch())
	}

	// The victim's machine goes away: loopd stops (without giving its
	// items up: their sessions were live) and its tmux server dies.
	victim.dead.Store(true)
	killedAt := time.Now()
	victim.cancel()
	<-victim.done
	_ = exec.Command("tmux", "-S", victim.socket, "kill-server").Run()

	takeovers := map[string]daemon.Observation{}
	eventually("the dead node's items taken over (session.takeover recorded)", func() bool {
		obsMu.Lock()
		defer obsMu.Unlock()
		for _, o := range obs {
			if o.Name == "session.takeover" {
				takeovers[o.WorkItem] = o
			}
		}
		return len(takeovers) == len(orphans)
	})
	takenAt := time.Now()
	require.Equal(t, items, liveCount(survivors...), "the survivors run all six sessions")
	for _, it := range orphans {
		o, ok := takeovers[it]
		require.True(t, ok, "%s taken over", it)
		require.Equal(t, victim.name, o.Fields["from_node"])
		require.NotEqual(t, victim.name, o.Fields["test_node"])
	}

	// Its conversation is on the dead machine: a fresh session started,
	// pointed at the pushed artifacts.
	require.Equal(t, false, takeovers[orphans[0]].Fields["resumed"])
	require.Equal(t, []string{filepath.Join("docs", "specs", pushed.SpecID(), "requirements.md")}, takeovers[orphans[0]].Fields["artifacts"])

	// A comment on a moved item reaches its new owner's session.
	moved, err := workitem.Parse(orphans[0])
	require.NoError(t, err)
	_, err = sim.Comment(repoFull, moved.Number, human, "please also add tests after the move")
	require.NoError(t, err)
	eventually("the comment pasted into the new owner's session", func() bool {
		for _, n := range survivors {
			if strings.Contains(n.received(), "please also add tests after the move") {
				return true
			}
		}
		return false
	})

	// The victim comes back (same name and state root) after its items
	// moved: it does not take them back, and stops what it still had.
	victim.cfg.Webhook.Host, victim.cfg.Webhook.Port = "127.0.0.1", 0
	victim.run(t)
	eventually("the returning node drops the moved items", func() bool { return len(victim.live(t)) == 0 })
	require.Equal(t, items, liveCount(survivors...), "the survivors keep them")

	// The ownership log: no overlap per slot, no node over capacity.
	ownMu.Lock()
	defer ownMu.Unlock()
	type iv struct {
		node       string
		start, end time.Time
	}
	open := map[string]map[string]time.Time{}
	ivs := map[string][]iv{}
	held := map[string]int{}
	var failover time.Duration
	for _, o := range own {
		if open[o.Slot] == nil {
			open[o.Slot] = map[string]time.Time{}
		}
		if o.Acquired {
			open[o.Slot][o.Node] = o.Time
			held[o.Node]++
			require.LessOrEqual(t, held[o.Node], capacity, "%s held more than its capacity", o.Node)
			if o.From == victim.name {
				failover = max(failover, o.Time.Sub(killedAt))
			}
			continue
		}
		held[o.Node]--
		ivs[o.Slot] = append(ivs[o.Slot], iv{o.Node, open[o.Slot][o.Node], o.Time})
		delete(open[o.Slot], o.Node)
	}
	for slot, m := range open {
		for node, since := range m {
			end := time.Now()
			if node == victim.name {
				end = killedAt
			}
			ivs[slot] = append(ivs[slot], iv{node, since, end})
		}
	}
	for slot, list := range ivs {
		sort.Slice(list, func(i, j int) bool { return list[i].start.Before(list[j].start) })
		for i := 1; i < len(list); i++ {
			require.False(t, list[i].start.Before(list[i-1].end), "%s: %s from %s while %s until %s", slot, list[i].node,
				list[i].start.Format("15:04:05.000"), list[i-1].node, list[i-1].end.Format("15:04:05.000"))
		}
	}
	require.NotZero(t, failover)
	for _, it := range orphans {
		o := takeovers[it]
		t.Logf("%s: taken over by %s, resumed=%v, fallback: %v, artifacts %v", it, o.Fields["test_node"], o.Fields["resumed"], o.Fields["fallback_reason"], o.Fields["artifacts"])
	}
	t.Logf("%s died with %v; takeover (kill → lease acquired by a survivor) max %s with lease TTL %s; all sessions running again %s after the kill",
		victim.name, orphans, failover.Round(time.Millisecond), ttl, takenAt.Sub(killedAt).Round(time.Millisecond))
}
