package daemon

import (
	"errors"
	"sync"

	"github.com/theloop-dev/theloop/graph"

	"github.com/theloop-dev/theloop/loop/daemon/outbox"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// start starts the performer of the sessions' requests (package
// loop/daemon/outbox): the agent's session holds no credential, and a claim
// in its outbox is a request, not a fact — the graph link recomputes the
// work item under loopd's own trust anchor and derives the ticket's effects
// (recompute.go), which are done here with the daemon's integrations once
// the session's own work items are checked. The returned stop waits for it.
func (t *ticketEffects) start(stateRoot string, reg *sessions.Registry, link *graphLink, integ graph.Integrations, sink graph.Sink, clock graph.Clock) (func(), error) {
	var judge outbox.Judge
	if link != nil {
		judge = outbox.JudgeFunc(link.judge)
	}
	p, err := outbox.New(outbox.Config{StateRoot: stateRoot},
		outbox.Deps{Integrations: integ, Sessions: sessionWorkItems(reg), Judge: judge, Sink: sink, Clock: clock})
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.p = p
	t.mu.Unlock()
	p.Start()
	return func() { _ = p.Close() }, nil
}

// ticketEffects holds the outbox's performer while it runs.
type ticketEffects struct {
	mu sync.Mutex
	p  *outbox.Performer
}

// PendingTicketEffects counts the intents waiting in the outbox for a work
// item (a ref string); 0 when the daemon is not running.
func (d *Daemon) PendingTicketEffects(ref string) int {
	d.outbox.mu.Lock()
	p := d.outbox.p
	d.outbox.mu.Unlock()
	if p == nil {
		return 0
	}
	return p.Pending(ref)
}

// sessionWorkItems is what a session's intents may land on: its work item,
// the work item it serves (a pull request's own session), and the pull
// requests linked to it. A session id from before a fresh respawn
// (Record.Fallbacks) still names its work item, so that intents written just
// before the respawn are performed.
func sessionWorkItems(reg *sessions.Registry) outbox.SessionsFunc {
	return func(sessionID string) ([]workitem.Ref, error) { return workItemsOfSession(reg, sessionID) }
}

func workItemsOfSession(reg *sessions.Registry, sessionID string) ([]workitem.Ref, error) {
	rec, err := reg.BySessionID(sessionID)
	if errors.Is(err, sessions.ErrNoRecord) {
		recs, _ := reg.List()
		for _, r := range recs {
			for _, fb := range r.Fallbacks {
				if fb.PreviousSessionID == sessionID {
					rec, err = r, nil
				}
			}
		}
	}
	if err != nil {
		return nil, err
	}
	refs := []workitem.Ref{rec.Item}
	if !rec.Parent.IsZero() {
		refs = append(refs, rec.Parent)
	}
	for _, l := range rec.PullRequests {
		refs = append(refs, l.PR)
	}
	return refs, nil
}
