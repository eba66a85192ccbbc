package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// eventsWorld is a state root with loopd's log and a session registry
// naming the work item's checkout, where the agent's claims are logged.
type eventsWorld struct {
	state, worktree   string
	daemonLog, claims string
	t0                time.Time
}

func newEventsWorld(t *testing.T) eventsWorld {
	t.Helper()
	base := t.TempDir()
	w := eventsWorld{state: filepath.Join(base, "state"), worktree: filepath.Join(base, "wt", "octo-demo-42"),
		t0: time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)}
	w.daemonLog = loop.DaemonEventLogPath(w.state, loop.CLIConfig{})
	w.claims = loop.CheckoutEventLogPath(w.worktree)
	require.NoError(t, os.MkdirAll(w.worktree, 0o755))
	reg, err := sessions.OpenRegistry(sessions.RegistryDir(w.state))
	require.NoError(t, err)
	for _, n := range []int{42, 43} {
		item, err := workitem.Parse("github:octo/demo#" + string(rune('0'+n/10)) + string(rune('0'+n%10)))
		require.NoError(t, err)
		id, err := sessions.NewSessionID()
		require.NoError(t, err)
		cwd := w.worktree
		if n == 43 {
			cwd = filepath.Join(base, "wt", "octo-demo-43")
		}
		require.NoError(t, reg.Put(context.Background(), sessions.Record{Item: item, Harness: "claude", SessionID: id,
			TmuxName: sessions.TmuxName(item), Cwd: cwd, Status: sessions.StatusActive, Created: w.t0}))
	}
	return w
}

// appendEvent appends one line to the log at path, second s after t0.
func (w eventsWorld) appendEvent(t *testing.T, path, source, name, item string, s int) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Write(loop.FormatEventLine(source, 1, graph.LogEvent{Time: w.t0.Add(time.Duration(s) * time.Second), Name: name,
		Fields: []graph.Field{{Key: "work_item", Value: item}}}))
	require.NoError(t, err)
}

func eventNames(t *testing.T, jsonl string) []string {
	t.Helper()
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(jsonl), "\n") {
		if line == "" {
			continue
		}
		rec, err := loop.ParseEventLine([]byte(line))
		require.NoError(t, err, line)
		names = append(names, rec.Event)
	}
	return names
}

// `loopctl events` reads loopd's log (found from the state root), the one
// stream the dashboard reads; --claims merges the work item's claims (from
// its checkout) in time order.
func TestEventsReadsLoopdsLogAndMergesTheClaimsOnRequest(t *testing.T) {
	w := newEventsWorld(t)
	const ref = "github:octo/demo#42"
	w.appendEvent(t, w.daemonLog, "loopd", "dispatch.spawned", ref, 1)
	w.appendEvent(t, w.daemonLog, "loopd", "graph.assignment_delivered", ref, 3)
	w.appendEvent(t, w.daemonLog, "loopd", "dispatch.spawned", "github:octo/demo#43", 4)
	w.appendEvent(t, w.daemonLog, "loopd", "outbox.performed", ref, 5)
	w.appendEvent(t, w.claims, "cli", "graph.claimed", ref, 2)
	w.appendEvent(t, w.claims, "cli", "graph.advanced", ref, 4)

	for _, tc := range []struct {
		name     string
		workItem string
		limit    int
		claims   bool
		want     []string
	}{
		{"loopd's log alone", ref, 0, false, []string{"dispatch.spawned", "graph.assignment_delivered", "outbox.performed"}},
		{"by ref", ref, 0, true, []string{"dispatch.spawned", "graph.claimed", "graph.assignment_delivered", "graph.advanced", "outbox.performed"}},
		{"by bare id", "issue-42", 0, true, []string{"dispatch.spawned", "graph.claimed", "graph.assignment_delivered", "graph.advanced", "outbox.performed"}},
		{"limit keeps the last of the merge", "42", 2, true, []string{"graph.advanced", "outbox.performed"}},
		{"every item", "", 0, true, []string{"dispatch.spawned", "graph.claimed", "graph.assignment_delivered", "dispatch.spawned", "graph.advanced", "outbox.performed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, io := testFactory(t, t.TempDir(), nil)
			err := runEvents(&eventsOptions{Factory: f, StateRoot: w.state, WorkItem: tc.workItem, Limit: tc.limit, Format: "jsonl", Claims: tc.claims})
			require.NoError(t, err, io.err.String())
			require.Equal(t, tc.want, eventNames(t, io.out.String()))
		})
	}
}

