package install

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// world is a home directory, a repository with a subdirectory to run from,
// an environment of its own and the streams an installation reports to.
type world struct {
	home, repo, sub string
	env             map[string]string
	out, err        bytes.Buffer
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{home: t.TempDir(), repo: t.TempDir(), env: map[string]string{"PATH": t.TempDir()}}
	require.NoError(t, os.Mkdir(filepath.Join(w.repo, ".git"), 0o755))
	w.sub = filepath.Join(w.repo, "docs")
	require.NoError(t, os.MkdirAll(w.sub, 0o755))
	return w
}

// options is an installation in this world (the default loop-gate
// command).
func (w *world) options(harness, scope string) *Options {
	return &Options{
		IO: IOStreams{Out: &w.out, ErrOut: &w.err},
		Env: &Env{
			Getenv:  func(k string) string { return w.env[k] },
			Getwd:   func() (string, error) { return w.sub, nil },
			HomeDir: func() (string, error) { return w.home, nil },
		},
		Harness: harness, Scope: scope, Command: gateBinary,
	}
}

func (w *world) read(t *testing.T, rel ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(rel...))
	require.NoError(t, err)
	return string(b)
}

// The shipped harnesses, as the tests name them.
const (
	harnessClaude = "claude"
	harnessCursor = "cursor"
	harnessCodex  = "codex"
	harnessGemini = "gemini"
)
