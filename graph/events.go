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

// Field is one key/value of a LogEvent, kept in emission order.
type Field struct {
	Key   string
	Value any
}

// LogEvent is an observation the runtime emits: "graph.advanced",
// "graph.escalated", ... (reference graph-spec §8). The first field is
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
