// Package outbox is the part of loopd that performs the ticket effects an
// agent's session asked for (docs/decisions.md §18). A session loopd
// spawned holds no credential: its claims record intents in
// <state root>/outbox/<session id>/intents.jsonl (package loop: the file
// format, the allowlist, the writer). The Performer watches those files,
// checks every intent again — allowlisted operation, exactly its
// parameters, and a work item the session serves — and performs it with
// loopd's integrations, in order per session.
//
// Guarantees:
//   - One effect per intent. A durable done record per intent,
//     <state root>/outbox-done/<session id>.jsonl (outside the session's
//     reach), is written before the event that reports it; a comment carries
//     a hidden marker with the intent's id, and an intent that may already
//     have been posted (a retry, or a restart after "started") is looked
//     for on the ticket before it is posted again. Labels are idempotent.
//   - Order. A session's intents are performed in the file's order; a
//     failure that a retry can fix holds the later ones back, retried with
//     exponential back-off (capped). A permanent failure (GitHub refuses the
//     request) is recorded and passed.
//   - Refusal. An intent that is not allowlisted, is malformed, or names a
//     work item the session does not serve is never performed: it is
//     recorded done and logged as outbox.refused (with the reason, never the
//     line's text).
//   - Visibility: outbox.performed, outbox.failed and outbox.refused in the
//     event log; Pending counts what waits per work item.
//   - Lifecycle: Start starts one goroutine; Close stops it and waits.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// Event names the performer emits.
const (
	EventPerformed = "outbox.performed"
	EventFailed    = "outbox.failed"
	EventRefused   = "outbox.refused"
)

// DoneDirName is the directory under the state root holding the done
// records, one file per session. It is not under the outbox: a session
// must not be able to forge or erase what loopd did.
const DoneDirName = "outbox-done"

// Defaults.
const (
	DefaultInterval    = 100 * time.Millisecond
	DefaultMaxBackoff  = 30 * time.Second
	DefaultCallTimeout = 30 * time.Second
	firstBackoff       = 200 * time.Millisecond
)

// IntentMarkerPrefix starts the hidden line a performed comment carries:
// "<!-- the-loop:intent <id> -->". It is how a replayed intent finds the
// comment it already posted.
const IntentMarkerPrefix = "<!-- the-loop:intent "

func intentMarker(id string) string { return IntentMarkerPrefix + id + " -->" }

// Sessions says which work items a session serves.
type Sessions interface {
	// WorkItems returns the refs the session's intents may land on: its
	// work item, its parent (a PR's session) and its linked pull requests.
	// An error refuses the intents being checked.
	WorkItems(sessionID string) ([]workitem.Ref, error)
}

// SessionsFunc adapts a function to Sessions.
type SessionsFunc func(sessionID string) ([]workitem.Ref, error)

// WorkItems implements Sessions.
func (f SessionsFunc) WorkItems(id string) ([]workitem.Ref, error) { return f(id) }

// Config tunes the Performer.
type Config struct {
	// StateRoot is loopd's state root (absolute). Required.
	StateRoot string
	// Interval is how often the outbox is looked at (default 100 ms).
	Interval time.Duration
	// MaxBackoff caps the wait between retries (default 30 s).
	MaxBackoff time.Duration
	// CallTimeout bounds one integration call (default 30 s).
	CallTimeout time.Duration
}

// Deps is the performer's world.
type Deps struct {
	// Integrations performs the effects with loopd's credentials. Required.
	Integrations graph.Integrations
	// Sessions maps a session to its work items. Required.
	Sessions Sessions
	// Sink receives the outbox.* events (nil: none).
	Sink graph.Sink
	// Clock stamps events and back-off (default the wall clock). Timers
	// still run on real time.
	Clock graph.Clock
}

// Performer performs sessions' intents. Build it with New.
type Performer struct {
	cfg  Config
	deps Deps

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu       sync.Mutex // guards sessions' pending counts
	sessions map[string]*session
	// passMu serialises passes (Poll from a test and the loop).
	passMu sync.Mutex
}

// session is what the performer knows of one session's outbox.
type session struct {
	id      string
	off     int64 // bytes of resolved lines
	nextNo  int   // number of the line at off
	loaded  bool
	done    map[int]string // line number → performed | refused | failed
	started map[int]bool
	attempt int
	retryAt time.Time
	pending map[string]int // work item → intents waiting
	fileErr string         // the intents file's last read error, said once
}

