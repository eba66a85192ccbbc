package daemon_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/theloop-dev/theloop/graph"
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
//	go test ./loop/daemon -run '^$' -bench DeadSessions -benchtime 400x -timeout 30m
//
// THELOOP_BENCH_CPUPROFILE=FILE writes a CPU profile of the webhook phase.
func BenchmarkDeadSessions(b *testing.B) {
	requireTools(b)
	if testing.Short() {
		b.Skip("-short: the liveness watch's give-up on 1,000 items takes minutes")
	}
	for _, n := range []int{0, 1000} {
		// The testing package calls a benchmark once with N=1 before its
		// run: the loopd, given up on its items, is kept for both.
		var dw *deadWorld
		b.Run(fmt.Sprintf("sessions=%d", n), func(sb *testing.B) {
			if dw == nil {
				dw = newDeadWorld(b, sb, n)
			}
			dw.bench(sb)
		})
	}
}

// deadWorld is a loopd whose liveness watch has given up on n dead sessions,
// with its idle CPU measured.
type deadWorld struct {
	d                 *daemon.Daemon
	doc               map[string]any
	t0                time.Time
	givenUp           time.Duration
	idleCPU, idleWall time.Duration
	runs              int
}

// newDeadWorld builds it under parent (whose cleanup stops it); sb reports
// failures.
func newDeadWorld(parent, b *testing.B, n int) *deadWorld {
	doc := benchFixture(b)
	base := shortdir.New(parent)
	cfg := benchConfig(base)
	cfg.Routing.WorkspaceRoot = filepath.Join(base, "ws")
	cfg.Tmux.SocketPath = shortdir.Tmux(parent)
	cfg.Tmux.TempDir = parent.TempDir()

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
	d, err := daemon.New(cfg, daemon.Deps{Clock: graph.SystemClock{}, Integrations: nopIntegrations{}, Log: &bytes.Buffer{},
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
	parent.Cleanup(func() { cancel(); <-done })
	// Every item given up on (a probe that tmux could not answer under
	// load leaves one alone: 99 % of them will do after 8 min).
	for deadline := time.Now().Add(8 * time.Minute); gaveUp.Load() < int64(n); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			if gaveUp.Load() < int64(n)*99/100 {
				b.Fatalf("the liveness watch gave up on %d of %d items in 8 min", gaveUp.Load(), n)
			}
			break
		}
	}
	givenUp := time.Since(t0)

	const idle = 10 * time.Second
	c0, w0 := cpuWithChildren(), time.Now()
	time.Sleep(idle)
	idleCPU, idleWall := cpuWithChildren()-c0, time.Since(w0)
	return &deadWorld{d: d, doc: doc, t0: t0, givenUp: givenUp, idleCPU: idleCPU, idleWall: idleWall}
}

// bench posts b.N webhooks to the world and reports the figures.
func (w *deadWorld) bench(b *testing.B) {
	d, idleCPU, idleWall := w.d, w.idleCPU, w.idleWall
	w.runs++
	bodies, sigs := signedComments(w.doc, b.N, 9_100_000_000+w.runs*1_000_000)
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
	bad := postComments(d.WebhookURL(), bodies, sigs, 4, fmt.Sprintf("dead-%d-%d", w.t0.UnixNano(), w.runs), nil)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if p, err := d.Pending(context.Background()); err == nil && p == 0 {
			break
		}
	}
	cpu, wall := cpuWithChildren()-cpu0, time.Since(wall0)
	b.StopTimer()
	if bad > 0 {
		b.Fatalf("%d requests were not answered 202", bad)
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/req")
	// Less what idling costs over the same wall time (the liveness ticks
	// that fell in the window): what the webhooks themselves cost.
	idleShare := float64(idleCPU) / float64(idleWall)
	b.ReportMetric((float64(cpu)-idleShare*float64(wall))/1e3/float64(b.N), "net-cpu-µs/req")
	b.ReportMetric(100*idleCPU.Seconds()/idleWall.Seconds(), "idle-core-%")
	b.ReportMetric(w.givenUp.Seconds(), "gave-up-s")
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
