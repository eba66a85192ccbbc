package daemon

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/theloop-dev/theloop/graph"
)

// Reactions never hold an item's queue.
//
// The reactions on a triggering comment (routing.reactions: started, then
// completed or error) tell the human that loopd picked the event up; nothing
// in the handling reads them, and the agent must not wait for GitHub to hear
// a comment. They used to be posted, with the integrations' retries, before
// the event was acknowledged: with GitHub refusing every call, one event per
// three seconds reached the agent (600 comments: half an hour).
//
// The reactor posts them in the background instead: one goroutine per event
// that reacts, at most maxInFlight at once, each reaction with its own
// deadline and the integrations' bounded retries. An event that finds every
// slot taken gets no reactions (counted, and reported once per
// reactionReportEvery), and its handling goes on: a GitHub outage costs
// emoji, never the agent's time. A reaction is not an effect of the event
// the queue must keep (the event is acknowledged once the paste and its mark
// are durable), so reactions pending at a crash are not replayed.

// Reactor bounds.
const (
	reactionsInFlight   = 64
	reactionTimeout     = 30 * time.Second
	reactionReportEvery = time.Minute
)

// reactor posts reactions in the background (see above). It owns its
// goroutines: close stops them and waits.
type reactor struct {
	record emitFunc
	now    func() time.Time
	slots  chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	skipped    atomic.Int64 // events that found no slot since the last report
	mu         sync.Mutex
	nextReport time.Time
}

func newReactor(limit int, record emitFunc, now func() time.Time) *reactor {
	ctx, cancel := context.WithCancel(context.Background())
	return &reactor{record: record, now: now, slots: make(chan struct{}, limit), ctx: ctx, cancel: cancel}
}

// reaction is one event's pair of reactions in flight: the started one
// (posted at once) and the closing one (posted after it, once finish names
// it).
type reaction struct {
	final chan string
}

// finish names the closing reaction ("" posts none). It never blocks.
func (r *reaction) finish(content string) {
	if r != nil {
		r.final <- content
	}
}

// start posts started (unless "") in the background and returns the handle
// the closing reaction is named through, or nil when no slot was free (the
// event then gets no reactions) or the reactor is closed. post is called
// with each content in order, under a deadline.
func (rc *reactor) start(started string, post func(ctx context.Context, content string)) *reaction {
	if rc.ctx.Err() != nil {
		return nil
	}
	select {
	case rc.slots <- struct{}{}:
	default:
		rc.skip()
		return nil
	}
	r := &reaction{final: make(chan string, 1)}
	rc.wg.Add(1)
	go func() {
		defer func() { <-rc.slots; rc.wg.Done() }()
		once := func(content string) {
			if content == "" {
				return
			}
			ctx, cancel := context.WithTimeout(rc.ctx, reactionTimeout)
			defer cancel()
			post(ctx, content)
		}
		once(started)
		select {
		case content := <-r.final:
			once(content)
		case <-rc.ctx.Done():
		}
	}()
	return r
}

// skip counts an event left without reactions and reports the count at
// most once per reactionReportEvery.
func (rc *reactor) skip() {
	n := rc.skipped.Add(1)
	now := rc.now()
	rc.mu.Lock()
	report := !now.Before(rc.nextReport)
	if report {
		rc.nextReport = now.Add(reactionReportEvery)
		rc.skipped.Add(-n)
	}
	rc.mu.Unlock()
	if report {
		rc.record("reaction.skipped", graph.LevelWarning, graph.Field{Key: "events", Value: n},
			graph.Field{Key: "reason", Value: "reactions-in-flight"}, graph.Field{Key: "limit", Value: cap(rc.slots)})
	}
}

// close stops posting (reactions in flight are abandoned at their next
// request) and waits for the goroutines.
func (rc *reactor) close() {
	rc.cancel()
	rc.wg.Wait()
}
