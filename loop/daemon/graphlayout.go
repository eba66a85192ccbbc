package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/theloop-dev/theloop/loop/daemon/dashboard"
	"github.com/theloop-dev/theloop/run"
)

// LayoutProgram is the program that lays out the dashboard's graph
// pictures (cmd/loop-layout: Graphviz through WebAssembly). It is a
// program of its own, looked up beside loopd's executable and then on
// PATH, because the Graphviz binding compiles its WebAssembly module in a
// package init: linked into loopd it would cost every loopd ~40 MB and a
// second of CPU at start (package dashboard/dotlayout).
const LayoutProgram = "loop-layout"

// programLayout runs the layout program once per graph the dashboard has
// not laid out yet (the dashboard caches the result per graph hash).
type programLayout struct {
	runner run.Runner
	path   string
	// tmp is the program's TMPDIR: a directory of loopd's state root. The
	// WebAssembly runtime keeps its compilation cache — machine code it
	// loads and runs — under TMPDIR, which in the shared /tmp another user
	// could plant first.
	tmp string
}

// findLayoutProgram returns the layout program beside loopd's executable,
// or on PATH ("" when there is none).
func findLayoutProgram(pathEnv string) string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), LayoutProgram)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, LayoutProgram)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

func (p programLayout) Layout(ctx context.Context, dot []byte) ([]byte, error) {
	if err := os.MkdirAll(p.tmp, 0o700); err != nil {
		return nil, fmt.Errorf("%s's temporary directory: %w", LayoutProgram, err)
	}
	res, err := p.runner.Run(ctx, run.Cmd{Name: p.path, Stdin: dot, Env: []string{"TMPDIR=" + p.tmp}})
	if err != nil {
		var xe *run.ExitError
		if errors.As(err, &xe) {
			return nil, fmt.Errorf("%s: %s", p.path, strings.TrimSpace(string(res.Stderr)))
		}
		return nil, err
	}
	return res.Stdout, nil
}

// dashboardLayout is the dashboard's layout engine: the layout program
// when one is installed, else nil (the built-in layout, said once in the
// log).
func dashboardLayout(path, stateRoot string, logf func(string, ...any)) dashboard.Layouter {
	pathEnv := path
	if pathEnv == "" {
		pathEnv = os.Getenv("PATH")
	}
	prog := findLayoutProgram(pathEnv)
	if prog == "" {
		logf("dashboard: %s is not installed beside loopd or on PATH; graphs are drawn by the built-in layout (go install ./cmd/%s)", LayoutProgram, LayoutProgram)
		return nil
	}
	if _, err := exec.LookPath(prog); err != nil {
		return nil
	}
	return programLayout{runner: run.Exec{}, path: prog, tmp: filepath.Join(stateRoot, "cache", "layout")}
}
