package loop

// The outbox (docs/decisions.md §18, §23): in a session loopd spawned,
// the agent holds no credential, and nothing it writes is taken as fact.
// What its verbs ask of the ticket is recorded here as requests, one JSON
// line each, in a file only that session writes: a claim (its runtime
// moved, or failed to move, a node) or a question for the humans. loopd
// (loop/daemon/outbox) reads each as a request: it recomputes the work item
// from the checkout's artifacts under its own trust anchor and derives the
// ticket's effects — the phase label, a review request — from that
// recompute alone. The file names no label and carries no comment of its
// own.
//
// Layout: <state root>/outbox/<session id>/intents.jsonl — the only place
// under the state root a session may write. The file is append-only and
// fsync'd by the writer; a line is
//
//	{"id":"<session id>-<n>","session":"<session id>","workItem":"github:o/r#1",
//	 "op":"loop.claim","params":{"ref":"github:o/r#1","node":"design","status":"pass","to":"design-critic-review","outcome":"pass"},
//	 "created":"<RFC 3339>","source":"graph complete"}
//
// Everything in the file is agent-written: the reader bounds sizes and
// ParseIntent refuses anything but the known requests with exactly the
// parameters those take. Lines of the retired format (github.set-labels,
// github.add-comment) are still read, and never performed as written.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/internal/sessionid"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// Outbox layout and bounds.
const (
	// OutboxDirName is the outbox's directory under the state root.
	OutboxDirName = "outbox"
	// OutboxFileName is the intents file in a session's outbox directory.
	OutboxFileName = "intents.jsonl"
	// outboxLockName serialises writers of one session's file.
	outboxLockName = "intents.lock"
	// MaxIntentBytes bounds one line of the intents file.
	MaxIntentBytes = 1 << 20
	// MaxOutboxBytes bounds a session's intents file; a writer refuses to
	// grow it further and the reader reads no further.
	MaxOutboxBytes = 64 << 20
	// MaxIntentCommentRunes bounds a comment's body (GitHub's own limit).
	MaxIntentCommentRunes = 65536
	// maxIntentLabels bounds the labels of one set-labels intent.
	maxIntentLabels = 10
	// maxLabelBytes is GitHub's limit on a label's name.
	maxLabelBytes = 50
	// IntentLabelPrefix is the only label namespace an intent may touch.
	IntentLabelPrefix = hooks.DefaultPhaseLabelPrefix
)

// Environment a loopd-managed session carries (sessions' endpointEnv sets
// them when it spawns the harness).
const (
	SessionIDEnv = "THE_LOOP_SESSION_ID"
	WorkItemEnv  = "THE_LOOP_WORK_ITEM"
)

// Sentinel errors of the outbox.
var (
	// ErrIntentRefused: an intent is not one loopd performs (operation not
	// allowlisted, parameters of the wrong shape, a label outside loop:, an
	// unmarked comment, a malformed line). Wrapped with the reason.
	ErrIntentRefused = errors.New("intent refused")
	// ErrOutboxFull: the session's intents file reached MaxOutboxBytes.
	ErrOutboxFull = errors.New("outbox full")
)

// OutboxRoot is <stateRoot>/outbox, the directory loopd watches.
func OutboxRoot(stateRoot string) string { return filepath.Join(stateRoot, OutboxDirName) }

// OutboxDir is <stateRoot>/outbox/<sessionID>: the one directory under the
// state root a session may write (the sandbox grants it read-write and
// nothing else there).
func OutboxDir(stateRoot, sessionID string) string {
	return filepath.Join(OutboxRoot(stateRoot), sessionID)
}

// PrepareOutboxDir creates a session's outbox directory (0700) and returns
// it, so that a sandbox can grant it before the session starts. It refuses
// an invalid session id (which could name a path outside the outbox).
func PrepareOutboxDir(stateRoot, sessionID string) (string, error) {
	if !ValidOutboxSessionID(sessionID) {
		return "", fmt.Errorf("outbox: session id %q is not a valid session id", sessionID)
	}
	dir := OutboxDir(stateRoot, sessionID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("outbox: %w", err)
	}
	return dir, nil
}

