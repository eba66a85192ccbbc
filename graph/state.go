package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/theloop-dev/theloop/internal/jsonascii"
)

// StateVersion is the graph-state.json format version.
const StateVersion = 1

// State is a work item's graph-state.json. Field names and key order follow
// the-loop's format (docs/graph.md §6); it is a cache of the walk,
// never an authority: Status with recompute does not trust it.
type State struct {
	Version     int                        `json:"version"`
	WorkItem    string                     `json:"workItem"`
	CurrentNode string                     `json:"currentNode"`
	Nodes       OrderedMap[NodeRecord]     `json:"nodes"`
	Decisions   OrderedMap[Decision]       `json:"decisions"`
	Forced      []ForceRecord              `json:"forced"`
	Parked      *Parked                    `json:"parked"`
	Session     *SessionBinding            `json:"session"`
	Completions OrderedMap[Completion]     `json:"completions"`
	Skips       OrderedMap[SkipDecl]       `json:"skips"`
	OptIns      OrderedMap[OptInSelection] `json:"optIns"`
	Surface     string                     `json:"surface"`
	Loop        string                     `json:"loop"`
	// Seq numbers the transitions this state has recorded; every event
	// that reports a transition carries its number as "seq".
	Seq int `json:"seq,omitempty"`
	// Unlogged holds the events of the transitions saved with this state
	// that were not yet confirmed written to the event log. State is saved
	// before the events that report it; an event lost to a crash between
	// the two is emitted again (with relogged: true) by the next verb that
	// takes the work item's lock.
	Unlogged []JournalEntry `json:"unlogged,omitempty"`
}

// JournalEntry is an event saved with the state that it reports.
type JournalEntry struct {
	Seq    int            `json:"seq"`
	Time   string         `json:"time"`
	Name   string         `json:"name"`
	Level  Level          `json:"level"`
	Fields []JournalField `json:"fields"`
}

// JournalField is one field of a JournalEntry.
type JournalField struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

// NodeRecord is a node's history in one work item.
type NodeRecord struct {
	// Attempts counts entries into the node plus blocked evaluations.
	Attempts  int    `json:"attempts"`
	Outcome   string `json:"outcome"`
	EnteredAt string `json:"enteredAt"`
	ExitedAt  string `json:"exitedAt"`
	// LastBlock is the rendered text of the latest block in the current
	// visit ("" after entering).
	LastBlock string `json:"lastBlock"`
	Forced    bool   `json:"forced"`
	// SkippedHooks are the hooks that reported skip in the latest live
	// evaluation of the node's exit chain, in chain order (R2.5: a skip
	// is recorded, not only passed over).
	SkippedHooks []string `json:"skippedHooks,omitempty"`
	// Hooks are the results of the latest live evaluation of the node's
	// exit chain, in chain order, as far as it ran: each hook's status,
	// the edge it asked for and a side effect that failed. The messages
	// of a block are in LastBlock.
	Hooks []HookRecord `json:"hooks,omitempty"`
}

// HookRecord is one hook's result as graph-state.json keeps it.
type HookRecord struct {
	Hook     string `json:"hook"`
	Status   Status `json:"status"`
	Outcome  string `json:"outcome,omitempty"`
	Degraded string `json:"degraded,omitempty"`
}

// Decision is a recorded human decision: a gate verdict or a selection. It
// carries provenance — who, through which event and comment, and when.
type Decision struct {
	At string `json:"at"`
	// Graph is the frozen graph recorded by phase selection.
	Graph        json.RawMessage `json:"graph,omitempty"`
	Via          string          `json:"via,omitempty"`
	Surface      string          `json:"surface,omitempty"`
	SessionPerPr string          `json:"sessionPerPr,omitempty"`
	Goal         json.RawMessage `json:"goal,omitempty"`
	// Outcome is the gate's verdict (approved, changes-requested, ...).
	Outcome string `json:"outcome,omitempty"`
	// By names who decided, e.g. "@dana" (several joined by ", ").
	By string `json:"by,omitempty"`
	// Rule is the authorization rule that let By decide (signed).
	Rule string `json:"rule,omitempty"`
	// Event is the inbound delivery the decision arrived in.
	Event string `json:"event,omitempty"`
	// Comment identifies the deciding comment (id or URL).
	Comment string `json:"comment,omitempty"`
	// CommentURL links the deciding comment, when the event carried it.
	CommentURL string `json:"commentUrl,omitempty"`
	// Artifacts are the content hashes of the artifacts the decision
	// approved, taken when it was recorded (filled by the DecisionSigner).
	Artifacts []ArtifactHash `json:"artifacts,omitempty"`
	// Skips and OptIns are the nodes this decision (a phase selection)
	// declared skipped and selected; they are covered by the signature.
	Skips  []string `json:"skips,omitempty"`
	OptIns []string `json:"optIns,omitempty"`
	// Signature proves the decision (nil: unsigned). See DecisionSigner.
	Signature *DecisionSignature `json:"signature,omitempty"`
}

