package graph

import (
	"context"
	"fmt"
)

// Step statuses: what a verb reports beyond the four hook statuses.
const (
	// StepEscalated: the node escalated and is parked (StepReport, Claim).
	StepEscalated Status = "escalated"
	// StepRefused: a claim on a node that is not current (Claim).
	StepRefused Status = "refused"
	// StepNoop: a claim on a node behind the pointer (Claim).
	StepNoop Status = "noop"
)

// StepReport is the result of Start and Advance.
type StepReport struct {
	// Node is the node that was evaluated (or entered, for Start).
	Node string `json:"node"`
	// Status is pass, wait, block or escalated.
	Status   Status   `json:"status"`
	Outcome  string   `json:"outcome"`
	Messages []string `json:"messages"`
	Forced   bool     `json:"forced"`
	Attempts int      `json:"attempts"`
	// Moved reports whether the pointer moved; CurrentNode is where it is
	// now.
	Moved       bool   `json:"moved"`
	CurrentNode string `json:"currentNode"`
}

// stepReport is a StepReport with room for the messages of an ordinary
// advance, in one allocation.
type stepReport struct {
	rep  StepReport
	msgs [2]string
}

// newStepReport starts the report of an evaluation of node, carrying the
// verb's warnings.
func newStepReport(node string, warn []string) *StepReport {
	b := &stepReport{rep: StepReport{Node: node, CurrentNode: node}}
	b.rep.Messages = append(b.msgs[:0], warn...)
	return &b.rep
}

// Advance re-evaluates the work item's current node with ev (nil for a claim
// or a CLI advance, which carry no verdict) and, when the exit chain passes,
// takes the edge for its outcome, routes around declared skips, saves, and
// runs the new node's entry chain. wait parks the node; block counts an
// attempt; the same block twice in a row, or attempts reaching maxAttempts,
// escalates — the node is parked, and only a new event, a force, or a fix
// that makes the exit chain stop blocking (checked purely, counting no
// attempt) moves it.
func (r *Runtime) Advance(ctx context.Context, id string, ev *Event) (*StepReport, error) {
	s, unlock, err := r.openLocked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer r.done(ctx, s, unlock)
	return r.advance(ctx, s, ev)
}

func (r *Runtime) advance(ctx context.Context, s *session, ev *Event) (*StepReport, error) {
	st := s.st
	if st.CurrentNode == "" {
		return nil, fmt.Errorf("%s: %w", s.wi.ID, ErrNotStarted)
	}
	node, ok := r.g.Node(st.CurrentNode)
	if !ok {
		return nil, &UnknownNodeError{WorkItem: s.wi.ID, Node: st.CurrentNode, Graph: r.g.Name, Declared: r.g.IDs(), Current: true}
	}
	rep := newStepReport(node.ID, s.warn)
	lifted, parked, err := r.recheckEscalation(ctx, s, node, ev, rep)
	if err != nil {
		return nil, err
	}
	if parked {
		return rep, nil
	}

	k := r.skips(ctx, s)
	c := r.evaluate(ctx, s, node, ModeLive, ev, &k)
	rep.Outcome = c.Outcome()
	for _, m := range c.Messages() {
		rep.Messages = append(rep.Messages, m.String())
	}
	rep.Messages = append(rep.Messages, r.noteDegraded(s, node.ID, c)...)
	r.noteResults(s, node.ID, c)

	switch c.Status {
	case StatusWait:
		return r.parkWaiting(ctx, s, node, c, rep)
	case StatusBlock:
		return r.blocked(ctx, s, node, c, rep, lifted)
	}
	return r.passed(ctx, s, node, c, ev, k, rep)
}

// liftedEscalation is an escalation that a pure check found fixed: the
// parking it lifted, and where rep says so.
type liftedEscalation struct {
	parked *Parked
	msg    int
}

