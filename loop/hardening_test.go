package loop_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

type recorder struct {
	mu     sync.Mutex
	events []graph.LogEvent
}

func (r *recorder) Emit(e graph.LogEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) named(name string) []graph.LogEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []graph.LogEvent
	for _, e := range r.events {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// Issue 9, item 3: files theloop appends to are opened without following
// links, so a link planted in the checkout cannot redirect a write.
func TestWritesDoNotFollowSymlinks(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "victim")
	require.NoError(t, os.WriteFile(outside, []byte("untouched\n"), 0o644))

	t.Run("execution log", func(t *testing.T) {
		repo := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(repo, "docs/specs/issue-1"), 0o755))
		require.NoError(t, os.Symlink(outside, filepath.Join(repo, "docs/specs/issue-1/execution-log.md")))
		arts := loop.NewFileArtifacts(filepath.Join(repo, "docs/specs/issue-1"), "docs/specs/issue-1")
		err := arts.AppendFile("execution-log.md", []byte("appended\n"))
		require.ErrorIs(t, err, loop.ErrUnsafePath)
		require.ErrorContains(t, err, "docs/specs/issue-1/execution-log.md is a symbolic link")
	})
	t.Run("spec directory", func(t *testing.T) {
		repo := t.TempDir()
		require.NoError(t, os.MkdirAll(filepath.Join(repo, "docs/specs"), 0o755))
		require.NoError(t, os.Symlink(filepath.Dir(outside), filepath.Join(repo, "docs/specs/issue-1")))
		arts := loop.NewFileArtifacts(filepath.Join(repo, "docs/specs/issue-1"), "docs/specs/issue-1")
		require.ErrorIs(t, arts.AppendFile("victim", []byte("appended\n")), loop.ErrUnsafePath)
		require.ErrorIs(t, arts.WriteFile("victim", []byte("replaced\n")), loop.ErrUnsafePath)
	})
	t.Run("event log", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Symlink(outside, filepath.Join(dir, "events.jsonl")))
		_, err := loop.OpenEventLog(filepath.Join(dir, "events.jsonl"), "cli", loop.EventLogOptions{})
		require.ErrorIs(t, err, loop.ErrUnsafePath)
		linked := filepath.Join(t.TempDir(), "logs")
		require.NoError(t, os.Symlink(filepath.Dir(outside), linked))
		_, err = loop.OpenEventLog(filepath.Join(linked, "victim"), "cli", loop.EventLogOptions{})
		require.ErrorIs(t, err, loop.ErrUnsafePath)
	})
	data, err := os.ReadFile(outside)
	require.NoError(t, err)
	require.Equal(t, "untouched\n", string(data))
}

// Issue 9, item 4: a force whose state cannot be saved logs nothing (the
// state directory made unwritable by `mkdir graph-state.json`).
func TestForceThatCannotSaveLogsNothing(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "docs/specs/issue-1/graph-state.json"), 0o755))
	rec := &recorder{}
	rt, err := loop.Open(repo, loop.Options{Sink: rec})
	require.NoError(t, err)
	_, err = rt.Force(context.Background(), "issue-1", graph.ForceRequest{To: "design", Reason: "testing", Actor: "me"})
	require.Error(t, err)
	require.Empty(t, rec.named("graph.forced"), "no event for a force that did not happen")
}

// A transition saved by a verb killed before it logged is logged by the next
// verb that takes the lock, marked relogged; the state then holds no
// unlogged event.
func TestSavedButUnloggedTransitionIsRelogged(t *testing.T) {
	repo := t.TempDir()
	rec := &recorder{}
	rt, err := loop.Open(repo, loop.Options{Sink: rec})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Force(ctx, "issue-1", graph.ForceRequest{To: "design", Reason: "first", Actor: "me"})
	require.NoError(t, err)
	forced := rec.named("graph.forced")
	require.Len(t, forced, 1)
	seq, _ := forced[0].Get("seq")
	require.Equal(t, 1, seq)

	// Simulate the kill: the state holds the transition and its event.
	st, err := loop.NewStore(repo, "").Load(ctx, "issue-1")
	require.NoError(t, err)
	require.Empty(t, st.Unlogged, "a completed verb leaves nothing unlogged")
	st.Seq++
	st.Unlogged = []graph.JournalEntry{{Seq: st.Seq, Time: "2026-05-04T09:00:00Z", Name: "graph.forced", Level: graph.LevelWarning, Fields: []graph.JournalField{{Key: "from", Value: "design"}, {Key: "to", Value: "implementation"}, {Key: "reason", Value: "killed"}}}}
	require.NoError(t, loop.NewStore(repo, "").Save(ctx, "issue-1", st))

	rec2 := &recorder{}
	rt2, err := loop.Open(repo, loop.Options{Sink: rec2})
	require.NoError(t, err)
	_, err = rt2.Advance(ctx, "issue-1", nil)
	require.NoError(t, err)
	relogged := rec2.named("graph.forced")
	require.Len(t, relogged, 1)
	v, _ := relogged[0].Get("relogged")
	require.Equal(t, true, v)
	r, _ := relogged[0].Get("reason")
	require.Equal(t, "killed", r)
	st, err = loop.NewStore(repo, "").Load(ctx, "issue-1")
	require.NoError(t, err)
	require.Empty(t, st.Unlogged)

	// Status never writes, and so never relogs.
	data, err := os.ReadFile(filepath.Join(repo, "docs/specs/issue-1/graph-state.json"))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	require.NotContains(t, m, "unlogged")
}

// Issue 9, item 6 (the store's part): temp files of killed saves are gone
// after the next locked open, whatever their age.
func TestKilledSaveTempFilesAreRemovedUnderTheLock(t *testing.T) {
	repo := t.TempDir()
	dir := filepath.Join(repo, "docs/specs/issue-1")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, n := range []string{".graph-state.json.tmp-1", ".graph-state.json.tmp-2"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, n), []byte("{"), 0o644))
	}
	unlock, err := loop.NewStore(repo, "").Lock(context.Background(), "issue-1", 0)
	require.NoError(t, err)
	unlock()
	left, _ := filepath.Glob(filepath.Join(dir, ".graph-state.json.tmp-*"))
	require.Empty(t, left)
}

// A named pipe planted where theloop reads a file (harness config, an
// artifact, graph-state.json) must not hang a check: opening a FIFO for
// reading waits for a writer. Each is refused as not a regular file.
func TestNamedPipesDoNotHangTheCheck(t *testing.T) {
	repo := t.TempDir()
	spec := filepath.Join(repo, "docs/specs/issue-1")
	require.NoError(t, os.MkdirAll(spec, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(repo, ".the-loop"), 0o755))
	for _, p := range []string{
		filepath.Join(repo, ".the-loop/harness-config.yaml"),
		filepath.Join(repo, ".the-loop/collaborators.yaml"),
		filepath.Join(spec, "requirements.md"),
		filepath.Join(spec, "design.md"),
		filepath.Join(spec, "execution-log.md"),
		filepath.Join(spec, "graph-state.json"),
	} {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Skipf("mkfifo: %v", err)
		}
	}
	done := make(chan error, 1)
	go func() {
		rt, err := loop.Open(repo, loop.Options{WorkItem: "issue-1"})
		if err == nil {
			_, err = rt.Status(context.Background(), "issue-1", true)
		}
		done <- err
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the check hung on a named pipe")
	}
	arts := loop.NewFileArtifacts(spec, "docs/specs/issue-1")
	err := arts.AppendFile("execution-log.md", []byte("x"))
	require.Error(t, err)
}
