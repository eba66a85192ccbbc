package loop

// The outbox (docs/decisions.md §18): in a session loopd spawned, the
// agent holds no credential, so a claim's effects on the ticket (phase
// labels, review requests, marked comments, `loopctl ask`) are not performed
// by the agent's process. They are recorded here as intents, one JSON line
// each, in a file only that session writes, and loopd performs them with its
// own credentials after checking each against an allowlist and the
// session's own work item (loop/daemon/outbox).
//
// Layout: <state root>/outbox/<session id>/intents.jsonl — the only place
// under the state root a session may write. The file is append-only and
// fsync'd by the writer; a line is
//
//	{"id":"<session id>-<n>","session":"<session id>","workItem":"github:o/r#1",
//	 "op":"github.set-labels","params":{...},"created":"<RFC 3339>","source":"graph complete"}
//
// Everything in the file is agent-written: the reader bounds sizes and
// ParseIntent refuses anything but the allowlisted operations with exactly
// the parameters those take.

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

// Intent is one ticket effect a session asks loopd to perform.
type Intent struct {
	// ID is "<session id>-<n>", n the line's number in the file: unique
	// and stable, the key of loopd's done record.
	ID      string `json:"id"`
	Session string `json:"session"`
	// WorkItem is the ref the effect lands on (github:[host/]owner/repo#n).
	WorkItem string `json:"workItem"`
	// Op is the operation (package ops).
	Op graph.Operation `json:"op"`
	// Params are the operation's arguments, as package ops describes them.
	Params map[string]any `json:"params"`
	// Created is when the intent was recorded.
	Created time.Time `json:"created"`
	// Source is the verb that recorded it (graph complete, ask, ...).
	Source string `json:"source,omitempty"`
}

// IntentOps are the operations an intent may name: ticket effects only.
// Review requests and `loopctl ask` questions are marked comments.
var IntentOps = []graph.Operation{ops.GitHubAddComment, ops.GitHubSetLabels}

// Args are the operation's arguments rebuilt from the validated fields —
// never the agent's map as it came: call only on an intent ParseIntent or
// CheckIntent accepted.
func (in Intent) Args() map[string]any {
	switch in.Op {
	case ops.GitHubAddComment:
		return map[string]any{"ref": in.WorkItem, "body": in.Params["body"]}
	case ops.GitHubSetLabels:
		labels := []any{}
		for _, l := range asStrings(in.Params["labels"]) {
			labels = append(labels, l)
		}
		args := map[string]any{"ref": in.WorkItem, "labels": labels}
		if p, ok := in.Params["replacePrefix"].(string); ok {
			args["replacePrefix"] = p
		}
		return args
	}
	return nil
}

// Summary is a short description of the effect for a claim's reply and
// the event log (never a comment's text).
func (in Intent) Summary() string {
	switch in.Op {
	case ops.GitHubSetLabels:
		return "label " + strings.Join(asStrings(in.Params["labels"]), ", ")
	case ops.GitHubAddComment:
		return "marked comment"
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

// ParseIntent parses and checks one line of an intents file. It is the
// whole trust boundary between the agent and loopd's credentials: the line
// is bounded, decoded strictly (unknown fields refused) and checked by
// CheckIntent. Errors wrap ErrIntentRefused and never quote the line.
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

// CheckIntent applies the allowlist: a GitHub work item ref, an id of the
// session, an allowlisted operation whose parameters are exactly those it
// takes, on the intent's own work item; labels only in the loop: namespace;
// comments only carrying the self-authored marker (hooks.Mark), which
// ingress drops, so that no intent can ever decide a gate. It does not know
// which work item the session serves: the performer checks that.
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
		return refuse("operation %q is not one an agent's session may ask for (allowed: %s, %s)", clip(string(in.Op), 60), ops.GitHubAddComment, ops.GitHubSetLabels)
	}
	return nil
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
		ok := false
		for _, want := range keys {
			ok = ok || k == want
		}
		if !ok {
			return refuse("parameter %q is not one this operation takes (%s)", clip(k, 40), strings.Join(keys, ", "))
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

// Recorder is the graph.Integrations of a loopd-managed session: the
// ticket effects a claim makes become intents in the session's outbox,
// and every other operation (reads, Slack, Jira) is unsupported there —
// the hooks skip them, as when no integration is configured. It never
// makes a network call.
type Recorder struct {
	session ManagedSession
	source  string
	clock   graph.Clock

	mu       sync.Mutex
	recorded []Intent
}

// NewRecorder records into the session's outbox; source names the verb
// ("graph complete", "ask") in each intent.
func NewRecorder(s ManagedSession, source string, clock graph.Clock) *Recorder {
	if clock == nil {
		clock = graph.SystemClock{}
	}
	return &Recorder{session: s, source: source, clock: clock}
}

// Call implements graph.Integrations.
func (r *Recorder) Call(_ context.Context, op graph.Operation, args map[string]any) (map[string]any, error) {
	allowed := false
	for _, o := range IntentOps {
		allowed = allowed || o == op
	}
	if !allowed {
		return nil, fmt.Errorf("%s is not available in a loopd-managed session, which holds no credential: loopd performs the ticket's effects (%s, %s) from its outbox: %w", op, ops.GitHubAddComment, ops.GitHubSetLabels, graph.ErrUnsupportedOperation)
	}
	ref, _ := args["ref"].(string)
	params := make(map[string]any, len(args))
	for k, v := range args {
		if s, ok := v.([]string); ok { // JSON shape: what the reader will decode
			l := make([]any, len(s))
			for i, x := range s {
				l[i] = x
			}
			v = l
		}
		params[k] = v
	}
	in, err := AppendIntent(r.session.Dir(), Intent{Session: r.session.SessionID, WorkItem: ref, Op: op, Params: params,
		Created: r.clock.Now().UTC(), Source: r.source})
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.recorded = append(r.recorded, in)
	r.mu.Unlock()
	res := map[string]any{"pending": true, "intent": in.ID, "via": "loopd"}
	if op == ops.GitHubSetLabels {
		res["labels"] = params["labels"]
	}
	return res, nil
}

// Recorded returns the intents this recorder wrote, oldest first.
func (r *Recorder) Recorded() []Intent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Intent(nil), r.recorded...)
}

var _ graph.Integrations = (*Recorder)(nil)
