package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ops"
)

// Kind classifies an Observation.
type Kind string

const (
	// KindWebhook: an event was kept by the queue (the receiver answered 202).
	KindWebhook Kind = "webhook"
	// KindPaste: text was pasted into a work item's session (an event
	// prompt, a spawn prompt or a graph assignment).
	KindPaste Kind = "paste"
	// KindComment: the daemon posted a comment (Text is the body).
	KindComment Kind = "comment"
	// KindTransition: the work item's graph moved or was evaluated
	// (graph.started, graph.advanced, graph.parked, ...).
	KindTransition Kind = "transition"
	// KindSpawn: a session was spawned, respawned or closed.
	KindSpawn Kind = "session"
	// KindEvent: any other event-log event (dispatch.*, control.*, ...).
	KindEvent Kind = "event"
)

// Observation is one thing the daemon did, for an embedder to show.
type Observation struct {
	Kind Kind
	Time time.Time
	// Name is the event-log name (webhook: the GitHub event name).
	Name       string
	WorkItem   string
	DeliveryID string
	// Text is the pasted text or the posted comment body (daemon-composed;
	// never payload text except a webhook's Action).
	Text string
	// Fields holds the event's other fields.
	Fields map[string]any
}

func (o Observation) String() string {
	return fmt.Sprintf("%s %s %s %s", o.Kind, o.Name, o.WorkItem, o.DeliveryID)
}

// Observer receives observations. It is called synchronously from the
// daemon's goroutines (concurrently for different work items) and must not
// block for long.
type Observer interface{ Observe(Observation) }

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Observation)

// Observe calls f.
func (f ObserverFunc) Observe(o Observation) { f(o) }

// observedSink tees the event log to the observer.
type observedSink struct {
	d    *Daemon
	next []graph.Sink
}

func (s *observedSink) Emit(e graph.LogEvent) {
	if s.d.scrub != nil {
		e = scrubEvent(s.d.scrub, e)
	}
	for _, n := range s.next {
		n.Emit(e)
	}
	if !s.d.observing {
		return
	}
	o := Observation{Kind: KindEvent, Time: e.Time, Name: e.Name, Fields: map[string]any{}}
	for _, f := range e.Fields {
		switch f.Key {
		case "work_item":
			o.WorkItem, _ = f.Value.(string)
		case "delivery_id":
			o.DeliveryID, _ = f.Value.(string)
		default:
			o.Fields[f.Key] = f.Value
		}
	}
	switch {
	case strings.HasPrefix(e.Name, "graph."):
		o.Kind = KindTransition
	case strings.HasPrefix(e.Name, "session."):
		o.Kind = KindSpawn
	}
	s.d.observe(o)
}

// observedIntegrations reports every comment posted.
type observedIntegrations struct {
	d    *Daemon
	next graph.Integrations
}

func (i *observedIntegrations) Call(ctx context.Context, op graph.Operation, args map[string]any) (map[string]any, error) {
	res, err := i.next.Call(ctx, op, args)
	if err != nil && i.d.scrub != nil {
		// An embedder's integrations may quote a credential; the Set's
		// errors are scrubbed already and pass unchanged.
		err = i.d.scrub.Error(err)
	}
	if op == ops.GitHubAddComment && err == nil {
		ref, _ := args["ref"].(string)
		body, _ := args["body"].(string)
		i.d.observe(Observation{Kind: KindComment, Name: string(op), WorkItem: ref, Text: body})
	}
	return res, err
}