// ValidOutboxSessionID is the rule sessions.ValidSessionID applies (one
// rule, internal/sessionid): a session id names a directory, so it must
// never carry a separator or start with a dot.
func ValidOutboxSessionID(id string) bool { return sessionid.Valid(id) }

// ManagedSession is a session loopd spawned, as its environment says.
type ManagedSession struct {
	SessionID string
	// WorkItem is THE_LOOP_WORK_ITEM (a spec id, or a ref).
	WorkItem  string
	StateRoot string
}

// Dir is the session's outbox directory.
func (m ManagedSession) Dir() string { return OutboxDir(m.StateRoot, m.SessionID) }

// ManagedSessionFromEnv reports whether the process runs in a session loopd
// manages: THE_LOOP_SESSION_ID and THE_LOOP_WORK_ITEM set. Such a session
// must also carry an absolute THE_LOOP_STATE_ROOT and a valid session id;
// when it does not, the error says so (fail closed: the ticket's effects
// are never silently dropped, nor performed with whatever credential the
// process happens to hold). Outside loopd (neither set) it returns false
// and no error: a developer's own `loopctl` keeps their own credentials.
func ManagedSessionFromEnv(getenv func(string) string) (*ManagedSession, error) {
	sid, item := getenv(SessionIDEnv), getenv(WorkItemEnv)
	if sid == "" || item == "" {
		return nil, nil
	}
	root := getenv(StateRootEnv)
	switch {
	case root == "":
		return nil, fmt.Errorf("this is a loopd-managed session (%s and %s are set) but %s is not: loopd sets all three; the ticket's effects go through <state root>/%s/<session id>/", SessionIDEnv, WorkItemEnv, StateRootEnv, OutboxDirName)
	case !filepath.IsAbs(root):
		return nil, fmt.Errorf("%s=%q is not an absolute path", StateRootEnv, root)
	case !ValidOutboxSessionID(sid):
		return nil, fmt.Errorf("%s=%q is not a valid session id", SessionIDEnv, sid)
	}
	return &ManagedSession{SessionID: sid, WorkItem: item, StateRoot: filepath.Clean(root)}, nil
}

// Intent is one request a session makes of loopd: a claim (the agent's
// runtime moved, or failed to move, a node) or a question for the ticket.
// It is a request, never a fact (docs/decisions.md §23): loopd recomputes
// the work item from its artifacts under its own trust anchor and derives
// every ticket effect itself; an intent names no label and carries no
// comment of its own.
type Intent struct {
	// ID is "<session id>-<n>", n the line's number in the file: unique
	// and stable, the key of loopd's done record.
	ID      string `json:"id"`
	Session string `json:"session"`
	// WorkItem is the ref the request is about (github:[host/]owner/repo#n).
	WorkItem string `json:"workItem"`
	// Op is the kind of request (IntentClaim, IntentAsk; the retired
	// github.set-labels and github.add-comment are still read, see Legacy).
	Op graph.Operation `json:"op"`
	// Params are the request's arguments (ClaimParams, AskParams).
	Params map[string]any `json:"params"`
	// Created is when the intent was recorded.
	Created time.Time `json:"created"`
	// Source is the verb that recorded it (graph complete, ask, ...).
	Source string `json:"source,omitempty"`
}

// The requests an intent may make.
const (
	// IntentClaim: the agent's runtime reports a transition of a node
	// (params: ref, node, status, and to, outcome, hook where they apply).
	// loopd decides what, if anything, follows on the ticket.
	IntentClaim graph.Operation = "loop.claim"
	// IntentAsk: a question for the humans on the ticket (params: ref,
	// question). loopd posts it under its own heading, marked, as the
	// agent's question — never as a statement of loopd's.
	IntentAsk graph.Operation = "loop.ask"
)

// IntentOps are the requests a session writes.
var IntentOps = []graph.Operation{IntentClaim, IntentAsk}

