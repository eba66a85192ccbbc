package loop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/jsonascii"
)

// Event log defaults.
const (
	DefaultEventLogMaxBytes   = 10 << 20
	DefaultEventLogMaxBackups = 3
	// EventTimeLayout is the envelope's ts: UTC, milliseconds, "Z".
	EventTimeLayout = "2006-01-02T15:04:05.000Z"
)

// maxEventLine bounds one line the reader accepts; longer lines are
// counted as malformed.
const maxEventLine = 4 << 20

// MaxEventLogFileBytes bounds one event log file a reader scans: a writer
// rotates at EventLogOptions.MaxBytes (10 MB by default), so a larger file
// was written by something else (an agent, with the log in its checkout)
// and scanning it would cost the reader (loopd's API, the dashboard,
// `loopctl events`) its time and memory. It is refused before a line is
// read, naming the file.
const MaxEventLogFileBytes = 256 << 20

// ErrEventLogTooLarge marks an event log file over MaxEventLogFileBytes.
var ErrEventLogTooLarge = errors.New("event log file too large")

// envelopeKeys are written first, in this order, by every line. A field of
// a LogEvent with one of these names is dropped: the envelope cannot be
// overridden.
var envelopeKeys = [...]string{"ts", "source", "event", "level", "pid"}

// EventLogOptions configure an EventLog. Zero values take the defaults.
type EventLogOptions struct {
	// MaxBytes is the size the file may reach before it is rotated
	// (default DefaultEventLogMaxBytes; negative: never rotate). The bound
	// is soft: writers in other processes may pass it by a few lines.
	MaxBytes int64
	// MaxBackups is how many rotated files are kept: events.jsonl.1 (the
	// newest) to events.jsonl.<MaxBackups> (default 3).
	MaxBackups int
	// Clock stamps events whose Time is zero (default the wall clock).
	Clock graph.Clock
	// Warnings receives the report of a failing write (default os.Stderr).
	Warnings io.Writer
	// PID is the envelope's pid (default os.Getpid()).
	PID int
	// Background takes the write off the caller's path: Emit formats the
	// line and queues it, and a writer goroutine writes whatever has
	// queued up with one stat and one write(2) (a daemon's webhook path
	// logs every event). Flush writes what is queued and returns after
	// it is in the file; Close flushes. Readers in the same process that
	// must see every line emitted so far call Flush first; readers in
	// other processes see a line once the writer got to it (it runs at
	// once; under load, lines wait for the write in progress). A crash
	// (kill -9) loses the lines queued and not yet written — log lines
	// only, at most maxQueuedBytes — never anything the log's writer did
	// not itself hold. Past maxQueuedBytes queued, Emit writes the queue
	// itself (back-pressure rather than loss).
	Background bool
	// Scrub, when set, cleans every field value before the line is
	// formatted (CredentialScrub): a program whose events are not scrubbed
	// upstream (loopctl; loopd scrubs its whole event stream) uses it.
	Scrub func(any) any
}

