package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/theloop-dev/theloop/internal/procbench"
)

// baselineEnv names a loopctl binary built from another revision that
// BenchmarkStartup/graph-complete runs beside this one.
const baselineEnv = "THELOOP_BENCH_BASELINE_LOOPCTL"

// installFlags are the go build flags of the README's install line.
var installFlags = []string{"-trimpath", "-ldflags=-s -w", "-tags", "urfave_cli_no_docs,netgo"}

// buildLoopctl builds the binary once per benchmark run.
func buildLoopctl(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "loopctl")
	// Built the way the README installs it.
	out, err := exec.Command("go", append(append([]string{"build"}, installFlags...), "-o", bin, ".")...).CombinedOutput()
	if err != nil {
		b.Skipf("cannot build loopctl: %v\n%s", err, out)
	}
	return bin
}

// midGraphRepo is a work item standing at implementation, with five
// artifacts the checks read.
func midGraphRepo(b testing.TB) string {
	repo := b.TempDir()
	files := map[string]string{
		".the-loop/harness-config.yaml":        "ticketing:\n  github: {owner: acme, repo: widgets}\nworkflow:\n  specDir: docs/specs\n",
		"docs/specs/issue-42/requirements.md":  "---\nstatus: approved\napprovedBy: [\"@dana\"]\n---\n# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nA trust boundary.\n",
		"docs/specs/issue-42/design.md":        "---\nstatus: approved\n---\n# D\n\n## Architecture\n\n```mermaid\nflowchart LR\n  A --> B\n```\n\n## Security design\n\nThe trust boundary.\n\n## Testing strategy\n\nTables.\n",
		"docs/specs/issue-42/testing-plan.md":  "# T\n\n## Test matrix\n\n- [x] a\n\n## Verification environment\n\nx\n\n## Evidence plan\n\nx\n\n## Verification results\n\npending\n",
		"docs/specs/issue-42/tasks.md":         "# Tasks\n\n## Task list\n\n- [x] one\n- [ ] two\n",
		"docs/specs/issue-42/execution-log.md": "# Log\n\n## Review cycles\n\nnone yet\n",
		"docs/specs/issue-42/graph-state.json": `{"version": 1, "workItem": "issue-42", "currentNode": "implementation", "decisions": {"phase-selection": {"at": "2026-05-01T00:00:00+00:00", "outcome": "selected"}, "requirements-approval": {"at": "2026-05-02T00:00:00+00:00", "outcome": "approved"}, "design-approval": {"at": "2026-05-03T00:00:00+00:00", "outcome": "approved"}}, "loop": "pdlc-work-item-loop"}` + "\n",
	}
	for rel, content := range files {
		p := filepath.Join(repo, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return repo
}

// benchProcess execs the command b.N times and reports the median wall
// time and the median CPU (user+sys of the process, from wait4's rusage).
func benchProcess(b *testing.B, bin string, args ...string) {
	b.Helper()
	times := make([]time.Duration, 0, b.N)
	cpus := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		cmd := exec.Command(bin, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			if _, ok := err.(*exec.ExitError); !ok {
				b.Fatalf("%v\n%s", err, out)
			}
		}
		times = append(times, time.Since(start))
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpus = append(cpus, time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
		}
	}
	b.StopTimer()
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "ms-median")
	if len(cpus) > 0 {
		slices.Sort(cpus)
		b.ReportMetric(float64(cpus[len(cpus)/2].Microseconds())/1000, "cpu-ms-median")
	}
}

// BenchmarkCheckProcess: `loopctl check --recompute` as a whole process, on
// a work item at a mid-graph node with five artifacts. Target: median ≤ 5 ms.
func BenchmarkCheckProcess(b *testing.B) {
	bin := buildLoopctl(b)
	repo := midGraphRepo(b)
	benchProcess(b, bin, "check", "issue-42", "--repo", repo, "--recompute", "--format", "json")
}

