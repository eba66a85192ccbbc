package daemon

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