// EventLog is the JSONL event log (docs/graph.md §8, docs/daemon.md
// §15), a graph.Sink. Every event is one line written with one write(2) on
// a descriptor opened with O_APPEND, so several processes can share the
// file without interleaving lines.
//
// Rotation: when a line would take the file past MaxBytes the writer takes
// a flock on the sidecar <path>.lock, re-checks the size (another process
// may have rotated already), shifts events.jsonl.N → .N+1, renames the file
// to events.jsonl.1 and reopens. A writer in another process that checked
// the size just before the rename writes its line at the end of the file
// that has become events.jsonl.1: the line is kept, in the newest backup —
// a benign race. Before every write the log checks that its descriptor
// still names the file at path and reopens it otherwise, so at most one
// line per process lands in a rotated file.
//
// Emit never panics, never blocks on another process and never returns an
// error: a failing write is reported once to Warnings (again only after a
// write has succeeded in between) and the line is held in memory (up to
// 1 MB; beyond that lines are counted and dropped). The next write that
// succeeds — once the disk has room again — writes the held lines first, in
// order, after one eventlog.lost line when some were dropped. Err reports
// whether the last write failed. A nil *EventLog discards events. Safe for
// concurrent use.
type EventLog struct {
	path, source string
	maxBytes     int64
	maxBackups   int
	clock        graph.Clock
	warnings     io.Writer
	pid          int
	scrub        func(any) any

	mu sync.Mutex
	f  *os.File
	// fi is f's FileInfo, taken when f was opened: its identity (device
	// and inode) never changes, so each line costs one stat of the path
	// (identity and size) and the write, not a stat of the descriptor too.
	fi     fs.FileInfo
	warned bool
	closed bool
	// held are lines a failed write left over (a full disk), written
	// first, in order, by the next write that succeeds; heldBytes bounds
	// them (maxHeldBytes) and lost counts the lines beyond the bound.
	held      [][]byte
	heldBytes int
	lost      int
	lastErr   error
	// spare is the queue buffer not in use (Background), reused by the
	// next drain. Guarded by mu.
	spare []byte

	// Background mode: queue holds formatted lines waiting for the
	// writer (guarded by qmu, taken after mu when both are held); kick
	// wakes the writer; stop and done end it.
	qmu     sync.Mutex
	queue   []byte
	qclosed bool
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// maxQueuedBytes bounds the lines a Background log queues before Emit
// writes them itself.
const maxQueuedBytes = 1 << 20

// maxHeldBytes bounds the lines an EventLog keeps while it cannot write.
const maxHeldBytes = 1 << 20

// OpenEventLog opens (creating it and its directory, 0755) the log at path
// for events emitted by source (e.g. "loopctl", "loopd", "loop-gate").
// It fails only when the file cannot be opened; the caller decides whether
// to run without a log.
func OpenEventLog(path, source string, opts EventLogOptions) (*EventLog, error) {
	if path == "" {
		return nil, errors.New("event log: empty path; set eventLog.path or disable the log with eventLog.enabled: false")
	}
	l := &EventLog{
		path: path, source: source,
		maxBytes: opts.MaxBytes, maxBackups: opts.MaxBackups,
		clock: opts.Clock, warnings: opts.Warnings, pid: opts.PID, scrub: opts.Scrub,
	}
	if l.maxBytes == 0 {
		l.maxBytes = DefaultEventLogMaxBytes
	}
	if l.maxBackups <= 0 {
		l.maxBackups = DefaultEventLogMaxBackups
	}
	if l.clock == nil {
		l.clock = graph.SystemClock{}
	}
	if l.warnings == nil {
		l.warnings = os.Stderr
	}
	if l.pid == 0 {
		l.pid = os.Getpid()
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("event log %s: creating its directory: %w", path, err)
	}
	f, fi, err := openAppend(path)
	if err != nil {
		return nil, fmt.Errorf("event log %s: %w", path, err)
	}
	l.f, l.fi = f, fi
	if opts.Background {
		l.kick, l.stop, l.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go l.writer()
	}
	return l, nil
}

// writer writes the queued lines, backgroundLinger after the first of
// them was queued, until Close.
func (l *EventLog) writer() {
	defer close(l.done)
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		select {
		case <-l.kick:
		case <-l.stop:
			return
		}
		// Lines emitted meanwhile go out in the same write: a busy
		// daemon writes a few hundred times a second, not once per line.
		linger.Reset(backgroundLinger)
		select {
		case <-linger.C:
		case <-l.stop:
			return // Close writes the queue
		}
		l.Flush()
	}
}

// backgroundLinger is how long a Background log's writer lets lines gather
// before it writes them: the most a reader in another process waits for a
// line, and what a crash can lose on top of the write in progress.
const backgroundLinger = 2 * time.Millisecond

