package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

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
			cfg.Socket = fmt.Sprintf("sbxb-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
			defer exec.Command("tmux", "-L", cfg.Socket, "kill-server").Run()
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
