package dashboard

import (
	"context"
	"errors"
	"time"

	"github.com/theloop-dev/theloop/graph"
)

// State is a board row's state, one of the constants below.
type State string

// Board states. Pending: tracked, the graph not entered yet.
//
// Done: the walk reached its terminal node; Closed: the session was
// closed or stopped (the ticket closed, an operator's stop) before it did.
// Neither has a running clock: Item.Finished says when.
//
// The last three are work items the daemon knows are armed but that have
// no live session: AwaitingStart, labeled for auto-execution but the
// daemon requires a start command; Queued, a start was requested and the
// spawn is under way; SpawnFailed, the spawn (or the event that was to
// spawn it) failed, Finding says why. Each value is a CSS class token.
const (
	StateWorking       State = "working"
	StateWaiting       State = "waiting"
	StateBlocked       State = "blocked"
	StateParked        State = "parked"
	StateDone          State = "done"
	StateClosed        State = "closed"
	StatePending       State = "pending"
	StateAwaitingStart State = "awaiting-start"
	StateQueued        State = "queued"
	StateSpawnFailed   State = "spawn-failed"
)

// States lists the board states in display order (the filter's choices).
var States = []State{StateWorking, StateWaiting, StateBlocked, StateParked, StateDone, StateClosed, StatePending, StateAwaitingStart, StateQueued, StateSpawnFailed}

// Finished reports a state whose item is over (done or closed): no clock
// runs for it and it is never stuck.
func (s State) Finished() bool { return s == StateDone || s == StateClosed }

// Label is the state as the board's state column shows it.
func (s State) Label() string {
	switch s {
	case StateWaiting:
		return "waiting on a human"
	case StateAwaitingStart:
		return "awaiting start"
	case StateSpawnFailed:
		return "spawn failed"
	}
	return string(s)
}

// ErrNotFound: the Source tracks no work item with that ref.
var ErrNotFound = errors.New("dashboard: no such work item")

// Item is one tracked work item as the board shows it. Every string field
// may hold text an agent or a GitHub user wrote (Title, Finding,
// LastEvent): the dashboard renders them only through html/template and
// sends them to the browser only as JSON data set with textContent.
type Item struct {
	// Ref is the work item's ref ("github:owner/repo#12"): the row's key.
	Ref string
	// Repo is "owner/repo".
	Repo string
	// URL links to the ticket (only http(s) URLs are rendered as links).
	URL string
	// Title is the ticket's title ("" when not known yet).
	Title string
	// Loop is the graph's name; Node and Phase the current node.
	Loop, Node, Phase string
	// Human is set when the current node is a human gate.
	Human bool
	State State
	// Finding says why the item is blocked or parked.
	Finding string
	// Since is when the item entered its current node (or was parked).
	Since time.Time
	// Finished is when a done or closed item finished (zero: not known,
	// or not finished).
	Finished time.Time
	// SessionLive reports a live agent session; Attach is the command
	// that attaches to it ("" when none).
	SessionLive bool
	Attach      string
	// LastEvent and LastEventAt describe the latest event about the item.
	LastEvent   string
	LastEventAt time.Time
	// PendingTicketEffects counts the effects the agent's session asked
	// loopd to make on the ticket (its outbox) that are not made yet.
	PendingTicketEffects int
	// PullRequests are the item's pull requests with their checks and
	// reviews (prci.go).
	PullRequests []PullRequest
	// Usage is what its sessions spent, as the board shows it ("≈$1.20 ·
	// 45k tok", "" when nothing was counted; usage.go).
	Usage string
}

// Artifact is one file the graph's nodes produce for the work item.
type Artifact struct {
	// Node is the producing node; Name the artifact's file name; Path its
	// path relative to the checkout.
	Node, Name, Path string
	Exists           bool
	// Locked: the front matter reads status: approved (by ApprovedBy).
	Locked     bool
	ApprovedBy []string
	// Skipped: the producing node was skipped (a phase selection, an
	// alternative the walk did not take): its absence is no gap.
	Skipped bool
	// Instead names the alternative written in this one's place (the node
	// produces "a.md|b.md"): its absence is no gap either.
	Instead string
}

// Detail is what the work-item page shows beyond the row.
type Detail struct {
	Item Item
	// Graph is the compiled graph the item walks (nil before it starts).
	Graph *graph.Graph
	// State is the item's graph-state.json (nil before it starts).
	State *graph.State
	// Messages are the current node's latest messages.
	Messages []string
	// Artifacts are the produced files with their lock status.
	Artifacts []Artifact
	// Decisions are the recorded decisions with the signature verdict
	// (graph.Runtime.VerifyDecisions); nil: the page lists State's
	// decisions without one.
	Decisions []graph.DecisionVerdict
}

// Event is one event-log line about a work item (or the daemon).
type Event struct {
	Time     time.Time
	Name     string
	WorkItem string
	// Fields are the line's other keys, values as decoded (untrusted).
	Fields map[string]any
}

// Source is what the dashboard reads. The daemon implements it over its
// session registry, the work items' graph state and the event log; tests
// implement it in memory. Methods are called concurrently and must not
// block for long: the board calls Items on every render and after every
// change notification.
type Source interface {
	// Items lists every tracked work item.
	Items(ctx context.Context) ([]Item, error)
	// Detail returns one work item's page data, or ErrNotFound.
	Detail(ctx context.Context, ref string) (*Detail, error)
	// Events returns the event-log lines at or after since, oldest first,
	// about ref ("" for all), at most limit of the newest (0: all).
	Events(ctx context.Context, ref string, since time.Time, limit int) ([]Event, error)
}

// Poster posts a comment on a work item's ticket as the operator: an
// integrations set (graph.Integrations) authenticated with the operator's
// own GitHub identity satisfies it.
type Poster interface {
	Call(ctx context.Context, op graph.Operation, args map[string]any) (map[string]any, error)
}
