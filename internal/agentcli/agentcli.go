// Package agentcli finds the real agent CLIs (Claude Code, Codex, the
// Gemini CLI) for the tests that drive them against a stand-in model
// server, and writes that server's streaming answers. It is test
// support: no production code imports it.
package agentcli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/theloop-dev/theloop/internal/required"
)

// Find returns the CLI name: on PATH, else in .ci/run's tools cache
// ($THELOOP_TOOLS_CACHE, else $XDG_CACHE_HOME/theloop-ci, else
// ~/.cache/theloop-ci) under cacheDir/node_modules/.bin. A CLI that is not
// installed skips the test, saying so.
func Find(t testing.TB, name, cacheDir string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	cache := os.Getenv("THELOOP_TOOLS_CACHE")
	if cache == "" {
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, _ := os.UserHomeDir()
			base = filepath.Join(home, ".cache")
		}
		cache = filepath.Join(base, "theloop-ci")
	}
	p := filepath.Join(cache, cacheDir, "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		required.Skip(t, name, fmt.Sprintf("the %s CLI is not installed (not on PATH, not in %s): its real-client test is skipped; .ci/run installs it with npm", name, filepath.Dir(filepath.Dir(filepath.Dir(p)))))
	}
	return p
}

// SSE writes one server-sent event (event "" : a data-only event) and
// flushes it.
func SSE(w io.Writer, event string, data any) {
	b, _ := json.Marshal(data)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