// legacyOps are the intents of the format before decision 23: ticket
// effects named by the session itself. They are still parsed, so that a
// queue written by an older loopctl drains safely, and are never
// performed as written (see Intent.Legacy).
var legacyOps = []graph.Operation{ops.GitHubSetLabels, ops.GitHubAddComment}

// Claim statuses: what the agent's runtime says happened to the node.
const (
	ClaimPassed    = "pass"      // the node's exit chain passed; the pointer took an edge
	ClaimBlocked   = "block"     // the exit chain blocked
	ClaimEscalated = "escalated" // blocked the same way twice, or out of attempts
	ClaimCompleted = "complete"  // the terminal node passed: the walk is done
)

var claimStatuses = []string{ClaimPassed, ClaimBlocked, ClaimEscalated, ClaimCompleted}

// Claim is an IntentClaim's parameters, as loopd reads them. Every field
// is the agent's word.
type Claim struct {
	// Node is the node the claim is about.
	Node string
	// Status is one of the Claim* statuses.
	Status string
	// To is the node the agent's runtime says it moved to ("" when none).
	To string
	// Outcome is the outcome the agent's runtime says the node had.
	Outcome string
	// Hook is the hook the agent's runtime says blocked.
	Hook string
}

// Claim returns an IntentClaim's parameters (call only on an intent that
// ParseIntent or CheckIntent accepted).
func (in Intent) Claim() Claim {
	s := func(k string) string { v, _ := in.Params[k].(string); return v }
	return Claim{Node: s("node"), Status: s("status"), To: s("to"), Outcome: s("outcome"), Hook: s("hook")}
}

// Question returns an IntentAsk's question, or a legacy question comment's
// text without the self-authored marker ("" for any other intent).
func (in Intent) Question() string {
	switch {
	case in.Op == IntentAsk:
		q, _ := in.Params["question"].(string)
		return q
	case in.Op == ops.GitHubAddComment && in.legacyQuestion():
		b, _ := in.Params["body"].(string)
		return strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(b, hooks.Marker, ""), hooks.Attribution, ""))
	}
	return ""
}

// QuestionComment is the comment loopd posts for a question: under its own
// heading, naming it the agent's, quoted, and marked (ingress drops marked
// comments, so no question can decide a gate).
func (in Intent) QuestionComment() string {
	q := strings.TrimSpace(in.Question())
	var b strings.Builder
	fmt.Fprintf(&b, "🤖 _the-loop_ — **a question from the agent** working on this ticket (session `%s`). These are the agent's words, not the-loop's; an authorized reply on this ticket reaches it.\n\n", in.Session)
	for _, line := range strings.Split(q, "\n") {
		b.WriteString("> " + line + "\n")
	}
	return hooks.Mark(b.String())
}

// Legacy reports whether the intent is of the retired format, whose ticket
// effect the session named itself. loopd never performs one as written: a
// label or a claim's comment is refused (and loopd derives what its own
// recompute gives instead); a comment `loopctl ask` or the MCP ask tool
// wrote is posted as a question, like an IntentAsk.
func (in Intent) Legacy() bool { return slices.Contains(legacyOps, in.Op) }

// legacyQuestion: a retired add-comment written by the ask verbs.
func (in Intent) legacyQuestion() bool {
	return in.Op == ops.GitHubAddComment && (in.Source == "ask" || in.Source == "mcp")
}

// Summary is a short description of the request for a claim's reply and
// the event log (never a question's text).
func (in Intent) Summary() string {
	switch in.Op {
	case IntentClaim:
		c := in.Claim()
		s := "claim " + c.Node + " " + c.Status
		if c.To != "" {
			s += " → " + c.To
		}
		return s
	case IntentAsk:
		return "question"
	case ops.GitHubSetLabels:
		return "retired label request " + strings.Join(asStrings(in.Params["labels"]), ", ")
	case ops.GitHubAddComment:
		if in.legacyQuestion() {
			return "question"
		}
		return "retired comment request"
	}
	return string(in.Op)
}

func asStrings(v any) []string {
	var out []string
	switch t := v.(type) {
	case []any:
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	case []string:
		out = append(out, t...)
	}
	return out
}

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrIntentRefused, fmt.Sprintf(format, args...))
}

