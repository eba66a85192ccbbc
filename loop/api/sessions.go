package api

import (
	"context"
	"net/url"
	"time"
)

// SessionPath is the path of a per-session verb: /sessions/{ref}/{verb}
// with the ref escaped as one path segment ("github:o/r#42" becomes
// "github:o%2Fr%2342"), so the server reads it back whole.
func SessionPath(ref, verb string) string {
	return "/sessions/" + url.PathEscape(ref) + "/" + verb
}

// OperatorVerbs are the per-session verbs POST /sessions/{ref}/{verb}
// accepts beside reply: the control verbs and start and cleanup, which
// act as the ticket's keywords do (same authorization, same record).
var OperatorVerbs = []string{"start", "stop", "pause", "resume", "cleanup"}

// OperatorRequest is the optional body of POST /sessions/{ref}/{verb}.
type OperatorRequest struct {
	// Actor, when set, must be the caller's authenticated identity (403
	// otherwise).
	Actor string `json:"actor,omitempty"`
	// NoComment skips the marked comment announcing the command on the
	// work item.
	NoComment bool `json:"noComment,omitempty"`
}

// ReplyRequest is POST /sessions/{ref}/reply's body.
type ReplyRequest struct {
	// Message is pasted into the session, marked as the operator's. It
	// must not carry a control keyword (400): a reply talks to the agent,
	// it never commands loopd or decides a gate.
	Message string `json:"message"`
	// Actor, when set, must be the caller's authenticated identity.
	Actor string `json:"actor,omitempty"`
}

// MaxReplyBytes bounds a reply's message.
const MaxReplyBytes = 8 << 10

// ReplyResult answers POST /sessions/{ref}/reply.
type ReplyResult struct {
	Ref   string    `json:"ref"`
	Actor string    `json:"actor"`
	At    time.Time `json:"at"`
	// Pasted is the text as it went into the pane (with the operator's
	// mark).
	Pasted string `json:"pasted"`
	// Session is the tmux session it went into.
	Session string `json:"session"`
	// Verified: the pane showed the text and it was submitted.
	Verified bool `json:"verified"`
}

// Transcript answers GET /sessions/{ref}/transcript.
type Transcript struct {
	Ref     string `json:"ref"`
	Session string `json:"session"`
	// Pane is the tmux pane's text, scrollback included.
	Pane string `json:"pane"`
	// PaneError says why Pane is empty (the session is gone).
	PaneError string `json:"paneError,omitempty"`
	// Harness is the harness's own transcript, where it keeps one.
	Harness *HarnessTranscript `json:"harness,omitempty"`
}

// HarnessTranscript is the tail of a harness's own transcript file (the
// agent's writing: data, never instructions).
type HarnessTranscript struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	Truncated bool   `json:"truncated,omitempty"`
}

// PaneFrame is one event of GET /sessions/{ref}/pane (SSE, event "screen"):
// the pane's visible screen with its SGR colour sequences, sent when it
// changes.
type PaneFrame struct {
	Screen string    `json:"screen"`
	At     time.Time `json:"at"`
}

// AttentionItem is one entry of "needs you": something that waits on a
// human (a gate, a question the agent asked, a parked node, a dead
// session, a failed spawn), oldest first.
type AttentionItem struct {
	Ref   string    `json:"ref"`
	Title string    `json:"title,omitempty"`
	Kind  string    `json:"kind"`
	Why   string    `json:"why"`
	Since time.Time `json:"since,omitzero"`
	// WaitingSeconds is how long it has waited.
	WaitingSeconds float64 `json:"waitingSeconds"`
}

// AttentionKinds are the kinds of AttentionItem, in the order the
// dashboard explains them: a gate waiting for a decision, a question the
// agent asked (`loopctl ask`), a parked node, a dead session, a failed
// spawn, a cluster node declining the item for capacity, an item near or
// at its budget cap (docs/usage.md).
var AttentionKinds = []string{"gate", "question", "parked", "dead-session", "spawn-failed", "capacity", "budget"}

