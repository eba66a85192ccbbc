// Package procbench measures whole processes the way a harness or a shell
// meets them — exec, run, exit — side by side with an empty Go program
// built the same way, which is the floor any Go binary pays on the machine
// at hand. It serves the start-up benchmarks of cmd/loopctl and
// cmd/loop-gate.
//
// The machine these run on is shared and noisy, so the processes compared
// run interleaved — every iteration runs each of them once, in a shuffled
// order — and each is judged by its median: a burst of load then lands on
// all of them alike, and the ratio to the empty program holds where the
// absolute figures do not.
package procbench

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Proc is one process to measure.
type Proc struct {
	// Name names the proc's metrics (see Compare).
	Name string
	// Cmd returns a fresh command for one run; its Stdout is set by Compare.
	Cmd func() *exec.Cmd
	// Reset, when set, restores what a run changes (state files, logs)
	// before each run, untimed.
	Reset func()
	// Want, when set, must be in the run's stdout: a process that failed
	// early would otherwise be the fastest of all.
	Want string
}

// Compare runs every proc once per benchmark iteration, interleaved in a
// shuffled order, and reports each proc's median wall time as
// <Name>-ns/op, its median CPU (user+sys of the process and the children
// it waited for, from wait4's rusage) as <Name>-cpu-ns/op and its median
// minor page faults as <Name>-faults, and, for every proc, the ratio of
// its median wall time to that of each proc given before it as
// <Name>/<earlier Name>, and of its median CPU as <Name>/<earlier
// Name>-cpu: give the floor (the empty program) first. The benchmark's own
// ns/op is the time of one round (all procs).
func Compare(b *testing.B, procs ...Proc) {
	b.Helper()
	times := make([][]time.Duration, len(procs))
	cpus := make([][]time.Duration, len(procs))
	faults := make([][]int64, len(procs))
	order := make([]int, len(procs))
	for i := range order {
		order[i] = i
	}
	var out bytes.Buffer
	for b.Loop() {
		rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			p := procs[i]
			if p.Reset != nil {
				b.StopTimer()
				p.Reset()
				b.StartTimer()
			}
			cmd := p.Cmd()
			out.Reset()
			cmd.Stdout = &out
			start := time.Now()
			err := cmd.Run()
			times[i] = append(times[i], time.Since(start))
			if _, exited := err.(*exec.ExitError); err != nil && !exited {
				b.Fatalf("%s: %v", p.Name, err)
			}
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				cpus[i] = append(cpus[i], time.Duration(ru.Utime.Nano()+ru.Stime.Nano()))
				faults[i] = append(faults[i], ru.Minflt+ru.Majflt)
			}
			if p.Want != "" && !strings.Contains(out.String(), p.Want) {
				b.Fatalf("%s: stdout %q lacks %q (%v)", p.Name, out.String(), p.Want, err)
			}
		}
	}
	medians := make([]float64, len(procs))
	cpuMedians := make([]float64, len(procs))
	for i, ts := range times {
		medians[i] = float64(median(ts).Nanoseconds())
		b.ReportMetric(medians[i], procs[i].Name+"-ns/op")
		if len(cpus[i]) > 0 {
			cpuMedians[i] = float64(median(cpus[i]).Nanoseconds())
			b.ReportMetric(cpuMedians[i], procs[i].Name+"-cpu-ns/op")
			b.ReportMetric(float64(median(faults[i])), procs[i].Name+"-faults")
		}
	}
	for i := 1; i < len(procs); i++ {
		for j := 0; j < i; j++ {
			b.ReportMetric(medians[i]/medians[j], procs[i].Name+"/"+procs[j].Name)
			if cpuMedians[i] > 0 && cpuMedians[j] > 0 {
				b.ReportMetric(cpuMedians[i]/cpuMedians[j], procs[i].Name+"/"+procs[j].Name+"-cpu")
			}
		}
	}
}

// median sorts xs and returns its middle element.
func median[T time.Duration | int64](xs []T) T {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// EmptyProgram builds `func main() {}` with the go build flags given (use
// the flags the binary under test is built with) and returns its path; the
// benchmark is skipped when it cannot be built.
func EmptyProgram(b testing.TB, flags ...string) string {
	b.Helper()
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module empty\n\ngo 1.21\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, "empty")
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", bin, ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Skipf("cannot build the empty Go program: %v\n%s", err, out)
	}
	return bin
}

// LinkSetProgram builds `func main() {}` importing pkgs for their side
// effects only — a program that links a set of packages and runs nothing
// of them but their initialisers — with the go build flags given, and
// returns its path. It is the floor under a binary that must link those
// packages: what the Go runtime and the packages' init cost before main
// starts. Packages of this module are built from root (the repository's
// root directory, through a replace directive and its go.sum), others at
// the versions root's go.mod selects. The benchmark is skipped when the
// program cannot be built (no module cache offline, say).
func LinkSetProgram(b testing.TB, root string, pkgs []string, flags ...string) string {
	b.Helper()
	root, err := filepath.Abs(root)
	if err != nil {
		b.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		b.Fatal(err)
	}
	module := ""
	for _, line := range strings.Split(string(mod), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			module = strings.TrimSpace(m)
			break
		}
	}
	if module == "" {
		b.Fatalf("%s/go.mod names no module", root)
	}
	dir := b.TempDir()
	// The module's own requirements with its module line replaced: every
	// package the floor imports resolves to the version the binary gets.
	floorMod := strings.Replace(string(mod), "module "+module, "module floor", 1) +
		"\nrequire " + module + " v0.0.0\n\nreplace " + module + " => " + root + "\n"
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range pkgs {
		src.WriteString("\t_ \"" + p + "\"\n")
	}
	src.WriteString(")\n\nfunc main() {}\n")
	sum, _ := os.ReadFile(filepath.Join(root, "go.sum"))
	for name, data := range map[string][]byte{"go.mod": []byte(floorMod), "go.sum": sum, "main.go": []byte(src.String())} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "floor")
	cmd := exec.Command("go", append(append([]string{"build", "-mod=mod"}, flags...), "-o", bin, ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Skipf("cannot build the link-set floor program: %v\n%s", err, out)
	}
	return bin
}

// Command returns a Cmd func for bin with args, environment env (nil: the
// test's), working directory dir and stdin (nil: none).
func Command(bin string, args []string, env []string, dir string, stdin []byte) func() *exec.Cmd {
	return func() *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Env, cmd.Dir = env, dir
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		return cmd
	}
}