// recheckEscalation handles a claim on an escalated node. An escalated node
// does not retry its block (docs/decisions.md §3), but a fix that landed is not a
// retry: a pure check of the exit chain (no side effects, no attempt
// counted) tells whether the block is gone. Still blocking: the node stays
// parked (parked is true), with the current reason rather than a stale one.
// Not blocking: the parking is lifted and the node is evaluated as usual.
func (r *Runtime) recheckEscalation(ctx context.Context, s *session, node *Node, ev *Event, rep *StepReport) (lifted *liftedEscalation, parked bool, err error) {
	p := s.st.Parked
	if p == nil || !p.Escalated || p.Node != node.ID || ev != nil {
		return nil, false, nil
	}
	pk := r.skips(ctx, s)
	pc := r.evaluate(ctx, s, node, ModeCheck, nil, &pk)
	if pc.Status == StatusBlock && !pc.Results[pc.Blocking].FromRecord {
		if reason := pc.Render(); reason != "" && reason != p.Reason {
			p.Reason = reason
			if err := r.save(ctx, s); err != nil {
				return nil, false, err
			}
		}
		rep.Status, rep.Outcome = StepEscalated, string(StepEscalated)
		rep.Attempts = s.st.Record(node.ID).Attempts
		rep.Messages = append(rep.Messages, "this node escalated and is parked until its block is fixed or a human acts (a new event on the work item, or a force)", p.Reason)
		return nil, true, nil
	}
	s.st.Parked = nil
	lifted = &liftedEscalation{parked: p, msg: len(rep.Messages)}
	rep.Messages = append(rep.Messages, fmt.Sprintf("%s no longer blocks: the escalation is lifted", node.ID))
	return lifted, false, nil
}

// parkWaiting parks a node whose exit chain waits for a human.
func (r *Runtime) parkWaiting(ctx context.Context, s *session, node *Node, c ChainOutcome, rep *StepReport) (*StepReport, error) {
	reason := c.Render()
	if reason == "" {
		reason = "awaiting a human"
	}
	hook := c.BlockingHook()
	if p := s.st.Parked; p != nil && p.Node == node.ID && p.Reason == reason && p.Hook == hook && !p.Escalated {
		// Parked already, the same way (a comment on an item at a gate
		// that decides nothing): no transition, and the wait keeps the
		// time it began. As for a block (see blocked), one provisional
		// save and the event emitted after it, not journaled.
		if err := r.saveReporting(ctx, s, EventParked, LevelInfo, Field{"node", node.ID}, Field{"hook", hook}); err != nil {
			return nil, err
		}
		rep.Status = StatusWait
		rep.Attempts = s.st.Record(node.ID).Attempts
		return rep, nil
	}
	s.st.Park(node.ID, reason, false, s.now)
	s.st.Parked.Hook = hook
	if r.logging() {
		r.journal(s, EventParked, LevelInfo, Field{"node", node.ID}, Field{"hook", hook})
	}
	if err := r.save(ctx, s); err != nil {
		return nil, err
	}
	rep.Status = StatusWait
	rep.Attempts = s.st.Record(node.ID).Attempts
	return rep, nil
}

// blocked counts a blocked evaluation as an attempt and escalates the same
// block twice in a row or attempts reaching maxAttempts.
func (r *Runtime) blocked(ctx context.Context, s *session, node *Node, c ChainOutcome, rep *StepReport, lifted *liftedEscalation) (*StepReport, error) {
	st := s.st
	rendered := c.Render()
	if lifted != nil && rendered == lifted.parked.Reason {
		// The pure check passed but the live chain (a hook that runs a
		// program, say) still blocks the same way: this is the same
		// escalation, not a new one. Stay parked without counting an
		// attempt or notifying anyone again.
		st.Parked = lifted.parked
		rep.Status, rep.Outcome = StepEscalated, string(StepEscalated)
		rep.Attempts = st.Record(node.ID).Attempts
		rep.Messages = append(rep.Messages[:lifted.msg:lifted.msg], rep.Messages[lifted.msg+1:]...)
		rep.Messages = append(rep.Messages, "still the same block: the node stays escalated")
		return rep, nil
	}
	repeated := st.NoteBlock(node.ID, rendered)
	attempts := st.Record(node.ID).Attempts
	rep.Attempts = attempts
	if repeated || attempts >= node.MaxAttempts {
		st.Park(node.ID, rendered, true, s.now)
		st.Parked.Hook = c.BlockingHook()
		if r.logging() {
			r.journal(s, EventEscalated, LevelWarning, Field{"node", node.ID}, Field{"attempts", attempts}, Field{"repeated", repeated})
		}
		if err := r.save(ctx, s); err != nil {
			return nil, err
		}
		rep.Status = StepEscalated
		if repeated {
			rep.Messages = append(rep.Messages, "escalated: the same block twice in a row; a human has been asked to look")
		} else {
			rep.Messages = append(rep.Messages, fmt.Sprintf("escalated: %d attempts reached this node's limit of %d; a human has been asked to look", attempts, node.MaxAttempts))
		}
		rep.Messages = append(rep.Messages, r.escalate(ctx, s, node)...)
		return rep, nil
	}
	// A block that escalates nothing is no transition: the node, its
	// decisions and artifacts are as they were, so recompute answers the
	// same whether or not this save survives. It is saved provisionally
	// (one fsync: never torn, but a power cut may bring back the state it
	// replaced — an attempt, a claim record uncounted) and its event is not
	// journaled but emitted once the save is done: a crash in between loses
	// the report of an attempt, never a transition's (those are journaled
	// and saved with Save). One fsync and one rename per blocked claim,
	// where the journal cost a durable save and a second one to clear it.
	if err := r.saveReporting(ctx, s, EventBlocked, LevelInfo, Field{"node", node.ID}, Field{"hook", c.BlockingHook()}); err != nil {
		return nil, err
	}
	rep.Status = StatusBlock
	return rep, nil
}

