package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/theloop-dev/theloop/workitem"
)

// Source says which ingress produced an Event.
type Source string

const (
	SourceWebhook Source = "webhook"
	SourcePoll    Source = "poll"
	SourceCLI     Source = "cli"
)

// Comment is one human-authored body carried by an event (an issue comment,
// a review, a review comment). Body is untrusted text: it may be classified,
// never echoed into instructions for an agent.
type Comment struct {
	// ID is the provider's id of the comment or review ("" when the event
	// carries none).
	ID     string `json:"id,omitempty"`
	Author string `json:"author"`
	Body   string `json:"body"`
	URL    string `json:"url,omitempty"`
	// UpdatedAt is the comment's updated_at as GitHub reports it; with ID it
	// is the content identity of the change (see Event.ContentKey).
	UpdatedAt string `json:"updatedAt,omitempty"`
	// State is a review's state (APPROVED, CHANGES_REQUESTED, COMMENTED,
	// DISMISSED); "" for comments.
	State string `json:"state,omitempty"`
	// Item is the work-item ref of the issue or pull request the comment
	// was made on ("" when the event names none). The daemon re-reads the
	// comment there before it lets the comment decide a gate.
	Item string `json:"item,omitempty"`
}

// Event is one routed, authorized piece of GitHub activity concerning one or
// more work items. It is what the daemon's queue stores; its JSON encoding is
// the queue's wire format, so fields are only ever added.
type Event struct {
	// Event is the GitHub event name (X-GitHub-Event), e.g. "issue_comment".
	Event string `json:"event"`
	// Action is the payload's "action" ("" when absent).
	Action string `json:"action,omitempty"`
	// DeliveryID is X-GitHub-Delivery for webhooks; for polled and CLI events
	// a stable synthetic id ("poll-…", "cli-…"). Never empty: the queue
	// deduplicates on it.
	DeliveryID string `json:"deliveryId"`
	// Repo is "owner/name" of the repository the event came from.
	Repo string `json:"repo"`
	// WorkItems are the refs the event concerns, in extraction order.
	WorkItems []workitem.Ref `json:"workItems"`
	// BranchOnly are the WorkItems found only through the issue-<n> branch
	// convention: weak links, to verify before acting (docs/daemon.md §6.2).
	BranchOnly []workitem.Ref `json:"branchOnly,omitempty"`
	// Actor is the login whose action this is ("" for system events such as
	// CI, which carry no human actor).
	Actor string `json:"actor,omitempty"`
	// Comments are the human-authored bodies the event carries (already
	// stripped of self-authored ones).
	Comments []Comment `json:"comments,omitempty"`
	// Control is the control command parsed from the event's body, if any.
	Control *ControlCommand `json:"control,omitempty"`
	// Labeled reports that the payload carries the auto-execute label.
	Labeled bool `json:"labeled,omitempty"`
	// Change is the content identity of an issue or pull-request change
	// that carries no comment: "#<n>" for opened, "#<n>@<time>" for closed
	// (closed_at) and reopened (updated_at), "#<n>/<label>@<updated_at>"
	// for labeled and unlabeled — the times verbatim as GitHub reports
	// them, which its issue events API reports as the event's created_at
	// (so the poller keys an event it lists the same way). "" otherwise.
	Change string `json:"change,omitempty"`
	// Payload is the raw JSON body, kept for bounded excerpts. Untrusted.
	Payload json.RawMessage `json:"payload,omitempty"`
	Source  Source          `json:"source"`
	// ReceivedAt is when the ingress first saw the event (UTC).
	ReceivedAt time.Time `json:"receivedAt"`
}

// ContentKey identifies the change an event carries independently of how it
// was delivered: the same comment arriving under two delivery ids (a
// repository hook and an app hook, or a webhook and the poller's reconcile
// pass) has one ContentKey. The creation of a comment or review is
// identified by its id alone (a comment first polled after an edit is
// still its creation); any later change (an edit, a deletion) by its id
// and updated_at, verbatim as GitHub reports it — the poller keys a listed
// edit the same way. An issue or pull-request change without a comment
// (opened, closed, reopened, labeled, unlabeled) is keyed by its Change.
// "" when
// the event has no content identity beyond its delivery.
func (e *Event) ContentKey() string {
	if len(e.Comments) == 0 || e.Comments[0].ID == "" {
		if e.Change != "" {
			return e.Event + "/" + e.Action + "/" + e.Repo + "/" + e.Change
		}
		return ""
	}
	c := e.Comments[0]
	key := e.Event + "/" + e.Action + "/" + e.Repo + "/" + c.ID
	if e.Action == "created" || e.Action == "submitted" {
		return key
	}
	return key + "@" + c.UpdatedAt
}

// Command is a control command's canonical name. The set is closed: parsing
// yields one of these constants, never text from the body.
type Command string

const (
	CmdStart      Command = "start"
	CmdStop       Command = "stop"
	CmdPause      Command = "pause"
	CmdResume     Command = "resume"
	CmdExecute    Command = "execute"
	CmdContribute Command = "contribute"
	CmdDo         Command = "do"
	CmdCleanup    Command = "cleanup"
)

// ControlCommand is a control keyword found in an authorized comment.
type ControlCommand struct {
	Command Command `json:"command"`
	// Ambiguous is set when the body named two or more distinct commands:
	// nothing is executed and nothing forwarded.
	Ambiguous bool   `json:"ambiguous,omitempty"`
	Actor     string `json:"actor"`
	// Note is the comment's URL when the command came from a comment.
	Note string `json:"note,omitempty"`
}

// Sink keeps routed events. The daemon's implementation publishes to a
// durable queue; Put returns only once the event is kept (nil) or certainly
// not kept (an error). A Sink that is down or full returns an error wrapping
// ErrUnavailable, and the receiver answers 503 with Retry-After so GitHub
// redelivers. A delivery the Sink has already kept returns ErrDuplicate.
type Sink interface {
	Put(ctx context.Context, ev *Event) error
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(ctx context.Context, ev *Event) error

// Put calls f.
func (f SinkFunc) Put(ctx context.Context, ev *Event) error { return f(ctx, ev) }

var (
	// ErrUnavailable: the sink cannot keep events now; retry later.
	ErrUnavailable = errors.New("ingress: sink unavailable")
	// ErrDuplicate: the sink already holds this delivery (or this content).
	ErrDuplicate = errors.New("ingress: duplicate event")
)
