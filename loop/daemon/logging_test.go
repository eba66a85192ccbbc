package daemon

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
)

func TestLoggerIsJSONOffATerminalAndLinesBecomeRecords(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(&buf, slog.LevelInfo)
	w := LogWriter(l)
	_, _ = w.Write([]byte("loopd: the event log is unavailable: x\nloopd: warning: no secret"))
	_, _ = w.Write([]byte("\n"))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, 2)
	var rec map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &rec), "JSON when not a terminal")
	require.Equal(t, "the event log is unavailable: x", rec["msg"])
	require.Equal(t, "INFO", rec["level"])
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &rec))
	require.Equal(t, "WARN", rec["level"])
	require.Equal(t, "no secret", rec["msg"])
}

// A flood of one warning costs journalBurst lines a window, and the count
// of the rest comes with the next line after it: never silence, never a
// flood.
func TestJournalSinkBoundsAFlood(t *testing.T) {
	var buf bytes.Buffer
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	j := newJournalSink(&buf, func() time.Time { return now })
	warn := graph.LogEvent{Name: "graph.claim_refused", Level: graph.LevelWarning, Fields: []graph.Field{{Key: "reason", Value: "no"}}}
	for range 25 {
		j.Emit(warn)
	}
	j.Emit(graph.LogEvent{Name: "dispatch.handled", Level: graph.LevelInfo})
	j.Emit(graph.LogEvent{Name: "routing.dropped", Level: graph.LevelWarning}) // dropLog's
	require.Equal(t, journalBurst, strings.Count(buf.String(), "\n"), buf.String())
	now = now.Add(journalWindow)
	j.Emit(warn)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	require.Len(t, lines, journalBurst+1)
	require.Equal(t, "loopd: warning: graph.claim_refused: no (and 15 more graph.claim_refused in the last 1m0s, in the event log)", lines[journalBurst])
}
