package dashboard

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

// TestTailerNotifiesForOtherProcessesLines: lines appended to the shared
// event log by another writer notify their work item; what was there before
// is not replayed; a rotated log is followed; a partial line waits for its
// end.
func TestTailerNotifiesForOtherProcessesLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	el, err := loop.OpenEventLog(path, "loopctl", loop.EventLogOptions{MaxBytes: -1})
	require.NoError(t, err)
	emit := func(el *loop.EventLog, ref string) {
		el.Emit(graph.LogEvent{Name: "graph.advanced", Level: graph.LevelInfo, Fields: []graph.Field{{Key: "work_item", Value: ref}, {Key: "node", Value: "a"}}})
	}
	emit(el, "github:o/r#1") // before the tailer: not replayed

	var mu sync.Mutex
	got := map[string]int{}
	tl := startTailer(path, 10*time.Millisecond, func(ref string) {
		mu.Lock()
		got[ref]++
		mu.Unlock()
	})
	defer tl.close()
	seen := func(ref string) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return got[ref] > 0 }
	}

	emit(el, "github:o/r#2")
	require.Eventually(t, seen("github:o/r#2"), 5*time.Second, 5*time.Millisecond)

	// Half a line, then the rest.
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"ts":"2026-11-30T12:00:00.000Z","event":"graph.parked","work_item":"github:o/r#3"`)
	require.NoError(t, err)
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	require.Zero(t, got["github:o/r#3"], "no notification for half a line")
	mu.Unlock()
	_, err = f.WriteString("}\n")
	require.NoError(t, err)
	f.Close()
	require.Eventually(t, seen("github:o/r#3"), 5*time.Second, 5*time.Millisecond)

	// Rotation: the file is renamed away and a new one started.
	require.NoError(t, el.Close())
	require.NoError(t, os.Rename(path, path+".1"))
	el2, err := loop.OpenEventLog(path, "loopctl", loop.EventLogOptions{MaxBytes: -1})
	require.NoError(t, err)
	defer el2.Close()
	emit(el2, "github:o/r#4")
	require.Eventually(t, seen("github:o/r#4"), 5*time.Second, 5*time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, got["github:o/r#1"], "history is not replayed")
}
