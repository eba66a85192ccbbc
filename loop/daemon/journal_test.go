package daemon_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// journalLines are the stderr lines that contain every one of want.
func journalLines(out string, want ...string) []string {
	var got []string
next:
	for _, line := range strings.Split(out, "\n") {
		for _, w := range want {
			if !strings.Contains(line, w) {
				continue next
			}
		}
		got = append(got, line)
	}
	return got
}

// A journal worth reading: loopd, started without tmux (nor bubblewrap) on
// its PATH and with a GitHub that answers every call with a 502, says so on
// stderr — one readable line each — at start (tmux and bwrap missing), when
// a labeled issue's spawn fails (level error), when its GitHub calls fail
// and the poller backs off, and when it stops, with why. The JSON records
// stay in the event log.
func TestJournalTellsWhatWentWrong(t *testing.T) {
	requireTools(t)
	sim, serr := githubsim.Start(githubsim.Config{Token: "tok", BotLogin: "theloop-bot"})
	require.NoError(t, serr)
	t.Cleanup(sim.Close)
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"message":"bad gateway"}`, http.StatusBadGateway)
	}))
	t.Cleanup(broken.Close)

	// loopd's stderr is a file, as journald's pipe would be read: written
	// by loopd's goroutines, read here through its own descriptor.
	errPath := filepath.Join(t.TempDir(), "stderr")
	errFile, err := os.Create(errPath)
	require.NoError(t, err)
	t.Cleanup(func() { errFile.Close() })
	stderrText := func() string { b, _ := os.ReadFile(errPath); return string(b) }
	w := newWorldWith(t, sim, func(cfg *daemon.Config) {
		cfg.ReconcileInterval = 200 * time.Millisecond
	}, func(string) integrations.Config {
		return integrations.Config{GitHub: &integrations.GitHubConfig{
			Transport: integrations.TransportAPI, MaxAttempts: 1, TimeoutSeconds: 5,
			API: integrations.GitHubAPIConfig{BaseURL: broken.URL},
		}}
	}, map[string]string{"GH_TOKEN": "tok"})
	w.stop()

	// PATH holds git (worktrees) and nothing else loopd runs.
	bin := t.TempDir()
	gitPath, err := exec.LookPath("git")
	require.NoError(t, err)
	require.NoError(t, os.Symlink(gitPath, filepath.Join(bin, "git")))
	w.deps.Path = bin
	w.deps.Log = errFile
	w.start()

	out := stderrText()
	require.Len(t, journalLines(out, "loopd: warning: "+daemon.EventProgramMissing, "tmux is not on PATH"), 1, "start-up warns that tmux is missing:\n%s", out)
	if !w.cfg.SandboxOff() && !w.cfg.SandboxLandlock() {
		require.Len(t, journalLines(out, "loopd: warning: "+daemon.EventProgramMissing, "bwrap is not on PATH", "apt-get install bubblewrap"), 1, "and bubblewrap:\n%s", out)
	}

	n := w.openLabeled()
	ref := w.item(n).String()
	require.Eventually(t, func() bool {
		out := stderrText()
		return len(journalLines(out, "loopd: error: session.spawn_failed "+ref+": ")) > 0 &&
			len(journalLines(out, "loopd: warning: poll.provider_error", "HTTP 502")) > 0 &&
			len(journalLines(out, "loopd: warning: poll.backoff", "for ")) > 0
	}, 60*time.Second, 50*time.Millisecond, "a failed spawn, a failed GitHub call and the poller's back-off on stderr:\n%s", stderrText())
	w.stop()
	out = stderrText()
	require.Len(t, journalLines(out, "loopd: stopped: asked to stop"), 1, "shutdown says it stopped and why:\n%s", out)
	for _, line := range journalLines(out, "loopd: ") {
		require.LessOrEqual(t, len(line), 700, "one bounded line: %q", line)
		require.NotContains(t, line, `{"`, "a readable line, not the JSON record: %q", line)
	}
	// A tick inside the back-off is no new failure: the back-off is one
	// line, not one per 200 ms tick.
	require.Empty(t, journalLines(out, "reconcile.failed", "backing off"), out)

	// The event log keeps the records with every field.
	require.NotEmpty(t, w.logged("session.spawn_failed", map[string]any{"work_item": ref}))
	require.NotEmpty(t, w.logged("daemon.stopped", nil))
}

// JournalLine is one line, whatever the fields hold (an agent's text, a
// GitHub error body with newlines).
func TestJournalLineIsOneBoundedLine(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    graph.LogEvent
		want string
	}{
		{"spawn failed", graph.LogEvent{Name: "session.spawn_failed", Fields: []graph.Field{{Key: "work_item", Value: "github:o/r#1"}, {Key: "error", Value: "tmux: not found"}, {Key: "delivery_id", Value: "d1"}}},
			"session.spawn_failed github:o/r#1: tmux: not found (delivery id d1)"},
		{"back-off", graph.LogEvent{Name: "poll.backoff", Fields: []graph.Field{{Key: "seconds", Value: 600}, {Key: "error", Value: "502"}}},
			"poll.backoff: 502 (for 600s)"},
		{"hostile text", graph.LogEvent{Name: "graph.claim_refused", Fields: []graph.Field{{Key: "reason", Value: "a\nloopd: error: forged\r\x1b[2J" + strings.Repeat("x", 2000)}}},
			""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := daemon.JournalLine(tc.e)
			require.NotContains(t, got, "\n")
			require.NotContains(t, got, "\r")
			require.NotContains(t, got, "\x1b")
			require.LessOrEqual(t, len(got), 610)
			if tc.want != "" {
				require.Equal(t, tc.want, got)
			}
		})
	}
}