// New validates cfg and deps. It starts nothing: Start does.
func New(cfg Config, deps Deps) (*Performer, error) {
	if cfg.StateRoot == "" || !filepath.IsAbs(cfg.StateRoot) {
		return nil, fmt.Errorf("outbox: Config.StateRoot %q must be an absolute path", cfg.StateRoot)
	}
	if deps.Integrations == nil || deps.Sessions == nil {
		return nil, errors.New("outbox: Deps.Integrations and Deps.Sessions are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if deps.Clock == nil {
		deps.Clock = graph.SystemClock{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Performer{cfg: cfg, deps: deps, ctx: ctx, cancel: cancel, sessions: map[string]*session{}}, nil
}

// Start runs the watch loop until Close. Call it once.
func (p *Performer) Start() {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(p.cfg.Interval)
		defer t.Stop()
		for {
			p.Poll()
			select {
			case <-p.ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Close stops the loop, interrupting a call in flight (its intent is
// performed after the next start, at most once), and waits for it. It is
// idempotent.
func (p *Performer) Close() error {
	p.once.Do(p.cancel)
	p.wg.Wait()
	return nil
}

// Pending counts the intents waiting to be performed on a work item (ref
// string), as of the last pass.
func (p *Performer) Pending(ref string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.sessions {
		n += s.pending[ref]
	}
	return n
}

// Poll makes one pass over every session's outbox now.
func (p *Performer) Poll() {
	p.passMu.Lock()
	defer p.passMu.Unlock()
	entries, err := os.ReadDir(loop.OutboxRoot(p.cfg.StateRoot))
	if err != nil {
		return
	}
	for _, e := range entries {
		if p.ctx.Err() != nil {
			return
		}
		// A session id names the directory; anything else there is not
		// ours to read (the sessions cannot write the outbox root itself).
		if !e.IsDir() || !loop.ValidOutboxSessionID(e.Name()) {
			continue
		}
		p.pass(e.Name())
	}
}

func (p *Performer) session(id string) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.sessions[id]
	if s == nil {
		s = &session{id: id, nextNo: 1, done: map[int]string{}, started: map[int]bool{}}
		p.sessions[id] = s
	}
	return s
}

func (p *Performer) setPending(s *session, pending map[string]int) {
	p.mu.Lock()
	s.pending = pending
	p.mu.Unlock()
}

// pass performs what is new or due in one session's outbox.
func (p *Performer) pass(id string) {
	s := p.session(id)
	if !s.loaded {
		if err := p.loadDone(s); err != nil {
			p.emit(EventFailed, graph.LevelError, s.id, nil, graph.Field{Key: "error", Value: "reading the done record: " + err.Error()})
			return
		}
		s.loaded = true
	}
	now := p.deps.Clock.Now()
	if now.Before(s.retryAt) {
		return
	}
	path := filepath.Join(loop.OutboxDir(p.cfg.StateRoot, id), loop.OutboxFileName)
	fi, err := os.Lstat(path)
	if err != nil {
		return
	}
	if fi.Size() < s.off {
		// Truncated by the session: read again from the top; the done
		// record keeps every performed line from happening twice.
		s.off, s.nextNo = 0, 1
	}
	if fi.Size() == s.off {
		return
	}
	lines, _, err := loop.ReadOutboxLines(path, s.off, s.nextNo)
	if err != nil {
		// Said once per distinct problem, looked at again after a while.
		if msg := err.Error(); msg != s.fileErr {
			s.fileErr = msg
			p.emit(EventRefused, graph.LevelWarning, s.id, nil, graph.Field{Key: "reason", Value: "the intents file is not readable as a plain file: " + msg})
		}
		s.retryAt = now.Add(p.cfg.MaxBackoff)
		return
	}
	s.fileErr = ""
	var refs []workitem.Ref
	var refsErr error
	looked := false
	for i, l := range lines {
		if p.ctx.Err() != nil {
			return
		}
		if _, ok := s.done[l.No]; !ok {
			if !looked {
				refs, refsErr = p.deps.Sessions.WorkItems(s.id)
				looked = true
			}
			if !p.handle(s, l, refs, refsErr) {
				p.setPending(s, p.countPending(s, lines[i:]))
				return
			}
		}
		s.off, s.nextNo = l.End, l.No+1
	}
	s.attempt, s.retryAt = 0, time.Time{}
	p.setPending(s, nil)
}

// countPending counts the valid intents among lines not yet done.
func (p *Performer) countPending(s *session, lines []loop.OutboxLine) map[string]int {
	out := map[string]int{}
	for _, l := range lines {
		if _, ok := s.done[l.No]; ok || l.TooLong {
			continue
		}
		if in, err := loop.ParseIntent(l.Data); err == nil {
			out[in.WorkItem]++
		}
	}
	return out
}

// handle resolves one line: refused, performed, failed for good (true), or
// failed for now (false: retry later, hold the later lines back).
func (p *Performer) handle(s *session, l loop.OutboxLine, refs []workitem.Ref, refsErr error) bool {
	lineField := graph.Field{Key: "line", Value: l.No}
	refuse := func(in *loop.Intent, reason string) bool {
		if err := p.record(s, l.No, "refused", ""); err != nil {
			p.emit(EventFailed, graph.LevelError, s.id, in, lineField, graph.Field{Key: "error", Value: "recording the refusal: " + err.Error()})
			return false
		}
		p.emit(EventRefused, graph.LevelWarning, s.id, in, lineField, graph.Field{Key: "reason", Value: reason})
		return true
	}
	if l.TooLong {
		return refuse(nil, fmt.Sprintf("line over %d bytes", loop.MaxIntentBytes))
	}
	in, err := loop.ParseIntent(l.Data)
	if err != nil {
		return refuse(nil, err.Error())
	}
	if in.Session != s.id || in.ID != s.id+"-"+strconv.Itoa(l.No) {
		return refuse(&in, fmt.Sprintf("intent %q on line %d of session %s's outbox: an intent's id is <session>-<line>", clip(in.ID), l.No, s.id))
	}
	if refsErr != nil {
		return refuse(&in, "the session is not one loopd knows: "+refsErr.Error())
	}
	ours := false
	names := make([]string, 0, len(refs))
	for _, r := range refs {
		ours = ours || r.String() == in.WorkItem
		names = append(names, r.String())
	}
	if !ours {
		return refuse(&in, fmt.Sprintf("work item %s is not the session's (%s)", in.WorkItem, strings.Join(names, ", ")))
	}
	return p.perform(s, l.No, in)
}

// perform makes the intent's one effect.
func (p *Performer) perform(s *session, no int, in loop.Intent) bool {
	args := in.Args()
	if in.Op == ops.GitHubAddComment {
		args["body"] = strings.TrimRight(args["body"].(string), "\n") + "\n" + intentMarker(in.ID) + "\n"
		if s.started[no] || s.attempt > 0 {
			// GitHub may have posted it before the answer was lost.
			if url, found, err := p.alreadyPosted(in); err != nil {
				return p.failed(s, in, err)
			} else if found {
				return p.performed(s, no, in, url, true)
			}
		}
	}
	if !s.started[no] {
		if err := p.record(s, no, "started", ""); err != nil {
			return p.failed(s, in, fmt.Errorf("recording the start: %w", err))
		}
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.CallTimeout)
	res, err := p.deps.Integrations.Call(ctx, in.Op, args)
	cancel()
	if err != nil {
		if permanent(err) && p.ctx.Err() == nil {
			if rerr := p.record(s, no, "failed", ""); rerr != nil {
				return p.failed(s, in, rerr)
			}
			p.emit(EventFailed, graph.LevelError, s.id, &in, graph.Field{Key: "error", Value: err.Error()}, graph.Field{Key: "final", Value: true})
			s.attempt = 0
			return true
		}
		return p.failed(s, in, err)
	}
	url, _ := res["url"].(string)
	return p.performed(s, no, in, url, false)
}

func (p *Performer) performed(s *session, no int, in loop.Intent, url string, found bool) bool {
	if err := p.record(s, no, "performed", url); err != nil {
		// The effect happened; a retry finds the comment or re-applies the
		// label, so this is safe to fail.
		return p.failed(s, in, fmt.Errorf("recording it done: %w", err))
	}
	fields := []graph.Field{{Key: "latency_ms", Value: p.deps.Clock.Now().Sub(in.Created).Milliseconds()}, {Key: "attempts", Value: s.attempt + 1}}
	if url != "" {
		fields = append(fields, graph.Field{Key: "url", Value: url})
	}
	if found {
		fields = append(fields, graph.Field{Key: "already_on_ticket", Value: true})
	}
	p.emit(EventPerformed, graph.LevelInfo, s.id, &in, fields...)
	s.attempt = 0
	return true
}

// failed schedules a retry with back-off.
func (p *Performer) failed(s *session, in loop.Intent, err error) bool {
	if p.ctx.Err() != nil {
		return false // stopping: not a failure of the intent
	}
	s.attempt++
	wait := firstBackoff << min(s.attempt-1, 20)
	if wait > p.cfg.MaxBackoff || wait <= 0 {
		wait = p.cfg.MaxBackoff
	}
	s.retryAt = p.deps.Clock.Now().Add(wait)
	p.emit(EventFailed, graph.LevelWarning, s.id, &in, graph.Field{Key: "error", Value: err.Error()},
		graph.Field{Key: "attempt", Value: s.attempt}, graph.Field{Key: "retry_in_ms", Value: wait.Milliseconds()})
	return false
}

// alreadyPosted looks for the intent's marker among the ticket's comments.
func (p *Performer) alreadyPosted(in loop.Intent) (string, bool, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.CallTimeout)
	defer cancel()
	res, err := p.deps.Integrations.Call(ctx, ops.GitHubListComments, map[string]any{"ref": in.WorkItem})
	if err != nil {
		return "", false, fmt.Errorf("looking for a comment posted before: %w", err)
	}
	marker := intentMarker(in.ID)
	list, _ := res["comments"].([]any)
	for _, c := range list {
		m, _ := c.(map[string]any)
		if body, _ := m["body"].(string); strings.Contains(body, marker) {
			url, _ := m["url"].(string)
			return url, true, nil
		}
	}
	return "", false, nil
}

// permanent: GitHub refused the request itself; trying again cannot help.
func permanent(err error) bool {
	for _, e := range []error{integrations.ErrInvalidArgument, integrations.ErrInvalidRef, integrations.ErrNotFound,
		integrations.ErrRejected, graph.ErrUnsupportedOperation} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// doneRecord is one line of a session's done file.
type doneRecord struct {
	Line  int       `json:"line"`
	State string    `json:"state"` // started | performed | refused | failed
	At    time.Time `json:"at"`
	URL   string    `json:"url,omitempty"`
}

func (p *Performer) donePath(id string) string {
	return filepath.Join(p.cfg.StateRoot, DoneDirName, id+".jsonl")
}

func (p *Performer) loadDone(s *session) error {
	data, err := os.ReadFile(p.donePath(s.id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(data), "\n") {
		var r doneRecord
		if line == "" || json.Unmarshal([]byte(line), &r) != nil {
			continue // a torn last line from a crash: that state was not reached
		}
		if r.State == "started" {
			s.started[r.Line] = true
		} else {
			s.done[r.Line] = r.State
		}
	}
	return nil
}

// record appends a state to the session's done file and fsyncs it.
func (p *Performer) record(s *session, no int, state, url string) error {
	path := p.donePath(s.id)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	line, _ := json.Marshal(doneRecord{Line: no, State: state, At: p.deps.Clock.Now().UTC(), URL: url})
	_, err = f.Write(append(line, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if state == "started" {
		s.started[no] = true
	} else {
		s.done[no] = state
	}
	return nil
}

func (p *Performer) emit(name string, level graph.Level, sid string, in *loop.Intent, extra ...graph.Field) {
	if p.deps.Sink == nil {
		return
	}
	fields := []graph.Field{{Key: "session_id", Value: sid}}
	if in != nil {
		fields = append(fields, graph.Field{Key: "intent", Value: in.ID}, graph.Field{Key: "work_item", Value: in.WorkItem},
			graph.Field{Key: "op", Value: string(in.Op)}, graph.Field{Key: "summary", Value: in.Summary()})
		if in.Source != "" {
			fields = append(fields, graph.Field{Key: "source", Value: in.Source})
		}
	}
	fields = append(fields, extra...)
	p.deps.Sink.Emit(graph.LogEvent{Time: p.deps.Clock.Now(), Name: name, Level: level, Fields: fields})
}

// clip shortens agent-written text for a reason, on a rune boundary.
func clip(s string) string {
	n := 80
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