// BenchmarkCheckAllConformanceProcess: `loopctl check --all --recompute`
// over the 61 conformance work items. Target: ≤ 100 ms.
func BenchmarkCheckAllConformanceProcess(b *testing.B) {
	conf := filepath.Join("..", "..", "..", "shared", "conformance", "the-loop-v11")
	if _, err := os.Stat(filepath.Join(conf, "repo")); err != nil {
		b.Skip("conformance data not present")
	}
	bin := buildLoopctl(b)
	repo := b.TempDir()
	if err := os.CopyFS(repo, os.DirFS(filepath.Join(conf, "repo"))); err != nil {
		b.Fatal(err)
	}
	graphFile, _ := filepath.Abs(filepath.Join(conf, "graphs", "pdlc-work-item-loop.yaml"))
	benchProcess(b, bin, "check", "--all", "--repo", repo, "--recompute", "--format", "json", "--graph", graphFile)
}

// BenchmarkStartup is loopctl's start-up against the floor: an empty Go
// program built the same way (installFlags), interleaved with `loopctl
// --version` and with `loopctl graph complete` on a work item blocked at
// implementation (one task unticked; its graph-state.json and event log
// restored before each run, untimed). It reports each one's median
// (empty-ns/op, version-ns/op, complete-ns/op) and the ratios to the empty
// program (the target is ≤ 1.5). "link-set-floor" puts a program that only
// links what a claim needs beside them (procbench.LinkSetProgram): the
// part of the ratio no code of loopctl's runs in.
//
//	go test ./cmd/loopctl -run '^$' -bench Startup -benchtime 200x
func BenchmarkStartup(b *testing.B) {
	bin := buildLoopctl(b)
	empty := procbench.EmptyProgram(b, "-trimpath", "-ldflags=-s -w")
	repo := midGraphRepo(b)
	home := b.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}
	statePath := filepath.Join(repo, "docs", "specs", "issue-42", "graph-state.json")
	state, err := os.ReadFile(statePath)
	if err != nil {
		b.Fatal(err)
	}
	reset := func() {
		if err := os.WriteFile(statePath, state, 0o644); err != nil {
			b.Fatal(err)
		}
		os.Remove(filepath.Join(repo, ".the-loop", "logs", "events.jsonl"))
	}
	floor := procbench.Proc{Name: "empty", Cmd: procbench.Command(empty, nil, env, repo, nil)}
	b.Run("version", func(b *testing.B) {
		procbench.Compare(b, floor, procbench.Proc{Name: "version", Cmd: procbench.Command(bin, []string{"--version"}, env, repo, nil), Want: "loopctl "})
	})
	b.Run("graph-complete", func(b *testing.B) {
		procs := []procbench.Proc{floor, {
			Name:  "complete",
			Cmd:   procbench.Command(bin, []string{"graph", "complete", "issue-42"}, env, repo, nil),
			Reset: reset,
			Want:  `"status": "block"`,
		}}
		// Another build of loopctl (an earlier revision's), interleaved in
		// the same rounds: a before-and-after in one sitting.
		if base := os.Getenv(baselineEnv); base != "" {
			procs = append(procs, procbench.Proc{
				Name:  "baseline-complete",
				Cmd:   procbench.Command(base, []string{"graph", "complete", "issue-42"}, env, repo, nil),
				Reset: reset,
				Want:  `"status": "block"`,
			})
		}
		procbench.Compare(b, procs...)
	})
	// The floor under a claim: a program that links what `graph complete`
	// must (the runtime's library, the shipped hooks, the graph-file
	// reader, the CLI library) and runs only their initialisers. Its ratio
	// to the empty program is what no code of loopctl's can go below.
	b.Run("link-set-floor", func(b *testing.B) {
		claimSet := procbench.LinkSetProgram(b, filepath.Join("..", ".."), []string{
			"github.com/theloop-dev/theloop/loop",
			"github.com/theloop-dev/theloop/hooks",
			"github.com/theloop-dev/theloop/graph/graphfile",
			"github.com/urfave/cli/v2",
		}, installFlags...)
		procbench.Compare(b, floor,
			procbench.Proc{Name: "claim-link-set", Cmd: procbench.Command(claimSet, nil, env, repo, nil)},
			procbench.Proc{Name: "version", Cmd: procbench.Command(bin, []string{"--version"}, env, repo, nil), Want: "loopctl "},
		)
	})
}