// openAppend opens the log for appending without following a symbolic
// link, in a directory that is not one: with the default state root inside
// a checkout, a link planted by the agent must not turn O_APPEND into a
// write outside it.
func openAppend(path string) (*os.File, fs.FileInfo, error) {
	if fi, err := os.Lstat(filepath.Dir(path)); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return nil, nil, fmt.Errorf("%w: the event log's directory %s is a symbolic link; replace it with a directory", ErrUnsafePath, filepath.Dir(path))
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|oNoFollow|oNonBlock, 0o644)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, nil, fmt.Errorf("%w: the event log %s is a symbolic link; replace it with a file", ErrUnsafePath, path)
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: the event log %s is not a regular file", ErrUnsafePath, path)
	}
	return f, fi, nil
}

// Path returns the log file's path.
func (l *EventLog) Path() string { return l.path }

// Close writes the queued lines (Background) and closes the file. Later
// Emits are discarded.
func (l *EventLog) Close() error {
	if l == nil {
		return nil
	}
	if l.stop != nil {
		l.qmu.Lock()
		stopped := l.qclosed
		l.qclosed = true
		l.qmu.Unlock()
		if !stopped {
			close(l.stop)
			<-l.done
		}
	}
	l.mu.Lock()
	l.drainLocked()
	defer l.mu.Unlock()
	l.closed = true
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f, l.fi = nil, nil
	return err
}

// Emit implements graph.Sink: it appends e as one line (Background: queues
// it). An event with a zero Time is stamped with the log's clock.
func (l *EventLog) Emit(e graph.LogEvent) {
	if l == nil {
		return
	}
	l.EmitLine(l.Line(e))
}

// Line formats e as this log writes it (stamped with the log's clock when
// its Time is zero), for EmitLine: a program writing the same event to
// several logs of one source formats it once.
func (l *EventLog) Line(e graph.LogEvent) []byte {
	if e.Time.IsZero() {
		e.Time = l.clock.Now()
	}
	if l.scrub != nil {
		fields := make([]graph.Field, len(e.Fields))
		for i, f := range e.Fields {
			fields[i] = graph.Field{Key: f.Key, Value: l.scrub(f.Value)}
		}
		e.Fields = fields
	}
	return FormatEventLine(l.source, l.pid, e)
}

// EmitLine appends a line formatted by Line — of this log or of another
// log with the same source and pid. The log keeps no reference to line.
func (l *EventLog) EmitLine(line []byte) {
	if l == nil {
		return
	}
	if l.kick == nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		if !l.closed {
			l.writeLocked(line)
		}
		return
	}
	l.qmu.Lock()
	if l.qclosed {
		l.qmu.Unlock()
		return
	}
	l.queue = append(l.queue, line...)
	full := len(l.queue) >= maxQueuedBytes
	l.qmu.Unlock()
	if full {
		l.Flush()
		return
	}
	select {
	case l.kick <- struct{}{}:
	default: // the writer is already due to run
	}
}

// Flush writes the lines queued so far (Background): when it returns,
// every line emitted before the call is in the file, or held after a
// failed write (Err). Without Background there is nothing to flush.
func (l *EventLog) Flush() {
	if l == nil || l.kick == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.drainLocked()
}

// drainLocked writes the queue with one write. Called with l.mu held, so
// queued lines reach the file in the order they were queued.
func (l *EventLog) drainLocked() {
	l.qmu.Lock()
	batch := l.queue
	l.queue = l.spare[:0]
	l.spare = nil
	l.qmu.Unlock()
	if len(batch) == 0 {
		l.spare = batch
		return
	}
	if !l.closed {
		l.writeLocked(batch)
	}
	if cap(batch) <= maxQueuedBytes {
		l.spare = batch[:0]
	}
}

// writeLocked writes line (one line or, Background, several), holding it
// for a later write when this one fails. Called with l.mu held.
func (l *EventLog) writeLocked(line []byte) {
	err := l.writeHeld()
	if err == nil {
		err = l.write(line)
	}
	if err != nil {
		l.lastErr = err
		if l.heldBytes+len(line) <= maxHeldBytes {
			// A copy: the caller's buffer (the queue) is reused.
			l.held = append(l.held, bytes.Clone(line))
			l.heldBytes += len(line)
		} else {
			l.lost += max(bytes.Count(line, []byte{'\n'}), 1)
		}
		if !l.warned {
			l.warned = true
			fmt.Fprintf(l.warnings, "theloop: warning: event log %s: %v; events are held in memory (up to 1 MB, then dropped) until a write succeeds (further failures are not reported until then)\n", l.path, err)
		}
		return
	}
	l.lastErr = nil
	l.warned = false
}

