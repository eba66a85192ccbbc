package queue

import (
	"context"
	"fmt"
	"time"
)

// Stats describes the queue for operators and metrics.
type Stats struct {
	// Depth is how many events are kept and not yet acknowledged.
	Depth uint64
	// Oldest is when the oldest of them was kept (zero when Depth is 0).
	Oldest time.Time
	// Dead is how many dead letters wait for a replay.
	Dead uint64
}

// Stats reads the events and dead-letter streams' state. The events stream
// is a work queue (acknowledged events are removed), so its first message
// is the oldest one not yet handled.
//
// Stats fails while the store cannot write (Persisting): the stream's
// state is still readable then, but a queue that takes no event is not up,
// and the watchdog, /healthz and theloop_queue_up all ask here.
func (q *Queue) Stats(ctx context.Context) (Stats, error) {
	if err := q.health.get(); err != nil {
		return Stats{}, err
	}
	ev, err := q.events.Info(ctx)
	if err != nil {
		return Stats{}, fmt.Errorf("queue: events stream: %w", err)
	}
	st := Stats{Depth: ev.State.Msgs}
	if st.Depth > 0 {
		st.Oldest = ev.State.FirstTime
	}
	dead, err := q.dead.Info(ctx)
	if err != nil {
		return st, fmt.Errorf("queue: dead-letter stream: %w", err)
	}
	st.Dead = dead.State.Msgs
	return st, nil
}
