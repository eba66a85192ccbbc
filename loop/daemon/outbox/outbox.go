// Package outbox is the part of loopd that answers what an agent's
// session asks of the ticket (docs/decisions.md §18, §23). A session loopd
// spawned holds no credential: its verbs record requests in
// <state root>/outbox/<session id>/intents.jsonl (package loop: the file
// format, the writer) — claims and questions, never a label or a comment of
// their own. The Performer watches those files, checks every line again
// (its shape, and a work item the session serves), and answers it in order
// per session:
//
//   - A claim is a request, not a fact. The Judge (loopd's graph link)
//     recomputes the work item from the checkout's artifacts under loopd's
//     own trust anchor and says which ticket effects that recompute gives —
//     the phase label of the recomputed current node, a review request when
//     it is a human gate just entered — and what it logs. A claim the
//     recompute does not bear out is refused (outbox.refused, with what was
//     asked and what the recompute says); the effects performed are the
//     recompute's, never the claim's.
//   - A question is posted under loopd's own heading, marked, as the
//     agent's words.
//   - A line of the retired format (a label or comment the session named
//     itself) is refused as written; loopd derives what its recompute gives
//     instead.
//
// Guarantees:
//   - One effect per request. A durable done record per line,
//     <state root>/outbox-done/<session id>.jsonl (outside the session's
//     reach), is written before the event that reports it; a comment carries
//     a hidden marker with the line's id, and a comment that may already
//     have been posted (a retry, or a restart after "started") is looked
//     for on the ticket before it is posted again. Labels are idempotent.
//   - Order. A session's lines are answered in the file's order; a failure
//     that a retry can fix holds the later ones back, retried with
//     exponential back-off (capped). A permanent failure (GitHub refuses the
//     request) is recorded and passed.
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
	"maps"
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

// Judge is loopd's answer to a claim: it recomputes the work item the
// intent names from the checkout's artifacts under loopd's own trust anchor
// and derives what follows. It is called for every claim and every retired
// line that is not a question, again on each retry of the line; an error
// is retried later (the line holds the session's later ones back).
type Judge interface {
	Judge(ctx context.Context, in loop.Intent) (Verdict, error)
}

// JudgeFunc adapts a function to Judge.
type JudgeFunc func(ctx context.Context, in loop.Intent) (Verdict, error)

// Judge implements Judge.
func (f JudgeFunc) Judge(ctx context.Context, in loop.Intent) (Verdict, error) { return f(ctx, in) }

// Verdict is what loopd's recompute says of a claim.
type Verdict struct {
	// Refused says why the request is not borne out by the recompute (""
	// when it is). A refused claim may still carry Effects: the recompute
	// it prompted may have found a transition of its own.
	Refused string
	// Fields say what was asked and what the recompute says (in the
	// outbox.* event).
	Fields []graph.Field
	// Effects are the ticket effects the recompute gives, performed in
	// order.
	Effects []Effect
	// Done, when set, is called once the line is answered (its effects
	// performed or failed for good, its state recorded): the judge then
	// keeps what it observed and logs the transitions.
	Done func()
}

// Effect is one ticket effect loopd performs with its own credentials.
type Effect struct {
	Op   graph.Operation
	Args map[string]any
	// Summary describes it for the event log (never a comment's text).
	Summary string
}

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
	// Judge recomputes what a claim asks. nil refuses every claim (fail
	// closed: nothing the session claims moves the ticket).
	Judge Judge
	// Sink receives the outbox.* events (nil: none).
	Sink graph.Sink
	// Clock stamps events and back-off (required). Timers
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
		return nil, errors.New("outbox: no clock (Deps.Clock)")
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
	var v Verdict
	switch {
	case in.Question() != "":
		v.Effects = []Effect{{Op: ops.GitHubAddComment, Args: map[string]any{"ref": in.WorkItem, "body": in.QuestionComment()}, Summary: "question"}}
	case p.deps.Judge == nil:
		return refuse(&in, "loopd has no recompute to judge the claim by")
	default:
		var err error
		if v, err = p.deps.Judge.Judge(p.ctx, in); err != nil {
			return p.failed(s, in, fmt.Errorf("recomputing the work item: %w", err))
		}
		if in.Legacy() {
			// The retired format named the effect itself: never performed
			// as written; the recompute's effects stand instead.
			v.Refused = fmt.Sprintf("%s is the retired outbox format: a session names no label or comment; loopd performs only what its own recompute gives", in.Op)
			if len(v.Effects) > 0 {
				v.Refused += " (" + summaries(v.Effects) + ")"
			}
		}
	}
	return p.perform(s, l.No, in, v)
}