// passed records what a satisfied exit chain decided and takes the edge for
// its outcome (around declared skips), entering the next node; a terminal
// node completes the walk, and a missing edge escalates.
func (r *Runtime) passed(ctx context.Context, s *session, node *Node, c ChainOutcome, ev *Event, k skipInfo, rep *StepReport) (*StepReport, error) {
	st := s.st
	if r.recordFacts(ctx, s, node, c, ev) {
		k = r.skips(ctx, s)
	}
	outcome := c.Outcome()
	st.exit(node.ID, outcome, s.stamp())
	target, found := r.g.Next(node.ID, outcome)
	if !found {
		rep.Attempts = st.Record(node.ID).Attempts
		if node.Terminal {
			if r.logging() {
				r.journal(s, EventCompleted, LevelInfo, Field{"node", node.ID})
			}
			if err := r.save(ctx, s); err != nil {
				return nil, err
			}
			rep.Status = StatusPass
			rep.Messages = append(rep.Messages, "the walk is complete")
			return rep, nil
		}
		reason := fmt.Sprintf("no declared edge from %s on '%s'", node.ID, outcome)
		st.Park(node.ID, reason, true, s.now)
		if r.logging() {
			r.journal(s, EventNoEdge, LevelWarning, Field{"node", node.ID}, Field{"outcome", outcome})
		}
		if err := r.save(ctx, s); err != nil {
			return nil, err
		}
		rep.Status = StepEscalated
		rep.Messages = append(rep.Messages, fmt.Sprintf("no declared edge from %s on outcome '%s'", node.ID, outcome))
		rep.Messages = append(rep.Messages, r.escalate(ctx, s, node)...)
		return rep, nil
	}
	target = r.routeSkips(s, target, k)
	if r.logging() {
		r.journal(s, EventAdvanced, LevelInfo, Field{"node", node.ID}, Field{"to", target}, Field{"outcome", outcome})
	}
	msgs, err := r.enter(ctx, s, target, entryEdge)
	if err != nil {
		return nil, err
	}
	rep.Status = StatusPass
	rep.Moved = true
	rep.CurrentNode = target
	rep.Attempts = st.Record(node.ID).Attempts
	if to, ok := r.g.Node(target); ok {
		rep.Messages = append(rep.Messages, to.advancedToMsg())
	} else {
		rep.Messages = append(rep.Messages, "advanced to "+target)
	}
	rep.Messages = append(rep.Messages, msgs...)
	return rep, nil
}

// escalate runs the graph's onEscalation chain for node (state is saved).
func (r *Runtime) escalate(ctx context.Context, s *session, n *Node) []string {
	if len(r.g.onEscalation) == 0 {
		return nil
	}
	c := runChain(ctx, sharedPool, r.g.onEscalation, func(hc *HookContext) {
		r.fillHookContext(hc, ctx, s, n, Entry, ModeLive, nil, nil)
		if p := s.st.Parked; p != nil {
			cp := *p
			hc.Escalation = &cp
		}
	})
	msgs := r.noteDegraded(s, n.ID, c)
	if !c.Satisfied() {
		msgs = append(msgs, "warning: the escalation chain stopped: "+c.Render())
	}
	return msgs
}

// saveReporting saves a state that is no transition provisionally and then
// emits the event that reports it, numbered but not journaled: a crash in
// between loses the report, never a transition's (see blocked).
func (r *Runtime) saveReporting(ctx context.Context, s *session, name string, level Level, fields ...Field) error {
	var e JournalEntry
	logged := r.logging()
	if logged {
		e = r.journalEntry(s, name, level, fields...)
	}
	if err := r.saveProvisionally(ctx, s); err != nil {
		return err
	}
	if logged {
		r.emitJournal(s, e, false)
	}
	return nil
}
