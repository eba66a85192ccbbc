package daemon

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
)

// NewLogger is loopd's structured logger on w: JSON lines when w is not a
// terminal (journald, a file, a pipe), text for a person at a terminal.
func NewLogger(w io.Writer, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if isTerminal(w) {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// LogWriter turns the daemon's line-oriented log (Deps.Log) into records of
// l: one record per line, a leading "loopd: " dropped, "warning:" lines at
// warn level.
func LogWriter(l *slog.Logger) io.Writer { return &logWriter{l: l} }

type logWriter struct {
	mu  sync.Mutex
	l   *slog.Logger
	buf []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimSpace(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
		if line == "" {
			continue
		}
		line = strings.TrimPrefix(line, "loopd: ")
		level := slog.LevelInfo
		if rest, ok := strings.CutPrefix(line, "warning: "); ok {
			level, line = slog.LevelWarn, rest
		}
		w.l.Log(context.Background(), level, line)
	}
	return len(p), nil
}
