package loop_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

// A full disk: the event log reports the failure (Err, which the daemon's
// health asks), holds the lines, and writes them, in order, when a write
// succeeds again — written at once or by the background writer (loopd's
// logs), whose Flush the test calls after each line.
func TestEventLogHoldsLinesWhileTheDiskIsFull(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a full file system needs a tmpfs mount: Linux and root only")
	}
	for _, background := range []bool{false, true} {
		name := "sync"
		if background {
			name = "background"
		}
		t.Run(name, func(t *testing.T) { testEventLogDiskFull(t, background) })
	}
}

func testEventLogDiskFull(t *testing.T, background bool) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	path := filepath.Join(dir, "events.jsonl")
	el, err := loop.OpenEventLog(path, "t", loop.EventLogOptions{Warnings: io.Discard, Background: background})
	require.NoError(t, err)
	defer el.Close()
	l := flushingLog{el}
	l.Emit(graph.LogEvent{Name: "one"})
	require.NoError(t, l.Err())

	fill := filepath.Join(dir, "fill")
	f, err := os.Create(fill)
	require.NoError(t, err)
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	f.Close()
	// The file's last page has room for a few lines: write until a
	// write fails, then one more.
	want := []string{"one"}
	for i := 0; i < 10000 && l.Err() == nil; i++ {
		l.Emit(graph.LogEvent{Name: "two"})
		want = append(want, "two")
	}
	require.ErrorContains(t, l.Err(), "events.jsonl cannot be written")
	l.Emit(graph.LogEvent{Name: "three"})
	want = append(want, "three")

	require.NoError(t, os.Remove(fill))
	l.Emit(graph.LogEvent{Name: "four"})
	require.NoError(t, l.Err())
	recs, err := loop.ReadEvents(path, loop.EventQuery{})
	require.NoError(t, err)
	var names []string
	for _, r := range recs {
		names = append(names, r.Event)
	}
	require.Equal(t, append(want, "four"), names, "every line, in order, none torn")
}

// flushingLog flushes after every line, so a Background log's writes (and
// failures) happen where the test expects them.
type flushingLog struct{ *loop.EventLog }

func (l flushingLog) Emit(e graph.LogEvent) {
	l.EventLog.Emit(e)
	l.Flush()
}

// An event log file larger than any writer makes (an agent's, with the log
// in its checkout) is refused before a line is read, naming the file.
func TestOversizedEventLogFileIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(`{"ts":"2026-01-01T00:00:00.000Z","event":"graph.forced"}`+"\n"), 0o644))
	// A sparse file: the size is what counts, not the blocks.
	require.NoError(t, os.Truncate(path, loop.MaxEventLogFileBytes+1))
	_, err := loop.ReadEvents(path, loop.EventQuery{})
	require.ErrorIs(t, err, loop.ErrEventLogTooLarge)
	require.ErrorContains(t, err, path)
	require.ErrorContains(t, err, "move it aside")
}