// Err reports the error of the last write when it failed (nil once a write
// succeeds again). The daemon's health check asks it: a loopd that cannot
// record what it does is not healthy.
func (l *EventLog) Err() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastErr == nil {
		return nil
	}
	return fmt.Errorf("event log %s cannot be written: %w", l.path, l.lastErr)
}

// writeHeld writes the lines a failed write left over. Called with l.mu
// held.
func (l *EventLog) writeHeld() error {
	if l.lost > 0 {
		note := FormatEventLine(l.source, l.pid, graph.LogEvent{Time: l.clock.Now(), Name: "eventlog.lost", Level: graph.LevelWarning,
			Fields: []graph.Field{{Key: "lost", Value: l.lost}, {Key: "reason", Value: "the log could not be written and more than 1 MB of events waited"}}})
		if err := l.write(note); err != nil {
			return err
		}
		l.lost = 0
	}
	for len(l.held) > 0 {
		if err := l.write(l.held[0]); err != nil {
			return err
		}
		l.heldBytes -= len(l.held[0])
		l.held[0] = nil
		l.held = l.held[1:]
	}
	l.held = nil
	return nil
}

// write appends line, reopening or rotating the file first as needed.
// Called with l.mu held.
func (l *EventLog) write(line []byte) error {
	size, err := l.ensureCurrent()
	if err != nil {
		return err
	}
	if l.maxBytes > 0 && size > 0 && size+int64(len(line)) > l.maxBytes {
		if err := l.rotate(int64(len(line))); err != nil {
			return err
		}
	}
	n, err := l.f.Write(line)
	if err != nil && n > 0 {
		// A full disk takes part of a line: cut it off, so the line
		// held for later is not glued to a torn half. (The size was
		// stat'ed before the write; a line another process appended in
		// between — itself failing on the same full disk — is cut too.)
		if st, serr := l.f.Stat(); serr == nil && st.Size() >= int64(n) {
			_ = l.f.Truncate(st.Size() - int64(n))
		}
	}
	return err
}

