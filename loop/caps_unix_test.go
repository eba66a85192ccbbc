//go:build unix

package loop

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestScanEventsRefusesANamedPipe: a FIFO planted where the event log
// belongs is refused at once (an open would block `loopctl events` and the
// dashboard forever, waiting for a writer).
func TestScanEventsRefusesANamedPipe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	require.NoError(t, syscall.Mkfifo(path, 0o644))
	_, err := ScanEvents(path, EventQuery{}, func(EventRecord) error { return nil })
	require.ErrorIs(t, err, errNotRegular)
	require.ErrorContains(t, err, path)
}