// syncBuffer is a bytes.Buffer safe for the follower's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// --follow --claims prints what is appended to both logs until interrupted, through
// a rotation of loopd's log and a truncation of the checkout's.
func TestEventsFollowStreamsBothLogs(t *testing.T) {
	w := newEventsWorld(t)
	const ref = "github:octo/demo#42"
	w.appendEvent(t, w.daemonLog, "loopd", "history.daemon", ref, 1)
	w.appendEvent(t, w.claims, "cli", "history.claim", ref, 2)

	f, _ := testFactory(t, t.TempDir(), nil)
	out := &syncBuffer{}
	f.IO.Out = out
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runEvents(&eventsOptions{Factory: f, StateRoot: w.state, WorkItem: ref, Format: "jsonl", Follow: true, Claims: true, Ctx: ctx, Poll: 5 * time.Millisecond})
	}()
	waitFor := func(want ...string) {
		t.Helper()
		require.Eventually(t, func() bool {
			got := eventNames(t, out.String())
			return len(got) >= len(want) && strings.Join(got[len(got)-len(want):], ",") == strings.Join(want, ",")
		}, 10*time.Second, 5*time.Millisecond, "want %v at the end of %q", want, out.String())
	}
	waitFor("history.daemon", "history.claim")

	w.appendEvent(t, w.claims, "cli", "live.claim", ref, 10)
	waitFor("live.claim")
	w.appendEvent(t, w.daemonLog, "loopd", "live.daemon", ref, 11)
	w.appendEvent(t, w.daemonLog, "loopd", "other.item", "github:octo/demo#43", 12)
	waitFor("live.daemon")

	// loopd's log rotates: a line written to the old file just before the
	// rename and the new file's lines all arrive.
	w.appendEvent(t, w.daemonLog, "loopd", "before.rotation", ref, 13)
	require.NoError(t, os.Rename(w.daemonLog, w.daemonLog+".1"))
	w.appendEvent(t, w.daemonLog, "loopd", "after.rotation", ref, 14)
	waitFor("before.rotation", "after.rotation")

	// The checkout's log is truncated and written again.
	require.NoError(t, os.Truncate(w.claims, 0))
	w.appendEvent(t, w.claims, "cli", "after.truncation", ref, 15)
	waitFor("after.truncation")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("--follow did not stop when interrupted")
	}
	require.NotContains(t, out.String(), "other.item")
	require.Equal(t, []string{"history.daemon", "history.claim", "live.claim", "live.daemon", "before.rotation", "after.rotation", "after.truncation"}, eventNames(t, out.String()))
}

// events on a work item nothing knows exits 1 and says why; one known only
// by its spec directory (no event yet) is an empty answer, exit 0.
func TestEventsRefusesAnUnknownWorkItem(t *testing.T) {
	w := newEventsWorld(t)
	w.appendEvent(t, w.daemonLog, "loopd", "dispatch.spawned", "github:octo/demo#42", 1)

	f, io := testFactory(t, t.TempDir(), nil)
	code := Main([]string{"loopctl", "events", "--state-root", w.state, "--work-item", "issue-99"}, f)
	require.Equal(t, exitFailed, code, io.out.String())
	require.Contains(t, io.err.String(), "no work item issue-99")

	repo := newRepo(t) // holds docs/specs/issue-42
	write(t, repo, "docs/specs/issue-7/requirements.md", "# R\n")
	f, io = testFactory(t, repo, nil)
	require.Equal(t, exitOK, Main([]string{"loopctl", "events", "--state-root", w.state, "--work-item", "issue-7"}, f), io.err.String())
	f, io = testFactory(t, repo, nil)
	require.Equal(t, exitOK, Main([]string{"loopctl", "events", "--state-root", w.state, "--work-item", "42"}, f), io.err.String())
}
