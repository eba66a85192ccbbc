package graph

import (
	"context"
	"time"
)

// Level is an event's severity in the JSONL event log.
type Level string

// Event levels.
const (
	LevelDebug   Level = "debug"
	LevelInfo    Level = "info"
	LevelWarning Level = "warning"
	LevelError   Level = "error"
)

// The events the runtime emits (LogEvent.Name). Every one carries the
// work item; see each emitter for its other fields.
const (
	// EventStarted: a work item entered the graph (Start).
	EventStarted = "graph.started"
	// EventAdvanced: the pointer took an edge.
	EventAdvanced = "graph.advanced"
	// EventBlocked: an exit chain blocked; an attempt was counted.
	EventBlocked = "graph.blocked"
	// EventParked: an exit chain waits for a human.
	EventParked = "graph.parked"
	// EventEscalated: a node escalated (a repeated block or maxAttempts).
	EventEscalated = "graph.escalated"
	// EventNoEdge: a satisfied node has no edge for its outcome.
	EventNoEdge = "graph.no_edge"
	// EventCompleted: the walk finished at a terminal node.
	EventCompleted = "graph.completed"
	// EventForced: the pointer was forced (Force).
	EventForced = "graph.forced"
	// EventSkipsDeclared: nodes were declared skipped (DeclareSkips or a selection).
	EventSkipsDeclared = "graph.skips_declared"
	// EventSkipsRejected: a skip token was refused.
	EventSkipsRejected = "graph.skips_rejected"
	// EventOptInsSelected: opt-in nodes were selected.
	EventOptInsSelected = "graph.opt_ins_selected"
	// EventNodeSkipped: the walk routed around a skipped node.
	EventNodeSkipped = "graph.node_skipped"
	// EventHookSkipped: a hook reported skip.
	EventHookSkipped = "graph.hook_skipped"
	// EventHookDegraded: a hook's side effect failed (reported, not blocking).
	EventHookDegraded = "graph.hook_degraded"
	// EventEntryIncomplete: an entry chain stopped before its end.
	EventEntryIncomplete = "graph.entry_incomplete"
	// EventGateSession: how a human gate's session was resolved.
	EventGateSession = "graph.gate_session"
	// EventStateReconstructed: a missing or unparseable state was rebuilt by recompute.
	EventStateReconstructed = "graph.state_reconstructed"
	// EventDecisionRefused: the verifier refused a recorded decision, which was dropped.
	EventDecisionRefused = "graph.decision_refused"
	// EventDecisionUnsigned: a decision could not be signed.
	EventDecisionUnsigned = "graph.decision_unsigned"
)

// Field is one key/value of a LogEvent, kept in emission order.
type Field struct {
	Key   string
	Value any
}

// LogEvent is an observation the runtime emits: "graph.advanced",
// "graph.escalated", ... (docs/graph.md §8). The first field is
// always work_item.
type LogEvent struct {
	Time   time.Time
	Name   string
	Level  Level
	Fields []Field
}

// Get returns the value of the named field.
func (e LogEvent) Get(key string) (any, bool) {
	for _, f := range e.Fields {
		if f.Key == key {
			return f.Value, true
		}
	}
	return nil, false
}

// Sink receives the runtime's events. Emit must not block for long and
// must not call back into the Runtime; write errors are the sink's to
// report — an event that cannot be written never stops a walk.
type Sink interface {
	Emit(e LogEvent)
}

// SinkFunc adapts a function to Sink.
type SinkFunc func(LogEvent)

// Emit calls f.
func (f SinkFunc) Emit(e LogEvent) { f(e) }

type discardSink struct{}

func (discardSink) Emit(LogEvent) {}

// Clock tells the time. Tests use graphtest.Clock.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Auditor leaves the human-visible trail of overrides: an entry in the work
// item's execution log and a marked comment on the ticket. Failures are
// returned and reported as warnings; they never undo the override, which is
// already saved.
type Auditor interface {
	Forced(ctx context.Context, wi WorkItem, rec ForceRecord) error
	SkipsDeclared(ctx context.Context, wi WorkItem, nodes []string, by, reason string) error
}

// Items resolves a work item id to what its hooks need. It is called once
// per runtime verb.
type Items interface {
	// Resolve returns the work item (ref, spec dir, tags, risk tier) and its
	// artifact access. An id that cannot name a work item (path separators,
	// "..") must be refused.
	Resolve(ctx context.Context, id string) (WorkItem, Artifacts, error)
}