// ParseIntent parses and checks one line of an intents file. The line is
// agent-written: it is bounded, decoded strictly (unknown fields refused)
// and checked by CheckIntent. Errors wrap ErrIntentRefused and never quote
// the line. An intent it accepts is still only a request.
func ParseIntent(line []byte) (Intent, error) {
	if len(line) > MaxIntentBytes {
		return Intent{}, refuse("line of %d bytes is over %d", len(line), MaxIntentBytes)
	}
	line = bytes.TrimRight(line, "\r\n")
	if !utf8.Valid(line) {
		return Intent{}, refuse("line is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var in Intent
	if err := dec.Decode(&in); err != nil {
		return Intent{}, refuse("not an intent: %s", clipErr(err))
	}
	if dec.More() {
		return Intent{}, refuse("more than one JSON value on the line")
	}
	return in, CheckIntent(in)
}

func clipErr(err error) string { return clip(err.Error(), 120) }

// clip shortens s to at most n bytes on a rune boundary, for an error
// message about agent-written text.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// CheckIntent checks an intent's shape: a GitHub work item ref, an id of
// the session, a known request whose parameters are exactly those it
// takes, each bounded (node ids, statuses and outcomes are short tokens; a
// question is text of at most MaxIntentCommentRunes). Retired intents are
// checked in their old shape (labels only in loop:, comments only marked)
// so that they can be read and refused safely. It does not know which
// work item the session serves, nor whether the request is true: loopd
// checks both.
func CheckIntent(in Intent) error {
	if !ValidOutboxSessionID(in.Session) {
		return refuse("session %q is not a valid session id", clip(in.Session, 80))
	}
	n, ok := strings.CutPrefix(in.ID, in.Session+"-")
	if !ok || n == "" || len(n) > 12 || strings.TrimLeft(n, "0123456789") != "" {
		return refuse("id %q is not %s-<n>", clip(in.ID, 80), in.Session)
	}
	ref, err := workitem.Parse(in.WorkItem)
	if err != nil || ref.Provider != "github" || ref.String() != in.WorkItem {
		return refuse("workItem %q is not a GitHub work item ref github:[host/]owner/repo#N", clip(in.WorkItem, 80))
	}
	if in.Created.IsZero() {
		return refuse("no created time")
	}
	if r, ok := in.Params["ref"].(string); !ok || r != in.WorkItem {
		return refuse("params.ref must be the intent's workItem")
	}
	switch in.Op {
	case IntentClaim:
		if err := onlyKeys(in.Params, "ref", "node", "status", "to", "outcome", "hook"); err != nil {
			return err
		}
		for _, k := range []string{"node", "status"} {
			if v, ok := in.Params[k].(string); !ok || !validToken(v) {
				return refuse("a claim needs %s, a token of at most %d bytes ([a-z0-9._-])", k, maxTokenBytes)
			}
		}
		if !slices.Contains(claimStatuses, in.Params["status"].(string)) {
			return refuse("status %q is not one of %s", clip(in.Params["status"].(string), 40), strings.Join(claimStatuses, ", "))
		}
		for _, k := range []string{"to", "outcome", "hook"} {
			if v, present := in.Params[k]; present {
				if s, ok := v.(string); !ok || !validToken(s) {
					return refuse("%s must be a token of at most %d bytes ([a-z0-9._-])", k, maxTokenBytes)
				}
			}
		}
	case IntentAsk:
		if err := onlyKeys(in.Params, "ref", "question"); err != nil {
			return err
		}
		q, ok := in.Params["question"].(string)
		switch {
		case !ok || strings.TrimSpace(q) == "":
			return refuse("a question needs non-empty text")
		case utf8.RuneCountInString(q) > MaxIntentCommentRunes:
			return refuse("question over %d characters", MaxIntentCommentRunes)
		}
	case ops.GitHubAddComment:
		if err := onlyKeys(in.Params, "ref", "body"); err != nil {
			return err
		}
		body, ok := in.Params["body"].(string)
		switch {
		case !ok || strings.TrimSpace(body) == "":
			return refuse("a comment needs a non-empty body")
		case utf8.RuneCountInString(body) > MaxIntentCommentRunes:
			return refuse("comment body over %d characters", MaxIntentCommentRunes)
		case !hooks.SelfAuthored(body):
			return refuse("comment body lacks the self-authored marker (hooks.Mark)")
		}
	case ops.GitHubSetLabels:
		if err := onlyKeys(in.Params, "ref", "labels", "replacePrefix"); err != nil {
			return err
		}
		if p, present := in.Params["replacePrefix"]; present {
			if s, ok := p.(string); !ok || !strings.EqualFold(s, IntentLabelPrefix) {
				return refuse("replacePrefix may only be %q", IntentLabelPrefix)
			}
		}
		raw, ok := in.Params["labels"].([]any)
		if !ok || len(raw) == 0 || len(raw) > maxIntentLabels {
			return refuse("labels must be a list of 1 to %d names", maxIntentLabels)
		}
		for _, x := range raw {
			l, ok := x.(string)
			if !ok || !validIntentLabel(l) {
				return refuse("label %q is not a %s label of at most %d bytes", clip(fmt.Sprint(x), 60), IntentLabelPrefix, maxLabelBytes)
			}
		}
	default:
		return refuse("operation %q is not a request an agent's session may make (allowed: %s, %s)", clip(string(in.Op), 60), IntentClaim, IntentAsk)
	}
	return nil
}

// maxTokenBytes bounds a node id, status, outcome or hook name in a claim.
const maxTokenBytes = 64

// validToken: the vocabulary of graph ids, outcomes and hook names.
func validToken(s string) bool {
	if s == "" || len(s) > maxTokenBytes {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

func validIntentLabel(l string) bool {
	if len(l) > maxLabelBytes || len(l) <= len(IntentLabelPrefix) || !strings.EqualFold(l[:len(IntentLabelPrefix)], IntentLabelPrefix) {
		return false
	}
	for _, r := range l {
		if unicode.IsControl(r) || r == ',' {
			return false
		}
	}
	return true
}

func onlyKeys(m map[string]any, keys ...string) error {
	for k := range m {
		if !slices.Contains(keys, k) {
			return refuse("parameter %q is not one this request takes (%s)", clip(k, 40), strings.Join(keys, ", "))
		}
	}
	return nil
}

// AppendIntent records in in dir's intents file: it assigns the next id
// under the file's lock, checks the intent, appends one line and fsyncs
// before returning it. in.Session and in.Created must be set.
func AppendIntent(dir string, in Intent) (Intent, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return in, fmt.Errorf("outbox %s: %w", dir, err)
	}
	unlock, err := lockWait(filepath.Join(dir, outboxLockName), 10*time.Second)
	if err != nil {
		return in, fmt.Errorf("outbox %s: lock: %w", dir, err)
	}
	defer unlock()
	path := filepath.Join(dir, OutboxFileName)
	f, err := openRegular(path, os.O_RDWR|os.O_CREATE|oNoFollow, 0o600)
	if err != nil {
		return in, fmt.Errorf("outbox %s: %w", path, err)
	}
	defer f.Close()
	// n is the line's number: count the lines so far (a torn last line,
	// from a writer that died mid-write, is closed first and counts).
	existing, err := io.ReadAll(io.LimitReader(f, MaxOutboxBytes+1))
	if err != nil {
		return in, fmt.Errorf("outbox %s: %w", path, err)
	}
	var prefix []byte
	if len(existing) > 0 && existing[len(existing)-1] != '\n' {
		prefix = []byte{'\n'}
	}
	in.ID = in.Session + "-" + strconv.Itoa(bytes.Count(existing, []byte{'\n'})+len(prefix)+1)
	if err := CheckIntent(in); err != nil {
		return in, err
	}
	if in.Legacy() {
		return in, refuse("%s is retired: a session names no ticket effect; it records a claim (%s) or a question (%s), and loopd derives the effects", in.Op, IntentClaim, IntentAsk)
	}
	line, err := json.Marshal(in)
	if err != nil {
		return in, err
	}
	if len(line)+1 > MaxIntentBytes {
		return in, refuse("the intent is %d bytes, over %d", len(line)+1, MaxIntentBytes)
	}
	if len(existing)+len(prefix)+len(line)+1 > MaxOutboxBytes {
		return in, fmt.Errorf("%w: %s is at %d bytes; loopd has not drained it — is loopd running?", ErrOutboxFull, path, len(existing))
	}
	// One write of the whole line (O_APPEND semantics through the offset
	// ReadAll left at the end, under the lock), then fsync: durable before
	// the claim reports the effect pending.
	if _, err := f.Write(append(append(prefix, line...), '\n')); err != nil {
		return in, fmt.Errorf("outbox %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return in, fmt.Errorf("outbox %s: fsync: %w", path, err)
	}
	return in, nil
}

// lockWait takes path's lock, waiting up to d.
func lockWait(path string, d time.Duration) (func(), error) {
	deadline := time.Now().Add(d)
	for {
		unlock, err := tryLock(path)
		if !errors.Is(err, errLockHeld) || time.Now().After(deadline) {
			return unlock, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// OutboxLine is one complete line of an intents file.
type OutboxLine struct {
	// No is the line's number (1-based).
	No int
	// End is the byte offset just after the line's newline: where the
	// next read starts once this line is resolved.
	End int64
	// Data is the line without its newline; nil when it was over
	// MaxIntentBytes (TooLong).
	Data    []byte
	TooLong bool
}

// ReadOutboxLines reads the complete lines of an intents file from byte
// offset off (the start of line number firstNo), at most MaxOutboxBytes
// into the file. It returns them and the offset after the last complete
// line: a trailing partial line is left for the next read. path must be a
// regular file with one link (a symbolic or hard link planted by the
// session is refused: the reader runs with loopd's rights).
func ReadOutboxLines(path string, off int64, firstNo int) ([]OutboxLine, int64, error) {
	f, err := openRegular(path, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return nil, off, err
	}
	defer f.Close()
	if err := singleLink(f); err != nil {
		return nil, off, err
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, off, err
	}
	r := bufio.NewReaderSize(io.LimitReader(f, MaxOutboxBytes-off), 64<<10)
	var out []OutboxLine
	no := firstNo
	var cur []byte
	var n int64 // bytes of the current line so far
	tooLong := false
	for {
		chunk, err := r.ReadSlice('\n')
		n += int64(len(chunk))
		if !tooLong {
			if len(cur)+len(chunk) > MaxIntentBytes+1 {
				tooLong, cur = true, nil
			} else {
				cur = append(cur, chunk...)
			}
		}
		switch {
		case err == nil:
			off += n
			l := OutboxLine{No: no, End: off, TooLong: tooLong}
			if !tooLong {
				l.Data = bytes.TrimSuffix(cur, []byte{'\n'})
			}
			out = append(out, l)
			no++
			cur, n, tooLong = nil, 0, false
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return out, off, nil
		default:
			return out, off, err
		}
	}
}

// Recorder is the graph.Integrations of a loopd-managed session, which
// holds no credential. It never makes a network call.
//
// A claim recorder (NewRecorder) answers the hooks' ticket effects (phase
// label, review request, escalation, audit comment) as pending and records
// none of them: loopd derives each effect from its own recompute
// (docs/decisions.md §23). It is also a graph.Sink: the runtime's
// transitions (graph.advanced, graph.blocked, graph.escalated,
// graph.completed, graph.no_edge) become IntentClaim lines — the request
// that makes loopd look. Repo.Runtime tees a runtime's events into it.
//
// A question recorder (NewAskRecorder) turns a marked comment into an
// IntentAsk: the question the agent asks the humans on the ticket.
//
// Every other operation (reads, Slack, Jira) is unsupported there: the
// hooks skip them, as when no integration is configured.
type Recorder struct {
	session   ManagedSession
	source    string
	clock     graph.Clock
	questions bool

	mu       sync.Mutex
	recorded []Intent
	err      error
}

// NewRecorder is the claim recorder of a managed session; source names
// the verb ("graph complete") in each intent.
func NewRecorder(s ManagedSession, source string, clock graph.Clock) *Recorder {
	if clock == nil {
		clock = graph.SystemClock{}
	}
	return &Recorder{session: s, source: source, clock: clock}
}

// NewAskRecorder is the question recorder of a managed session (loopctl
// ask, the MCP ask tool).
func NewAskRecorder(s ManagedSession, source string, clock graph.Clock) *Recorder {
	r := NewRecorder(s, source, clock)
	r.questions = true
	return r
}

// ticketOps are the operations a hook or verb may ask of the Recorder.
var ticketOps = []graph.Operation{ops.GitHubAddComment, ops.GitHubSetLabels}

// Call implements graph.Integrations.
func (r *Recorder) Call(_ context.Context, op graph.Operation, args map[string]any) (map[string]any, error) {
	if !slices.Contains(ticketOps, op) || r.questions && op != ops.GitHubAddComment {
		return nil, fmt.Errorf("%s is not available in a loopd-managed session, which holds no credential: loopd performs the ticket's effects, derived from its own recompute of the work item: %w", op, graph.ErrUnsupportedOperation)
	}
	ref, _ := args["ref"].(string)
	if !r.questions {
		// Not recorded: loopd derives the ticket's effects itself.
		return map[string]any{"pending": true, "via": "loopd", "derived": true}, nil
	}
	body, _ := args["body"].(string)
	q := strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(body, hooks.Marker, ""), hooks.Attribution, ""))
	in, err := r.append(Intent{WorkItem: ref, Op: IntentAsk, Params: map[string]any{"ref": ref, "question": q}})
	if err != nil {
		return nil, err
	}
	return map[string]any{"pending": true, "intent": in.ID, "via": "loopd"}, nil
}

func (r *Recorder) append(in Intent) (Intent, error) {
	in.Session, in.Created, in.Source = r.session.SessionID, r.clock.Now().UTC(), r.source
	in, err := AppendIntent(r.session.Dir(), in)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.err = err
		return in, err
	}
	r.recorded = append(r.recorded, in)
	return in, nil
}

// claimEvents maps the runtime's transition events to claim statuses.
var claimEvents = map[string]string{
	graph.EventAdvanced:  ClaimPassed,
	graph.EventBlocked:   ClaimBlocked,
	graph.EventEscalated: ClaimEscalated,
	graph.EventNoEdge:    ClaimEscalated,
	graph.EventCompleted: ClaimCompleted,
}

// Emit implements graph.Sink: a transition of the claim recorder's runtime
// becomes an IntentClaim. A relogged event (a verb killed before it
// logged) is recorded again; loopd's recompute makes that harmless.
func (r *Recorder) Emit(e graph.LogEvent) {
	status, ok := claimEvents[e.Name]
	if !ok || r.questions {
		return
	}
	params := map[string]any{"status": status}
	for _, f := range e.Fields {
		s, isString := f.Value.(string)
		if !isString {
			continue
		}
		switch f.Key {
		case "work_item":
			params["ref"] = s
		case "node", "to", "outcome", "hook":
			if validToken(s) {
				params[f.Key] = s
			}
		}
	}
	ref, _ := params["ref"].(string)
	if _, ok := params["node"]; !ok || ref == "" {
		return
	}
	_, _ = r.append(Intent{WorkItem: ref, Op: IntentClaim, Params: params}) // kept in Err
}

// Recorded returns the intents this recorder wrote, oldest first.
func (r *Recorder) Recorded() []Intent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Intent(nil), r.recorded...)
}

// Err is the last error recording an intent (nil: none): a claim whose
// request could not be written (the outbox full, say) must be told.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// claimSink tees a runtime's events to its sink and to the session's
// claim recorder.
type claimSink struct {
	next graph.Sink
	rec  *Recorder
}

func (s claimSink) Emit(e graph.LogEvent) {
	if s.next != nil {
		s.next.Emit(e)
	}
	s.rec.Emit(e)
}

var (
	_ graph.Integrations = (*Recorder)(nil)
	_ graph.Sink         = (*Recorder)(nil)
)
