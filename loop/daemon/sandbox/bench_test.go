package sandbox_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/sessions"
)

// BenchmarkSpawn measures Tmux.Spawn of a session whose harness waits for
// input (real tmux, the real launcher), unconfined and confined, on a fresh
// server each time (the confined spawn then also starts the server through
// the detached launcher) and on a running one.
func BenchmarkSpawn(b *testing.B) {
	if _, err := exec.LookPath("tmux"); err != nil {
		b.Skip("tmux is not installed")
	}
	for _, bc := range []struct {
		name     string
		confined bool
		fresh    bool
	}{{"plain/fresh-server", false, true}, {"sandbox/fresh-server", true, true}, {"plain/running-server", false, false}, {"sandbox/running-server", true, false}} {
		b.Run(bc.name, func(b *testing.B) {
			if bc.confined && !sandbox.Available() {
				b.Skip("no Landlock on this kernel")
			}
			base, _ := os.MkdirTemp("", "sbxb")
			defer os.RemoveAll(base)
			state, ws := filepath.Join(base, "state"), filepath.Join(base, "ws")
			_ = os.MkdirAll(filepath.Join(state, "sessions"), 0o700)
			_ = os.MkdirAll(ws, 0o700)
			self, _ := os.Executable()
			var c sessions.Confinement
			if bc.confined {
				cf := &sandbox.Confiner{Self: self, StateRoot: state, WorkspaceRoot: ws, Home: filepath.Join(base, "home")}
				if err := cf.Prepare(); err != nil {
					b.Fatal(err)
				}
				c = cf
			}
			cfg := sessions.DefaultTmuxConfig()
			cfg.Socket = shortdir.TmuxName(b, "sbxb") // killed, its socket file removed, after the run
			tm, err := sessions.NewConfinedTmux(cfg, run.Exec{}, c)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			spec := func(i int) sessions.SpawnSpec {
				return sessions.SpawnSpec{Name: fmt.Sprintf("loop-bench-%d", i), Cwd: ws, Argv: []string{"/bin/cat", "-"},
					RegistryFile: filepath.Join(state, "sessions", "bench.json")}
			}
			if !bc.fresh {
				if err := tm.Spawn(ctx, spec(-1)); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := tm.Spawn(ctx, spec(i)); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if bc.fresh {
					_ = exec.Command("tmux", "-L", cfg.Socket, "kill-server").Run()
				} else {
					_ = tm.Kill(ctx, spec(i).Name)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkSpawnWorld compares a spawn in a world of its own (bubblewrap,
// its own tmux server, Landlock inside) with today's Landlock-only spawn
// on loopd's one tmux server, side by side in one run: per spawn, the wall
// time to a created session (p50 and p99 over b.N), and the CPU of every
// process it ran (children's rusage); then, with five sessions alive, the
// memory each holds (pss-kB/session: the PSS of their processes, the shared
// server's included for landlock).
func BenchmarkSpawnWorld(b *testing.B) {
	if _, err := exec.LookPath("tmux"); err != nil {
		b.Skip("tmux is not installed")
	}
	for _, mode := range []string{"landlock", "world"} {
		b.Run(mode, func(b *testing.B) {
			if !sandbox.Available() {
				b.Skip("no Landlock on this kernel")
			}
			if mode == "world" {
				if err := sandbox.CheckNamespaces(); err != nil {
					b.Skip(err)
				}
			}
			base, _ := os.MkdirTemp("", "sbxw")
			defer os.RemoveAll(base)
			state, ws := filepath.Join(base, "state"), filepath.Join(base, "ws")
			_ = os.MkdirAll(filepath.Join(state, "sessions"), 0o700)
			_ = os.MkdirAll(filepath.Join(state, "outbox", "s"), 0o700)
			_ = os.MkdirAll(ws, 0o700)
			_ = os.WriteFile(filepath.Join(state, "sessions", "bench.json"), []byte("{}"), 0o600)
			self, _ := os.Executable()
			cf := &sandbox.Confiner{Self: self, StateRoot: state, WorkspaceRoot: ws, OutboxRoot: filepath.Join(state, "outbox"), Home: filepath.Join(base, "home")}
			var c sessions.Confinement = cf
			cfg := sessions.DefaultTmuxConfig()
			cfg.Socket = shortdir.TmuxName(b, "sbxw") // killed, its socket file removed, after the run
			if mode == "world" {
				wd := &sandbox.Worlds{Confiner: cf, Root: filepath.Join(base, "w")}
				if err := wd.Prepare(); err != nil {
					b.Fatal(err)
				}
				defer wd.Egress.Close()
				c = wd
				cfg.Socket = ""
			} else if err := cf.Prepare(); err != nil {
				b.Fatal(err)
			}
			tm, err := sessions.NewConfinedTmux(cfg, run.Exec{}, c)
			if err != nil {
				b.Fatal(err)
			}
			defer tm.Close()
			ctx := context.Background()
			var walls []time.Duration
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru0)
			var cpu time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("loop-bench-%d", i)
				t0 := time.Now()
				if err := tm.Spawn(ctx, sessions.SpawnSpec{Name: name, Cwd: ws, Argv: []string{"/bin/cat", "-"},
					RegistryFile: filepath.Join(state, "sessions", "bench.json"), OutboxDir: filepath.Join(state, "outbox", "s")}); err != nil {
					b.Fatal(err)
				}
				walls = append(walls, time.Since(t0))
				b.StopTimer()
				_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru1)
				cpu += tv(ru1.Utime) + tv(ru1.Stime) - tv(ru0.Utime) - tv(ru0.Stime)
				_ = tm.Kill(ctx, name)
				_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru0)
				b.StartTimer()
			}
			b.StopTimer()
			slices.Sort(walls)
			q := func(p float64) float64 { return float64(walls[int(p*float64(len(walls)-1))].Microseconds()) / 1000 }
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "child-cpu-ms/spawn")

			// Memory per session: alive sessions at once, the PSS of every
			// process they hold (landlock: the shared server's share counted
			// in; a world: its bwrap, its own server, its pane).
			const alive = 5
			for i := range alive {
				if err := tm.Spawn(ctx, sessions.SpawnSpec{Name: fmt.Sprintf("loop-mem-%d", i), Cwd: ws, Argv: []string{"/bin/cat", "-"},
					RegistryFile: filepath.Join(state, "sessions", "bench.json"), OutboxDir: filepath.Join(state, "outbox", "s")}); err != nil {
					b.Fatal(err)
				}
			}
			time.Sleep(200 * time.Millisecond) // settled
			marks := []string{base}
			if cfg.Socket != "" {
				marks = append(marks, cfg.Socket)
			}
			b.ReportMetric(float64(pssOfProcessesMarked(marks))/alive, "pss-kB/session")
			for i := range alive {
				_ = tm.Kill(ctx, fmt.Sprintf("loop-mem-%d", i))
			}
		})
	}
}

// pssOfProcessesMarked sums the proportional set size (kB) of every
// process whose command line holds one of marks, and of their descendants.
func pssOfProcessesMarked(marks []string) int {
	ents, _ := os.ReadDir("/proc")
	parent := map[int]int{}
	roots := map[int]bool{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces, so after the last ")".
		if i := bytes.LastIndexByte(stat, ')'); i > 0 {
			if f := strings.Fields(string(stat[i+1:])); len(f) > 1 {
				parent[pid], _ = strconv.Atoi(f[1])
			}
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		for _, m := range marks {
			if bytes.Contains(cmd, []byte(m)) {
				roots[pid] = true
			}
		}
	}
	in := func(pid int) bool {
		for p := pid; p > 1; p = parent[p] {
			if roots[p] {
				return true
			}
		}
		return false
	}
	total := 0
	for pid := range parent {
		if !in(pid) {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
				n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
				total += n
			}
		}
	}
	return total
}

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}

// BenchmarkProbeDeadWorlds: after a reboot a thousand registered sessions
// have no world; the liveness watch probes each every tick. A dead world is
// answered by a stat and, for a stale socket, a refused connect: no tmux
// process. One op is a probe of all 1,000 (CPU of this process and its
// children per op reported).
func BenchmarkProbeDeadWorlds(b *testing.B) {
	if err := sandbox.CheckNamespaces(); err != nil {
		b.Skip(err)
	}
	base, _ := os.MkdirTemp("", "sbxd")
	defer os.RemoveAll(base)
	state := filepath.Join(base, "state")
	_ = os.MkdirAll(filepath.Join(state, "sessions"), 0o700)
	self, _ := os.Executable()
	cf := &sandbox.Confiner{Self: self, StateRoot: state, WorkspaceRoot: filepath.Join(base, "ws"), Home: filepath.Join(base, "home")}
	wd := &sandbox.Worlds{Confiner: cf, Root: filepath.Join(base, "w")}
	if err := wd.Prepare(); err != nil {
		b.Fatal(err)
	}
	tm, err := sessions.NewConfinedTmux(sessions.DefaultTmuxConfig(), run.Exec{}, wd)
	if err != nil {
		b.Fatal(err)
	}
	defer tm.Close()
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("loop-dead-%d", i)
		if i%2 == 0 {
			// Half with a stale socket (the world's dir survived, its server did not).
			sock := tm.SocketFor(names[i])
			_ = os.MkdirAll(filepath.Dir(sock), 0o700)
			fd, _ := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
			_ = syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock})
			syscall.Close(fd)
		}
	}
	ctx := context.Background()
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	var c0, c1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, n := range names {
			if l, err := tm.Probe(ctx, n); err != nil || l != sessions.LivenessAbsent {
				b.Fatalf("%s: %v %v", n, l, err)
			}
		}
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &c1)
	self1 := tv(r1.Utime) + tv(r1.Stime) - tv(r0.Utime) - tv(r0.Stime)
	kids := tv(c1.Utime) + tv(c1.Stime) - tv(c0.Utime) - tv(c0.Stime)
	b.ReportMetric(float64(self1.Microseconds())/1000/float64(b.N), "cpu-ms/1000-probes")
	b.ReportMetric(float64(kids.Microseconds())/1000/float64(b.N), "child-cpu-ms/1000-probes")
}
