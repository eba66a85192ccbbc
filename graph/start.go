package graph

import (
	"context"
	"fmt"
)

// Start enters the graph's start node (routing around declared skips) and
// runs its entry chain. The pointer is saved before the chain runs. Start is
// idempotent: for a work item that already has a pointer it returns
// (nil, nil) and changes nothing.
func (r *Runtime) Start(ctx context.Context, id string) (*StepReport, error) {
	s, unlock, err := r.openLocked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer r.done(ctx, s, unlock)
	if s.st.CurrentNode != "" {
		return nil, nil
	}
	node := r.routeSkips(s, r.g.Start, r.skips(ctx, s))
	if r.g.Name != "" || s.st.Loop == "" {
		s.st.Loop = r.g.Name
	}
	rep := &StepReport{Node: node, Status: StatusPass, Outcome: string(StatusPass), Messages: []string{}, Moved: true}
	r.journal(s, EventStarted, LevelInfo, Field{"node", node})
	msgs, err := r.enter(ctx, s, node, entryStart)
	if err != nil {
		return nil, err
	}
	rep.Messages = append(append(rep.Messages, s.warn...), msgs...)
	rep.Attempts = s.st.Record(node).Attempts
	rep.CurrentNode = s.st.CurrentNode
	return rep, nil
}

// How a node is entered.
type entryKind int

const (
	entryStart entryKind = iota
	entryEdge
	entryForce
)

// enter moves the pointer to id, saves, and runs id's entry chain. It
// returns report messages (degradations, an entry chain that stopped).
func (r *Runtime) enter(ctx context.Context, s *session, id string, how entryKind) ([]string, error) {
	forced := how == entryForce
	n, _ := r.g.Node(id)
	s.st.Enter(id, s.now)
	if forced {
		s.st.update(id, func(rec *NodeRecord) { rec.Forced = true })
	}
	// A gate entered again is reviewed again: its previous verdict no
	// longer stands.
	s.st.Decisions.Delete(id)
	if err := r.save(ctx, s); err != nil {
		return nil, err
	}
	if n.IsHuman() && how == entryEdge {
		res, sess := r.resolveSession(s.st, n)
		fields := []Field{{"node", id}, {"resolution", res}}
		if sess != "" {
			fields = append(fields, Field{"session", sess})
		}
		r.emit(s, EventGateSession, LevelInfo, fields...)
	}
	// A node without entry hooks passes without building their context
	// (runChain).
	c := runChain(ctx, sharedPool, n.Entry, func(hc *HookContext) { r.fillHookContext(hc, ctx, s, n, Entry, ModeLive, nil, nil) })
	msgs := r.noteDegraded(s, id, c)
	for _, res := range c.Results {
		if res.Status == StatusSkip && r.logging() {
			// The state was saved before the entry chain ran: entry skips
			// go to the event log only.
			r.emit(s, EventHookSkipped, LevelInfo, Field{"node", id}, Field{"boundary", string(Entry)}, Field{"hook", res.Hook})
		}
	}
	if !c.Satisfied() {
		msgs = append(msgs, fmt.Sprintf("warning: the entry chain of %s stopped: %s", id, c.Render()))
		r.emit(s, EventEntryIncomplete, LevelWarning, Field{"node", id}, Field{"hook", c.BlockingHook()})
	}
	return msgs, nil
}

// resolveSession decides which agent session a human gate uses (docs/graph.md §5.9).
func (r *Runtime) resolveSession(st *State, n *Node) (string, string) {
	if n.Session != SessionInherit {
		return "new", ""
	}
	if st.Session != nil && (st.Session.Alive == nil || *st.Session.Alive) {
		return "inherited", st.Session.ID
	}
	return "fresh-with-artifacts", ""
}