// ForceRecord is one use of the escape hatch.
type ForceRecord struct {
	From     string   `json:"from"`
	To       string   `json:"to"`
	Reason   string   `json:"reason"`
	Actor    string   `json:"actor"`
	At       string   `json:"at"`
	Warnings []string `json:"warnings"`
}

// Parked says why the pointer is not moving.
type Parked struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
	Since  string `json:"since"`
	// Escalated is set when the node escalated; only a new event, a force,
	// or a fix that makes its exit chain stop blocking moves it on.
	Escalated bool `json:"escalated,omitempty"`
	// Hook names the hook that stopped the chain (the one waiting for a
	// human, or the blocking one), when one did.
	Hook string `json:"hook,omitempty"`
}

// Completion records the latest completion claim of a node.
type Completion struct {
	At string `json:"at"`
	By string `json:"by"`
}

// SkipDecl declares a node skipped.
type SkipDecl struct {
	Via    string `json:"via"`
	Token  string `json:"token"`
	By     string `json:"by"`
	Reason string `json:"reason"`
	At     string `json:"at"`
}

// OptInSelection selects an opt-in node.
type OptInSelection struct {
	Via   string `json:"via"`
	Token string `json:"token"`
	By    string `json:"by"`
	At    string `json:"at"`
}

// NewState returns the empty state of a work item that never started.
func NewState(id string) *State {
	return &State{Version: StateVersion, WorkItem: id, Forced: []ForceRecord{}}
}

// Clone returns a deep enough copy for the runtime's purposes (maps and
// slices are not shared).
func (s *State) Clone() *State {
	c := *s
	c.Nodes = s.Nodes.Clone()
	c.Decisions = s.Decisions.Clone()
	c.Completions = s.Completions.Clone()
	c.Skips = s.Skips.Clone()
	c.OptIns = s.OptIns.Clone()
	c.Forced = append([]ForceRecord{}, s.Forced...)
	c.Unlogged = append([]JournalEntry(nil), s.Unlogged...)
	if s.Parked != nil {
		p := *s.Parked
		c.Parked = &p
	}
	if s.Session != nil {
		b := *s.Session
		c.Session = &b
	}
	return &c
}

// Record returns the node's record (zero when the node was never touched).
func (s *State) Record(id string) NodeRecord {
	r, _ := s.Nodes.Get(id)
	return r
}

// update changes the node's record in place (creating it when absent).
func (s *State) update(id string, f func(*NodeRecord)) {
	f(s.Nodes.ref(id))
}

// Enter moves the pointer to id: enteredAt is set if empty, attempts grows
// by one, lastBlock is cleared (a new visit), and parking is cleared.
func (s *State) Enter(id string, now time.Time) {
	s.update(id, func(r *NodeRecord) {
		if r.EnteredAt == "" {
			r.EnteredAt = timestamp(now)
		}
		r.Attempts++
		r.LastBlock = ""
	})
	s.CurrentNode = id
	s.Parked = nil
}

// Exit records the node's outcome.
func (s *State) Exit(id, outcome string, now time.Time) {
	s.exit(id, outcome, timestamp(now))
}

// exit is Exit with the timestamp already formatted.
func (s *State) exit(id, outcome, at string) {
	r := s.Nodes.ref(id)
	r.Outcome = outcome
	r.ExitedAt = at
}

// Park records why the pointer is not moving.
func (s *State) Park(id, reason string, escalated bool, now time.Time) {
	s.Parked = &Parked{Node: id, Reason: reason, Since: timestamp(now), Escalated: escalated}
}

