package daemon

import (
	"errors"

	"github.com/theloop-dev/theloop/loop/daemon/outbox"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// startOutbox starts the performer of the sessions' requests (package
// loop/daemon/outbox): the agent's session holds no credential, and a claim
// in its outbox is a request, not a fact — the graph link recomputes the
// work item under loopd's own trust anchor and derives the ticket's effects
// (recompute.go), which are done here with the daemon's integrations once
// the session's own work items are checked. The returned stop waits for it.
func (d *Daemon) startOutbox() (func(), error) {
	var judge outbox.Judge
	if d.link != nil {
		judge = outbox.JudgeFunc(d.link.judge)
	}
	p, err := outbox.New(outbox.Config{StateRoot: d.cfg.StateRoot},
		outbox.Deps{Integrations: d.integ, Sessions: outbox.SessionsFunc(d.sessionWorkItems), Judge: judge, Sink: d.sink, Clock: d.deps.Clock})
	if err != nil {
		return nil, err
	}
	d.outboxMu.Lock()
	d.outbox = p
	d.outboxMu.Unlock()
	p.Start()
	return func() { _ = p.Close() }, nil
}

// PendingTicketEffects counts the intents waiting in the outbox for a work
// item (a ref string); 0 when the daemon is not running.
func (d *Daemon) PendingTicketEffects(ref string) int {
	d.outboxMu.Lock()
	p := d.outbox
	d.outboxMu.Unlock()
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
func (d *Daemon) sessionWorkItems(sessionID string) ([]workitem.Ref, error) {
	rec, err := d.reg.BySessionID(sessionID)
	if errors.Is(err, sessions.ErrNoRecord) {
		recs, _ := d.reg.List()
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
