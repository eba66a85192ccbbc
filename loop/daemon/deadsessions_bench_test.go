package daemon_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// BenchmarkDeadSessions is a loopd after a reboot: sessions=N active
// session records whose tmux servers are gone (each session's own server in
// its world; a stale socket file left behind for every other one, so the
// probe meets both an absent and a refused socket) and whose checkouts are
// gone too, so every respawn the liveness watch tries fails. The watch runs
// as shipped (a probe every 2 s, respawns bounded in flight, 3 per item per
// 30 min, then the escalation comment). The benchmark waits until the watch
// has given up on every item (gave-up-s), then reports:
//
//   - idle-core-%: loopd's CPU and its reaped children's over 10 s of idle,
//     as a share of one core (the target: ≤ 5 % with 1,000 sessions);
//   - cpu-µs/req: CPU per webhook (issue_comment.created from 4 clients,
//     each a distinct comment, dropped by policy after the queue took it),
//     until the dispatcher drained them (the target: within 1.2× of
//     sessions=0); net-cpu-µs/req is that less the idle rate over the same
//     wall time (a liveness tick falling in a short window weighs on the
//     gross figure).
//
// The setup is long (the give-up takes up to a minute): run it once per
// knob with a fixed count, on a quiet machine if the figures are to be
// compared:
//
//	go test ./loop/daemon -run '^$' -bench DeadSessions -benchtime 400x
//
// THELOOP_BENCH_CPUPROFILE=FILE writes a CPU profile of the webhook phase.
func BenchmarkDeadSessions(b *testing.B) {
	requireTools(b)
	for _, n := range []int{0, 1000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) { benchDeadSessions(b, n) })
	}
}

func benchDeadSessions(b *testing.B, n int) {
	raw, err := os.ReadFile(fixture)
	if err != nil {
		b.Skipf("fixture %s absent: %v", fixture, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		b.Fatal(err)
	}
	base := shortdir.New(b)
	cfg := daemon.DefaultConfig()
	cfg.StateRoot = filepath.Join(base, "state")
	cfg.Listen = "127.0.0.1:0"
	cfg.Secret = []byte("s3cret")
	cfg.Repos = []string{"Codertocat/Hello-World"}
	cfg.AuthorizedUsers = []string{"Codertocat"}
	cfg.ReconcileInterval = -1
	cfg.ClaudeEnv = &sessions.ClaudeEnvironment{}
	cfg.WorkspaceRoot = filepath.Join(base, "ws")
	cfg.Tmux.SocketPath = shortdir.Tmux(b)
	cfg.Tmux.TempDir = b.TempDir()
	cfg.EventLogPath = filepath.Join(cfg.StateRoot, "logs", "events.jsonl")

	reg, err := sessions.OpenRegistry(sessions.RegistryDir(cfg.StateRoot))
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		item := workitem.Ref{Provider: "github", Owner: "octo", Repo: "fleet", Number: i + 1}
		rec := sessions.Record{Item: item, Harness: "claude", SessionID: fmt.Sprintf("dead-%d", i), TmuxName: sessions.TmuxName(item),
			Cwd: filepath.Join(base, "gone", item.Slug()), Status: sessions.StatusActive, Created: time.Now().Add(-time.Hour)}
		if err := reg.Put(context.Background(), rec); err != nil {
			b.Fatal(err)
		}
	}
	var gaveUp atomic.Int64
	d, err := daemon.New(cfg, daemon.Deps{Integrations: nopIntegrations{}, Log: &bytes.Buffer{},
		Observer: daemon.ObserverFunc(func(o daemon.Observation) {
			if o.Name == "session.liveness_gave_up" {
				gaveUp.Add(1)
			}
		})})
	if err != nil {
		b.Fatal(err)
	}
	// Stale sockets: every other session's server left its socket behind.
	for i := 0; i < n; i += 2 {
		item := workitem.Ref{Provider: "github", Owner: "octo", Repo: "fleet", Number: i + 1}
		if tm := d.Sessions(); tm != nil && tm.Worlds() {
			sock := tm.SocketFor(sessions.TmuxName(item))
			_ = os.MkdirAll(filepath.Dir(sock), 0o700)
			staleSocket(b, sock)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t0 := time.Now()
	go func() { done <- d.Run(ctx) }()
	<-d.Ready()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(5 * time.Minute); gaveUp.Load() < int64(n); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("the liveness watch gave up on %d of %d items in 5 min", gaveUp.Load(), n)
		}
	}
	givenUp := time.Since(t0)

	const idle = 10 * time.Second
	c0, w0 := cpuWithChildren(), time.Now()
	time.Sleep(idle)
	idleCPU, idleWall := cpuWithChildren()-c0, time.Since(w0)

	bodies, sigs := make([][]byte, b.N), make([]string, b.N)
	c := doc["comment"].(map[string]any)
	for i := range b.N {
		c["id"] = 9_100_000_000 + i
		c["updated_at"] = time.Unix(1_800_000_000+int64(i), 0).UTC().Format(time.RFC3339)
		bodies[i], _ = json.Marshal(doc)
		sigs[i] = githubsim.Signature256("s3cret", bodies[i])
	}
	const clients = 4
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 10 * time.Second}
	var next, bad atomic.Int64
	var wg sync.WaitGroup
	if path := os.Getenv("THELOOP_BENCH_CPUPROFILE"); path != "" {
		// The webhook phase alone, for a look at where its CPU goes.
		if f, err := os.Create(path); err == nil {
			defer f.Close()
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	b.ResetTimer()
	cpu0, wall0 := cpuWithChildren(), time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				req, _ := http.NewRequest("POST", d.WebhookURL(), bytes.NewReader(bodies[i]))
				req.Header.Set("X-Hub-Signature-256", sigs[i])
				req.Header.Set("X-GitHub-Event", "issue_comment")
				req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("dead-%d-%d", t0.UnixNano(), i))
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil || resp.StatusCode != http.StatusAccepted {
					bad.Add(1)
				}
				if err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if p, err := d.Pending(context.Background()); err == nil && p == 0 {
			break
		}
	}
	cpu, wall := cpuWithChildren()-cpu0, time.Since(wall0)
	b.StopTimer()
	if bad.Load() > 0 {
		b.Fatalf("%d requests were not answered 202", bad.Load())
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/req")
	// Less what idling costs over the same wall time (the liveness ticks
	// that fell in the window): what the webhooks themselves cost.
	idleShare := float64(idleCPU) / float64(idleWall)
	b.ReportMetric((float64(cpu)-idleShare*float64(wall))/1e3/float64(b.N), "net-cpu-µs/req")
	b.ReportMetric(100*idleCPU.Seconds()/idleWall.Seconds(), "idle-core-%")
	b.ReportMetric(givenUp.Seconds(), "gave-up-s")
}

// cpuWithChildren is the process's CPU and that of its reaped children
// (the tmux, git and bwrap processes loopd ran and waited for).
func cpuWithChildren() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
}

// staleSocket leaves a unix socket file nobody listens on at path.
func staleSocket(b *testing.B, path string) {
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		b.Fatalf("binding %s: %v", path, err)
	}
}