// ensureCurrent makes l.f the file at l.path: it (re)opens it when it was
// never opened, was rotated away by another process, or was removed. It
// returns the file's size (as the path's stat or the new descriptor's
// says: the same file).
func (l *EventLog) ensureCurrent() (int64, error) {
	if l.f != nil {
		pathInfo, err := os.Stat(l.path)
		if err == nil {
			if os.SameFile(pathInfo, l.fi) {
				return pathInfo.Size(), nil
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
		l.f.Close()
		l.f, l.fi = nil, nil
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return 0, err
	}
	f, fi, err := openAppend(l.path)
	if err != nil {
		return 0, err
	}
	l.f, l.fi = f, fi
	return fi.Size(), nil
}

// rotate moves the full file aside under the sidecar lock. When another
// process holds that lock it is rotating right now: rotate does not wait,
// and the line is appended to the file as it is.
func (l *EventLog) rotate(need int64) error {
	unlock, err := tryLock(l.path + ".lock")
	if errors.Is(err, errLockHeld) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("taking the rotation lock: %w", err)
	}
	defer unlock()
	st, err := os.Stat(l.path)
	if err == nil && st.Size() > 0 && st.Size()+need > l.maxBytes {
		for i := l.maxBackups - 1; i >= 1; i-- {
			from := l.path + "." + strconv.Itoa(i)
			if err := os.Rename(from, l.path+"."+strconv.Itoa(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("rotating: %w", err)
			}
		}
		if err := os.Rename(l.path, l.path+".1"); err != nil {
			return fmt.Errorf("rotating: %w", err)
		}
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// Another process may have rotated already: either way, write to the
	// file now at path.
	_, err = l.ensureCurrent()
	return err
}

// FormatEventLine renders one event log line, trailing newline included:
// the envelope ts (e.Time in UTC, milliseconds, "Z"), source, event, level
// (info when empty) and pid, then e's fields in order. Fields whose value
// encodes to null are omitted, as are fields reusing an envelope key or an
// earlier field's key. Separators are compact, non-ASCII is escaped as
// \uXXXX and <, >, & are left as they are. A value JSON cannot encode (a
// channel, NaN) is written as its fmt %v text; an error as its message.
func FormatEventLine(source string, pid int, e graph.LogEvent) []byte {
	level := e.Level
	if level == "" {
		level = graph.LevelInfo
	}
	var b bytes.Buffer
	b.Grow(128)
	b.WriteString(`{"ts":"`)
	b.WriteString(e.Time.UTC().Format(EventTimeLayout))
	b.WriteString(`","source":`)
	b.Write(encodeJSONValue(source))
	b.WriteString(`,"event":`)
	b.Write(encodeJSONValue(e.Name))
	b.WriteString(`,"level":`)
	b.Write(encodeJSONValue(string(level)))
	b.WriteString(`,"pid":`)
	b.WriteString(strconv.Itoa(pid))
	seen := make(map[string]bool, len(e.Fields))
	for _, k := range envelopeKeys {
		seen[k] = true
	}
	for _, f := range e.Fields {
		if seen[f.Key] {
			continue
		}
		seen[f.Key] = true
		v := encodeJSONValue(f.Value)
		if string(v) == "null" {
			continue
		}
		b.WriteByte(',')
		b.Write(encodeJSONValue(f.Key))
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteString("}\n")
	return jsonascii.Escape(b.Bytes())
}

// encodeJSONValue encodes v compactly without HTML escaping.
func encodeJSONValue(v any) []byte {
	// Fast paths for the common field values, byte for byte what the
	// encoder writes: an int, and a string of printable ASCII with nothing
	// to escape.
	switch x := v.(type) {
	case int:
		return strconv.AppendInt(nil, int64(x), 10)
	case string:
		if plainASCII(x) {
			b := make([]byte, 0, len(x)+2)
			b = append(b, '"')
			b = append(b, x...)
			return append(b, '"')
		}
	}
	if err, ok := v.(error); ok && err != nil {
		v = err.Error()
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		b.Reset()
		_ = enc.Encode(fmt.Sprintf("%v", v))
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// plainASCII reports whether s is printable ASCII without '"' or '\\'
// (JSON-encoded as itself between quotes, HTML escaping off).
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

var _ graph.Sink = (*EventLog)(nil)

// --- Reading ---------------------------------------------------------------

// EventRecord is one parsed line of the event log.
type EventRecord struct {
	Time   time.Time
	Source string
	Event  string
	Level  graph.Level
	PID    int
	// Fields are the line's other keys in file order; numbers are
	// json.Number, objects map[string]any, arrays []any.
	Fields []graph.Field
	// Line is the line as stored, without its newline.
	Line []byte
}

// Get returns the value of the named field.
func (r EventRecord) Get(key string) (any, bool) {
	for _, f := range r.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// ParseEventLine parses one event log line. It requires a JSON object with
// a non-empty string "event" and an RFC 3339 "ts"; "source" and "level",
// when present, must be strings and "pid" an integer. Time is in UTC. Other keys become
// Fields (the first of duplicated keys wins). It never panics.
func ParseEventLine(line []byte) (EventRecord, error) {
	line = bytes.TrimRight(line, "\r\n")
	rec := EventRecord{Line: line}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return rec, fmt.Errorf("not JSON: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return rec, errors.New("not a JSON object")
	}
	seen := map[string]bool{}
	var ts, event string
	var haveTS, haveEvent bool
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return rec, fmt.Errorf("not JSON: %w", err)
		}
		key, ok := tok.(string)
		if !ok {
			return rec, errors.New("not a JSON object")
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return rec, fmt.Errorf("not JSON: %w", err)
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		switch key {
		case "ts":
			ts, haveTS = v.(string)
			if !haveTS {
				return rec, errors.New(`"ts" is not a string`)
			}
		case "event":
			event, haveEvent = v.(string)
			if !haveEvent {
				return rec, errors.New(`"event" is not a string`)
			}
		case "source":
			s, ok := v.(string)
			if !ok {
				return rec, errors.New(`"source" is not a string`)
			}
			rec.Source = s
		case "level":
			s, ok := v.(string)
			if !ok {
				return rec, errors.New(`"level" is not a string`)
			}
			rec.Level = graph.Level(s)
		case "pid":
			n, ok := v.(json.Number)
			if !ok {
				return rec, errors.New(`"pid" is not a number`)
			}
			pid, err := strconv.Atoi(n.String())
			if err != nil {
				return rec, errors.New(`"pid" is not an integer`)
			}
			rec.PID = pid
		default:
			rec.Fields = append(rec.Fields, graph.Field{Key: key, Value: v})
		}
	}
	if _, err := dec.Token(); err != nil {
		return rec, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return rec, errors.New("text after the JSON object")
	}
	if !haveEvent || event == "" {
		return rec, errors.New(`no "event"`)
	}
	if !haveTS {
		return rec, errors.New(`no "ts"`)
	}
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return rec, fmt.Errorf(`"ts" %q is not an RFC 3339 time`, ts)
	}
	if t = t.UTC(); t.Year() < 0 || t.Year() > 9999 {
		return rec, fmt.Errorf(`"ts" %q is outside the years 0000–9999 in UTC`, ts)
	}
	rec.Time, rec.Event = t, event
	return rec, nil
}

// EventQuery filters ReadEvents. Zero fields match everything.
type EventQuery struct {
	// WorkItem matches the work_item field (or membership in work_items):
	// a ref ("github:o/r#109") matches itself and the bare id issue-109; a
	// bare id ("issue-109", "109" or "#109") matches any ref numbered 109.
	WorkItem string
	// Event matches the event name exactly, or as a prefix when it ends in
	// "." or "*" ("graph." and "graph.*" match graph.advanced).
	Event string
	// Source matches the envelope's source exactly.
	Source string
	// Since keeps events at or after this instant.
	Since time.Time
	// Until keeps events before this instant (zero: no bound).
	Until time.Time
	// Limit keeps only the last Limit matching events (0: all).
	Limit int
}

// Match reports whether rec passes q.
func (q EventQuery) Match(rec EventRecord) bool {
	if q.Event != "" {
		if p, ok := strings.CutSuffix(q.Event, "*"); ok {
			if !strings.HasPrefix(rec.Event, p) {
				return false
			}
		} else if strings.HasSuffix(q.Event, ".") {
			if !strings.HasPrefix(rec.Event, q.Event) {
				return false
			}
		} else if rec.Event != q.Event {
			return false
		}
	}
	if q.Source != "" && rec.Source != q.Source {
		return false
	}
	if !q.Since.IsZero() && rec.Time.Before(q.Since) {
		return false
	}
	if !q.Until.IsZero() && !rec.Time.Before(q.Until) {
		return false
	}
	if q.WorkItem != "" {
		var items []string
		if v, ok := rec.Get("work_item"); ok {
			if s, ok := v.(string); ok {
				items = append(items, s)
			}
		}
		if v, ok := rec.Get("work_items"); ok {
			if list, ok := v.([]any); ok {
				for _, e := range list {
					if s, ok := e.(string); ok {
						items = append(items, s)
					}
				}
			}
		}
		for _, it := range items {
			if workItemMatches(q.WorkItem, it) {
				return true
			}
		}
		return false
	}
	return true
}

// workItemMatches compares a queried work item with a logged one: equal
// strings match; otherwise, when at least one side is a bare id (not a
// ref), they match on the issue number.
func workItemMatches(q, v string) bool {
	q, v = strings.TrimSpace(q), strings.TrimSpace(v)
	if q == v {
		return true
	}
	qRef, vRef := strings.Contains(q, ":"), strings.Contains(v, ":")
	if qRef && vRef {
		return false
	}
	nq, nv := itemNumber(q), itemNumber(v)
	return nq != "" && nq == nv
}

// itemNumber extracts the number of "issue-<n>", "<n>", "#<n>" or a ref
// "...#<n>"; "" when there is none.
func itemNumber(s string) string {
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		s = s[i+1:]
	} else {
		s = strings.TrimPrefix(s, "issue-")
	}
	if s == "" {
		return ""
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return ""
		}
	}
	return strings.TrimLeft(s, "0")
}

// EventStats counts what a scan saw.
type EventStats struct {
	Files     int // files read (rotated ones included)
	Lines     int // non-blank lines
	Malformed int // lines skipped because ParseEventLine refused them (of those the query's event name and item number could match)
	Matched   int // lines that passed the query
}

// ScanEvents calls fn for every event of the log at path that matches q,
// oldest first: the rotated files (path.N down to path.1), then path.
// Malformed lines are skipped and counted; a missing log has no events.
// q.Limit is ignored (see ReadEvents). A rotation by a writer during the
// scan may make it see some lines twice or miss some. fn's error stops the
// scan and is returned.
func ScanEvents(path string, q EventQuery, fn func(EventRecord) error) (EventStats, error) {
	return scanEvents(path, q, os.Open, fn)
}

func scanEvents(path string, q EventQuery, open func(string) (*os.File, error), fn func(EventRecord) error) (EventStats, error) {
	var stats EventStats
	files, err := eventLogFiles(path)
	if err != nil {
		return stats, err
	}
	for _, name := range files {
		// Non-blocking and regular files only: a named pipe planted as
		// events.jsonl would hang `loopctl events` and the dashboard.
		f, err := openRegular(name, os.O_RDONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue // rotated away since it was listed
		}
		if err != nil {
			return stats, fmt.Errorf("reading the event log: %w", err)
		}
		if st, serr := f.Stat(); serr == nil && st.Size() > MaxEventLogFileBytes {
			f.Close()
			return stats, fmt.Errorf("reading the event log: %s is %d bytes, more than the %d bytes one event log file may have (the writer rotates at %d): %w; move it aside (or remove it) and let the log start anew",
				name, st.Size(), int64(MaxEventLogFileBytes), int64(DefaultEventLogMaxBytes), ErrEventLogTooLarge)
		}
		stats.Files++
		err = scanEventFile(f, q, &stats, fn)
		f.Close()
		if err != nil {
			return stats, err
		}
	}
	return stats, nil
}

// lineNeedles are byte strings every line q matches holds as written (an
// event name or a work item's number is plain ASCII, which JSON writes
// literally unless the line escapes it — such a line is always decoded):
// a line without one of them is counted without being decoded. Nil when q
// has no such part.
func (q EventQuery) lineNeedles() [][]byte {
	var out [][]byte
	literal := func(s string) bool {
		for _, c := range s {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == ':' || c == '/' || c == '#') {
				return false
			}
		}
		return s != ""
	}
	if ev := strings.TrimSuffix(q.Event, "*"); literal(ev) {
		out = append(out, []byte(ev))
	}
	if wi := strings.TrimSpace(q.WorkItem); wi != "" {
		if n := itemNumber(wi); n != "" {
			out = append(out, []byte(n))
		} else if literal(wi) {
			out = append(out, []byte(wi))
		}
	}
	return out
}

func scanEventFile(r io.Reader, q EventQuery, stats *EventStats, fn func(EventRecord) error) error {
	needles := q.lineNeedles()
	br := bufio.NewReaderSize(r, 64*1024)
	var long bool // inside a line longer than maxEventLine
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if !long {
				buf = append(buf, chunk...)
				if len(buf) > maxEventLine {
					long, buf = true, buf[:0]
				}
			}
			if chunk[len(chunk)-1] == '\n' {
				if long {
					stats.Lines++
					stats.Malformed++
					long = false
				} else if err := handleEventLine(buf, q, needles, stats, fn); err != nil {
					return err
				}
				buf = buf[:0]
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err == io.EOF {
			if long {
				stats.Lines++
				stats.Malformed++
			} else if len(buf) > 0 {
				return handleEventLine(buf, q, needles, stats, fn)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the event log: %w", err)
		}
	}
}

func handleEventLine(line []byte, q EventQuery, needles [][]byte, stats *EventStats, fn func(EventRecord) error) error {
	if len(bytes.TrimSpace(line)) == 0 {
		return nil
	}
	stats.Lines++
	// A line that escapes a character (\u0061, \/) may spell a needle
	// otherwise: it is decoded.
	if len(needles) > 0 && !bytes.Contains(line, []byte(`\u`)) && !bytes.Contains(line, []byte(`\/`)) {
		for _, n := range needles {
			if !bytes.Contains(line, n) {
				return nil // cannot match (a malformed line is not told apart here)
			}
		}
	}
	rec, err := ParseEventLine(bytes.Clone(line))
	if err != nil {
		stats.Malformed++
		return nil
	}
	if !q.Match(rec) {
		return nil
	}
	stats.Matched++
	return fn(rec)
}

// ReadEvents returns the events of the log at path that match q, oldest
// first, reading rotated files too; q.Limit keeps the last ones. Malformed
// lines are skipped (ScanEvents counts them).
func ReadEvents(path string, q EventQuery) ([]EventRecord, error) {
	var out []EventRecord
	_, err := ScanEvents(path, q, func(rec EventRecord) error {
		out = append(out, rec)
		if q.Limit > 0 && len(out) > 2*q.Limit {
			out = append(out[:0], out[len(out)-q.Limit:]...)
		}
		return nil
	})
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[len(out)-q.Limit:]
	}
	return out, err
}

// eventLogFiles lists path's rotated files, oldest (highest number) first,
// then path itself.
func eventLogFiles(path string) ([]string, error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the event log directory: %w", err)
	}
	type rotated struct {
		n    int
		name string
	}
	var rot []rotated
	for _, e := range entries {
		suffix, ok := strings.CutPrefix(e.Name(), base+".")
		if !ok || e.IsDir() {
			continue
		}
		n, err := strconv.Atoi(suffix)
		if err != nil || n <= 0 || strconv.Itoa(n) != suffix {
			continue
		}
		rot = append(rot, rotated{n, filepath.Join(dir, e.Name())})
	}
	sort.Slice(rot, func(i, j int) bool { return rot[i].n > rot[j].n })
	files := make([]string, 0, len(rot)+1)
	for _, r := range rot {
		files = append(files, r.name)
	}
	return append(files, path), nil
}

// ParseSince reads "90m", "3d", "2026-11-01" or an RFC 3339 time (`loopctl events --since`, the API's and MCP's since).
func ParseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := time.ParseDuration(d + "h"); err == nil {
			return now.Add(-24 * n), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("since %q: write a duration (90m, 2h, 3d) or a date (2026-11-01) or an RFC 3339 time", s)
}

// DaemonEventLog is where loopd keeps its one event log, relative to its
// state root: <state root>/logs/events.jsonl.
const DaemonEventLog = "logs/events.jsonl"

// DaemonEventLogPath is loopd's event log under stateRoot (an absolute
// path), or eventLog.path when the operator named one: an absolute path as
// it is, a relative one under the state root. It never depends on the
// working directory, so loopd started in a checkout writes nothing there,
// and `loopctl events` finds the same file from the same state root.
func DaemonEventLogPath(stateRoot string, cfg CLIConfig) string {
	p := DaemonEventLog
	if cfg.EventLogPathSet && cfg.EventLogPath != "" {
		p = cfg.EventLogPath
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(stateRoot, filepath.FromSlash(p))
}

// CheckoutEventLogPath is the event log a repository-side loopctl writes in
// the checkout at root when the CLI config names no other (the default
// eventLog.path, taken in the repository): in a loopd session, where the
// agent's claims are logged.
func CheckoutEventLogPath(root string) string {
	return filepath.Join(root, DefaultStateRoot, filepath.FromSlash(DaemonEventLog))
}
