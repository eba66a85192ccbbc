package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/theloop-dev/theloop/internal/procbench"
	"github.com/theloop-dev/theloop/plugin"
)

// BenchmarkLoopGateProcess measures loop-gate as the harness runs it: one
// process per stop, the built binary, a Claude Code payload on stdin. The
// work item stands at `implementation` with five artifacts (requirements,
// design, testing plan, tasks, execution log) and blocks there, so every
// run does the whole job: payload, repository walk, loop.Open, a recompute
// of all nineteen nodes, the attempt counter, the JSON answer.
//
// Besides ns/op (the mean) it reports the median and the 90th percentile
// per process, which are what a noisy shared machine can be judged on. The
// sub-benchmarks split the cost: "version" is process start and package
// initialisation only; "no-work-item" adds reading and parsing the payload;
// "go-hello" is an empty Go program, the floor any Go binary pays on the
// machine at hand.
//
//	go test ./cmd/loop-gate -run '^$' -bench LoopGateProcess -benchtime 300x
func BenchmarkLoopGateProcess(b *testing.B) {
	if buildErr != nil {
		b.Skip(buildErr)
	}
	root := writeRepo(b, atImplementationBlock)
	home := b.TempDir()
	baseEnv := []string{
		"HOME=" + home,
		"XDG_CACHE_HOME=" + filepath.Join(home, "cache"),
		"THE_LOOP_STATE_ROOT=" + filepath.Join(home, "state"),
		"PATH=" + os.Getenv("PATH"),
	}
	payload := claudePayload(root)
	hello := buildHello(b)
	for _, bc := range []struct {
		name string
		args []string
		env  []string
		want string // stdout prefix
	}{
		{"block", []string{"claude"}, []string{"THE_LOOP_WORK_ITEM=" + fixtureItem, "THE_LOOP_GATE_MAX_ATTEMPTS=1000000000"}, `{"decision":"block"`},
		{"no-work-item", []string{"claude"}, nil, ""},
		{"version", []string{"--version"}, nil, "loop-gate "},
		{"go-hello", nil, nil, ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bin := gateBinary
			if bc.name == "go-hello" {
				if hello == "" {
					b.Skip("could not build the empty Go program")
				}
				bin = hello
			}
			env := append(slices.Clone(baseEnv), bc.env...)
			var times []time.Duration
			var out bytes.Buffer
			for b.Loop() {
				out.Reset()
				cmd := exec.Command(bin, bc.args...)
				cmd.Env = env
				cmd.Stdin = bytes.NewReader(payload)
				cmd.Stdout = &out
				start := time.Now()
				err := cmd.Run()
				times = append(times, time.Since(start))
				if err != nil || !bytes.HasPrefix(out.Bytes(), []byte(bc.want)) {
					b.Fatalf("loop-gate %v: %v, stdout %q", bc.args, err, out.String())
				}
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-median")
			b.ReportMetric(float64(times[len(times)*9/10].Microseconds())/1000, "ms-p90")
		})
	}
}

// buildHello builds an empty Go program ("" when it cannot).
func buildHello(b *testing.B) string {
	dir := b.TempDir()
	if os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n"), 0o644) != nil ||
		os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644) != nil {
		return ""
	}
	bin := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if err := cmd.Run(); err != nil {
		return ""
	}
	return bin
}

// BenchmarkStopHookAsInstalled is the Stop hook as Claude Code runs it —
// the command line the plugin and `loopctl install` write, through `sh -c`,
// a Stop payload on stdin — on a work item blocked at implementation,
// interleaved with an empty Go program built the same way, run directly
// and through `sh -c`. It reports each one's median (hook-ns/op,
// empty-ns/op, empty-sh-ns/op) and the ratios hook/empty and
// hook/empty-sh (the target is ≤ 1.5); "version" is `loop-gate --version`
// against the same floor, and "link-set-floor" a program that only links
// loop-gate's check, run the same way (procbench.LinkSetProgram).
//
//	go test ./cmd/loop-gate -run '^$' -bench StopHookAsInstalled -benchtime 200x
func BenchmarkStopHookAsInstalled(b *testing.B) {
	if buildErr != nil {
		b.Skip(buildErr)
	}
	empty := procbench.EmptyProgram(b, "-trimpath", "-ldflags=-s -w")
	root := writeRepo(b, atImplementationBlock)
	home := b.TempDir()
	env := []string{
		"HOME=" + home,
		"XDG_CACHE_HOME=" + filepath.Join(home, "cache"),
		"THE_LOOP_STATE_ROOT=" + filepath.Join(home, "state"),
		"PATH=" + os.Getenv("PATH"),
	}
	hookEnv := append(slices.Clone(env), "THE_LOOP_WORK_ITEM="+fixtureItem, "THE_LOOP_GATE_MAX_ATTEMPTS=1000000000")
	events := filepath.Join(root, ".the-loop", "logs", "events.jsonl")
	b.Run("block", func(b *testing.B) {
		procbench.Compare(b,
			procbench.Proc{Name: "empty", Cmd: procbench.Command(empty, nil, env, root, nil)},
			procbench.Proc{Name: "empty-sh", Cmd: procbench.Command("sh", []string{"-c", plugin.GateCommand(empty, "claude")}, env, root, nil)},
			procbench.Proc{
				Name:  "hook",
				Cmd:   procbench.Command("sh", []string{"-c", plugin.GateCommand(gateBinary, "claude")}, hookEnv, root, claudePayload(root)),
				Reset: func() { os.Remove(events) },
				Want:  `{"decision":"block"`,
			},
		)
	})
	b.Run("version", func(b *testing.B) {
		procbench.Compare(b,
			procbench.Proc{Name: "empty", Cmd: procbench.Command(empty, nil, env, root, nil)},
			procbench.Proc{Name: "version", Cmd: procbench.Command(gateBinary, []string{"--version"}, env, root, nil), Want: "loop-gate "},
		)
	})
	// The floor under the hook: a program that only links loop-gate's
	// check (loop/stopgate) and runs its packages' initialisers, through
	// the same shell. Its ratio to the empty program is what no code of
	// loop-gate's runs in.
	b.Run("link-set-floor", func(b *testing.B) {
		gateSet := procbench.LinkSetProgram(b, filepath.Join("..", ".."), []string{
			"github.com/theloop-dev/theloop/loop/stopgate",
		}, "-trimpath", "-ldflags=-s -w", "-tags", "netgo")
		procbench.Compare(b,
			procbench.Proc{Name: "empty", Cmd: procbench.Command(empty, nil, env, root, nil)},
			procbench.Proc{Name: "empty-sh", Cmd: procbench.Command("sh", []string{"-c", plugin.GateCommand(empty, "claude")}, env, root, nil)},
			procbench.Proc{Name: "link-set-sh", Cmd: procbench.Command("sh", []string{"-c", plugin.GateCommand(gateSet, "claude")}, env, root, nil)},
		)
	})
}