func summaries(effects []Effect) string {
	out := make([]string, len(effects))
	for i, e := range effects {
		out[i] = e.Summary
	}
	return strings.Join(out, "; ")
}

// perform makes the verdict's effects, in order, and resolves the line.
func (p *Performer) perform(s *session, no int, in loop.Intent, v Verdict) bool {
	// A line started before this attempt (or before a restart) may have
	// posted its comments already.
	again := s.started[no] || s.attempt > 0
	if len(v.Effects) > 0 && !s.started[no] {
		if err := p.record(s, no, "started", ""); err != nil {
			return p.failed(s, in, fmt.Errorf("recording the start: %w", err))
		}
	}
	var urls []string
	final, found := false, false
	for k, e := range v.Effects {
		args := maps.Clone(e.Args)
		if e.Op == ops.GitHubAddComment {
			marker := intentMarker(in.ID)
			if k > 0 {
				marker = intentMarker(fmt.Sprintf("%s/%d", in.ID, k))
			}
			args["body"] = strings.TrimRight(args["body"].(string), "\n") + "\n" + marker + "\n"
			if again {
				// GitHub may have posted it before the answer was lost.
				if url, ok, err := p.alreadyPosted(in.WorkItem, marker); err != nil {
					return p.failed(s, in, err)
				} else if ok {
					urls, found = append(urls, url), true
					continue
				}
			}
		}
		ctx, cancel := context.WithTimeout(p.ctx, p.cfg.CallTimeout)
		res, err := p.deps.Integrations.Call(ctx, e.Op, args)
		cancel()
		if err != nil {
			if permanent(err) && p.ctx.Err() == nil {
				p.emit(EventFailed, graph.LevelError, s.id, &in, graph.Field{Key: "effect", Value: e.Summary}, graph.Field{Key: "error", Value: err.Error()}, graph.Field{Key: "final", Value: true})
				final = true
				continue
			}
			return p.failed(s, in, err)
		}
		if url, _ := res["url"].(string); url != "" {
			urls = append(urls, url)
		}
	}
	state := "performed"
	switch {
	case v.Refused != "":
		state = "refused"
	case final:
		state = "failed"
	}
	if err := p.record(s, no, state, strings.Join(urls, " ")); err != nil {
		// The effects happened; a retry finds the comment or re-applies the
		// label, so this is safe to fail.
		return p.failed(s, in, fmt.Errorf("recording it done: %w", err))
	}
	if v.Done != nil {
		v.Done()
	}
	fields := append([]graph.Field{{Key: "line", Value: no}}, v.Fields...)
	if len(v.Effects) > 0 {
		fields = append(fields, graph.Field{Key: "effects", Value: summaries(v.Effects)})
	}
	if v.Refused != "" {
		p.emit(EventRefused, graph.LevelWarning, s.id, &in, append(fields, graph.Field{Key: "reason", Value: v.Refused})...)
	} else {
		fields = append(fields, graph.Field{Key: "latency_ms", Value: p.deps.Clock.Now().Sub(in.Created).Milliseconds()}, graph.Field{Key: "attempts", Value: s.attempt + 1})
		if len(urls) > 0 {
			fields = append(fields, graph.Field{Key: "url", Value: strings.Join(urls, " ")})
		}
		if found {
			fields = append(fields, graph.Field{Key: "already_on_ticket", Value: true})
		}
		p.emit(EventPerformed, graph.LevelInfo, s.id, &in, fields...)
	}
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
func (p *Performer) alreadyPosted(ref, marker string) (string, bool, error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.CallTimeout)
	defer cancel()
	res, err := p.deps.Integrations.Call(ctx, ops.GitHubListComments, map[string]any{"ref": ref})
	if err != nil {
		return "", false, fmt.Errorf("looking for a comment posted before: %w", err)
	}
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
