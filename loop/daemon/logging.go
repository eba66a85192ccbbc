package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
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
// warn level, "error:" lines at error level.
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
		} else if rest, ok := strings.CutPrefix(line, "error: "); ok {
			level, line = slog.LevelError, rest
		}
		w.l.Log(context.Background(), level, line)
	}
	return len(p), nil
}

// The journal: loopd's stderr (journald under systemd) carries, beside its
// start-up lines, one readable line for every warning and error it logs —
// a failed spawn, a failed GitHub call, the poller's back-off, a refused
// claim — so `journalctl -u loopd` shows a daemon in trouble as one. The
// event log keeps the JSON record with every field; the line names the
// event, the work item and what went wrong.

// journalBurst is how many lines one event name may write per
// journalWindow; past it the lines are counted and the count is written
// with the name's next line after the window (a flood costs a few lines a
// minute, never silence).
const (
	journalBurst  = 10
	journalWindow = time.Minute
	// maxJournalLine bounds one line (the fields may quote an agent's
	// artifact or a GitHub error body).
	maxJournalLine = 600
)

// journalSink writes warnings and errors of the event stream to out as
// "loopd: warning: …" / "loopd: error: …" lines (LogWriter gives them
// their level). It is a graph.Sink and keeps no goroutine.
type journalSink struct {
	out io.Writer
	now func() time.Time

	mu    sync.Mutex
	names map[string]*journalName
}

type journalName struct {
	since      time.Time // the window's start
	written    int       // lines written in the window
	suppressed int       // lines not written since the window started
}

// maxJournalNames bounds the per-name windows (event names are a fixed
// vocabulary; the bound costs nothing).
const maxJournalNames = 256

func newJournalSink(out io.Writer, now func() time.Time) *journalSink {
	return &journalSink{out: out, now: now, names: map[string]*journalName{}}
}

// journalQuiet are warning-level events another sink already writes to the
// journal (dropLog's routing.dropped, summed per reason).
var journalQuiet = map[string]bool{ingress.EventDropped: true}

func (j *journalSink) Emit(e graph.LogEvent) {
	if (e.Level != graph.LevelWarning && e.Level != graph.LevelError) || journalQuiet[e.Name] {
		return
	}
	now := j.now()
	j.mu.Lock()
	n := j.names[e.Name]
	if n == nil {
		if len(j.names) >= maxJournalNames {
			j.names = map[string]*journalName{}
		}
		n = &journalName{since: now}
		j.names[e.Name] = n
	}
	more := 0
	if now.Sub(n.since) >= journalWindow {
		more, n.since, n.written, n.suppressed = n.suppressed, now, 0, 0
	}
	if n.written >= journalBurst {
		n.suppressed++
		j.mu.Unlock()
		return
	}
	n.written++
	j.mu.Unlock()
	line := JournalLine(e)
	if more > 0 {
		line += fmt.Sprintf(" (and %d more %s in the last %s, in the event log)", more, e.Name, journalWindow)
	}
	fmt.Fprintf(j.out, "loopd: %s: %s\n", journalLevel(e.Level), line)
}

func journalLevel(l graph.Level) string {
	if l == graph.LevelError {
		return "error"
	}
	return "warning"
}

// journalLead are the fields that say what went wrong, in the order a
// line quotes the first one present.
var journalLead = []string{"error", "reason", "message", "warning", "fix"}

// journalExtra are the fields a line adds after it, when present.
var journalExtra = []string{"node", "hook", "command", "action", "pull_request", "repo", "endpoint", "seconds", "asked_node", "what", "delivery_id"}

// JournalLine is an event as one readable line: its name, its work item,
// what went wrong and the fields that place it — no newline, no control
// character, at most maxJournalLine bytes.
func JournalLine(e graph.LogEvent) string {
	get := func(k string) string {
		for _, f := range e.Fields {
			if f.Key == k && f.Value != nil {
				return fmt.Sprint(f.Value)
			}
		}
		return ""
	}
	var b strings.Builder
	b.WriteString(e.Name)
	if wi := get("work_item"); wi != "" {
		b.WriteString(" " + wi)
	}
	lead := ""
	for _, k := range journalLead {
		if v := get(k); v != "" {
			lead = v
			b.WriteString(": " + v)
			break
		}
	}
	var extra []string
	for _, k := range journalExtra {
		if v := get(k); v != "" && v != lead {
			if k == "seconds" {
				extra = append(extra, "for "+v+"s")
				continue
			}
			extra = append(extra, strings.ReplaceAll(k, "_", " ")+" "+v)
		}
	}
	if len(extra) > 0 {
		b.WriteString(" (" + strings.Join(extra, ", ") + ")")
	}
	if fix := get("fix"); fix != "" && fix != lead {
		b.WriteString(" — " + fix)
	}
	return clipText(printable(b.String()), maxJournalLine)
}

// printable replaces line breaks and other control characters with spaces.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0x2028 || r == 0x2029 {
			return ' '
		}
		return r
	}, s)
}

// EventProgramMissing: a program agent sessions need is not on loopd's
// PATH (logged at start, a warning: loopd still serves, and refuses the
// spawns that need it).
const EventProgramMissing = "daemon.program_missing"

// warnMissingPrograms warns at start when a program sessions need is not
// on the PATH loopd runs them with: tmux (every session) and, unless
// routing.sandbox is off or landlock, bubblewrap (the agent's world).
func warnMissingPrograms(w *agentWorlds, path searchPath, emit emitFunc) {
	tmux := w.tmuxConfig().Binary
	if tmux == "" {
		tmux = "tmux"
	}
	need := []struct{ name, why, fix string }{
		{tmux, "every agent session runs in tmux: no session can be spawned", "install tmux (Debian/Ubuntu: apt-get install tmux; macOS: brew install tmux)"},
	}
	if !w.cfg.SandboxOff() && !w.cfg.SandboxLandlock() {
		need = append(need, struct{ name, why, fix string }{sandbox.BwrapPath, "the agent's sandbox (its own world) is bubblewrap: loopd refuses to spawn without it",
			"install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), or set routing.sandbox: landlock (degraded)"})
	}
	for _, p := range need {
		if _, err := path.lookPath(p.name); err != nil {
			emit(EventProgramMissing, graph.LevelWarning, graph.Field{Key: "program", Value: p.name},
				graph.Field{Key: "error", Value: p.name + " is not on PATH: " + p.why}, graph.Field{Key: "fix", Value: p.fix})
		}
	}
}

// stopReason says why Run is returning: the error that stopped it, or the
// stop it was asked for (a signal, a caller's cancel).
func stopReason(ctx context.Context, err error) string {
	switch {
	case err != nil:
		return err.Error()
	case ctx.Err() != nil:
		if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
			return "asked to stop: " + c.Error()
		}
		return "asked to stop (a signal or its caller)"
	}
	return "its work ended"
}