// NoteBlock counts a blocked evaluation as an attempt, stores the rendered
// block, and reports whether it repeats the previous block of this visit.
func (s *State) NoteBlock(id, rendered string) (repeated bool) {
	s.update(id, func(r *NodeRecord) {
		repeated = rendered != "" && r.LastBlock == rendered
		r.LastBlock = rendered
		r.Attempts++
	})
	return repeated
}

// Timestamp formats t as the-loop's state timestamps: UTC, second
// precision, "+00:00" suffix.
func timestamp(t time.Time) string {
	// One allocation: the digits written into a stack buffer by hand, as
	// the layout would (every transition stamps its state; a layout is
	// parsed anew on each Format). Years Format writes otherwise than as
	// four digits take the layout.
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		var buf [40]byte
		return string(append(t.AppendFormat(buf[:0], "2006-01-02T15:04:05"), "+00:00"...))
	}
	hour, min, sec := t.Clock()
	buf := [25]byte{
		byte('0' + year/1000), byte('0' + year/100%10), byte('0' + year/10%10), byte('0' + year%10), '-',
		byte('0' + int(month)/10), byte('0' + int(month)%10), '-',
		byte('0' + day/10), byte('0' + day%10), 'T',
		byte('0' + hour/10), byte('0' + hour%10), ':',
		byte('0' + min/10), byte('0' + min%10), ':',
		byte('0' + sec/10), byte('0' + sec%10),
		'+', '0', '0', ':', '0', '0',
	}
	return string(buf[:])
}

// MarshalState serialises s the way graph-state.json is written: two-space
// indentation, keys in the documented order, <, > and & unescaped, every
// non-ASCII character escaped as \uXXXX, and a trailing newline.
func MarshalState(s *State) ([]byte, error) {
	if s.Forced == nil {
		s.Forced = []ForceRecord{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return jsonascii.Escape(buf.Bytes()), nil
}

// ParseState reads graph-state.json. Missing keys take their defaults;
// entries that are not objects are dropped. It returns an error wrapping
// ErrCorruptState when the text is not a JSON object.
func ParseState(id string, data []byte) (*State, error) {
	trim := bytes.TrimSpace(data)
	if len(trim) == 0 || trim[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrCorruptState)
	}
	// One decode: encoding/json skips a mistyped field and completes the
	// rest (an agent's bad edit costs only that field); only a syntax error
	// makes the file corrupt.
	s := NewState(id)
	if err := json.Unmarshal(trim, s); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			return nil, fmt.Errorf("%w: %v", ErrCorruptState, err)
		}
	}
	if s.Version == 0 {
		s.Version = StateVersion
	}
	if s.WorkItem == "" {
		s.WorkItem = id
	}
	if s.Forced == nil {
		s.Forced = []ForceRecord{}
	}
	return s, nil
}

// Store persists graph state. Implementations must write atomically (a
// reader sees the old or the new file, never a torn one).
type Store interface {
	// Load returns the saved state. It returns an error wrapping ErrNoState
	// when there is none, and one wrapping ErrCorruptState when the saved
	// bytes do not parse (the store must then preserve those bytes beside
	// the state, never delete them, before it next saves).
	Load(ctx context.Context, id string) (*State, error)
	// Save replaces the saved state.
	Save(ctx context.Context, id string, s *State) error
	// Lock takes the work item's exclusive lock, retrying up to timeout; it
	// returns an error wrapping ErrBusy when the lock stays held. The lock is
	// not re-entrant.
	Lock(ctx context.Context, id string, timeout time.Duration) (unlock func(), err error)
}

// A ProvisionalStore is a Store that can also save a state whose loss in a
// crash is harmless because the state it replaces is still valid, more
// cheaply than Save (a file store skips the directory's fsync). The runtime
// saves these states that way: a block that escalates nothing, with the
// claim that led to it (lost: as if the attempt, or the claim, had come
// just before the crash; its graph.blocked event, emitted after the save
// and not journaled, may be lost with it), a claim record no outcome saved,
// and the journal cleared once its events were emitted (lost: the next
// locked verb emits them again, marked relogged — at least once, as
// always). Every transition is still saved with Save before its event is
// emitted.
type ProvisionalStore interface {
	Store
	// SaveProvisional replaces the saved state as Save does, except that
	// after a crash or power loss the state saved before it may be found
	// instead — never a torn or empty one.
	SaveProvisional(ctx context.Context, id string, s *State) error
}