// AttentionPath is GET /attention: the "needs you" list ([]AttentionItem,
// oldest first). Its query takes kind=K (repeatable) to keep only those
// kinds.
const AttentionPath = "/attention"

// Attention asks the daemon what waits on a human, oldest first (kinds:
// only these; none = all).
func (c *Client) Attention(ctx context.Context, kinds ...string) ([]AttentionItem, error) {
	var q url.Values
	if len(kinds) > 0 {
		q = url.Values{"kind": kinds}
	}
	var out []AttentionItem
	err := c.Do(ctx, "GET", AttentionPath, q, nil, &out)
	return out, err
}

// SessionVerbs are the per-session registry verbs POST /sessions/{ref}/{verb}
// accepts beside OperatorVerbs: reset (a fresh conversation in the same
// node, artifacts kept), register (attach a conversation started outside
// loopd) and close (end the session, keep the checkout and the graph
// state). docs/daemon.md §5.5 describes them.
var SessionVerbs = []string{"reset", "register", "close"}

// ResetRequest is the optional body of POST /sessions/{ref}/reset.
type ResetRequest struct {
	// Actor, when set, must be the caller's authenticated identity.
	Actor string `json:"actor,omitempty"`
	// NoComment skips the marked comment on the work item.
	NoComment bool `json:"noComment,omitempty"`
}

// RegisterRequest is POST /sessions/{ref}/register's body.
type RegisterRequest struct {
	// Harness is the harness the conversation runs in ("" = loopd's
	// default harness).
	Harness string `json:"harness,omitempty"`
	// HarnessSessionID is the conversation's id, as the harness's
	// --resume takes it.
	HarnessSessionID string `json:"harnessSessionId"`
	// Cwd is the absolute checkout of the work item's repository the
	// conversation works in.
	Cwd string `json:"cwd"`
	// Force replaces the work item's own live session. It never lifts the
	// refusal of a conversation or checkout another work item holds.
	Force bool `json:"force,omitempty"`
	// Actor, when set, must be the caller's authenticated identity.
	Actor string `json:"actor,omitempty"`
	// NoComment skips the marked comment on the work item.
	NoComment bool `json:"noComment,omitempty"`
}

// CloseRequest is the optional body of POST /sessions/{ref}/close.
type CloseRequest struct {
	// KeepTmux keeps the tmux session (its harness terminated) for a
	// post-mortem; false kills it; nil follows routing.tmux.keepSessionOnClose.
	KeepTmux *bool `json:"keepTmux,omitempty"`
	// Actor, when set, must be the caller's authenticated identity.
	Actor string `json:"actor,omitempty"`
	// NoComment skips the marked comment on the work item.
	NoComment bool `json:"noComment,omitempty"`
}

// SessionResult answers reset, register and close.
type SessionResult struct {
	Ref  string `json:"ref"`
	Verb string `json:"verb"`
	// Effect is what happened: reset, registered, replaced, closed,
	// already-closed.
	Effect string `json:"effect"`
	// Actor is who asked (the caller's authenticated identity).
	Actor string `json:"actor"`
	// Session is the tmux session; HarnessSessionID the conversation now
	// recorded (after a reset: the new one).
	Session          string `json:"session,omitempty"`
	HarnessSessionID string `json:"harnessSessionId,omitempty"`
	// PreviousSessionID is the conversation a reset or a forced register
	// replaced.
	PreviousSessionID string `json:"previousSessionId,omitempty"`
	// Artifacts are the files a reset pointed the new conversation at.
	Artifacts []string `json:"artifacts,omitempty"`
	// Tmux is the state of the item's tmux session after the verb (live,
	// absent, dead).
	Tmux string `json:"tmux,omitempty"`
	// Announced is the URL of the marked comment on the work item.
	Announced     string `json:"announced,omitempty"`
	AnnounceError string `json:"announceError,omitempty"`
}
