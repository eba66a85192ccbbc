package graph

import (
	"context"
	"fmt"
	"strings"
)

// ForceResult is what Force returns.
type ForceResult struct {
	WorkItem string   `json:"workItem"`
	FromNode string   `json:"fromNode"`
	ToNode   string   `json:"toNode"`
	Reason   string   `json:"reason"`
	Warnings []string `json:"warnings"`
	// Entry is the outcome of the target's entry chain.
	Messages []string `json:"messages"`
}

// ForceRequest is what a Force asks for.
type ForceRequest struct {
	// To is the node to move to; it must be declared.
	To string
	// Reason says why; it is required (an unexplained override is refused).
	Reason string
	// Actor names who forces; "" is recorded as "(shell)".
	Actor string
}

// Force moves the pointer to node req.To regardless of gates — the audited
// escape hatch. It needs a reason, refuses undeclared nodes, warns about an
// undeclared edge and a bypassed required node, enters the target (running
// its entry chain, also when going backwards) and is recorded in state, the
// event log and, through the Auditor, the execution log and the ticket. It
// never forges a verdict: Status with recompute still reports the bypassed
// gates as unmet.
func (r *Runtime) Force(ctx context.Context, id string, req ForceRequest) (*ForceResult, error) {
	to, reason, actor := req.To, strings.TrimSpace(req.Reason), req.Actor
	if reason == "" {
		return nil, fmt.Errorf("%w: an unexplained override is refused. Record why you are bypassing the gate", ErrReasonRequired)
	}
	target, ok := r.g.Node(to)
	if !ok {
		return nil, &UnknownNodeError{WorkItem: id, Node: to, Graph: r.g.Name, Declared: r.g.IDs()}
	}
	s, unlock, err := r.openLocked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer r.done(ctx, s, unlock)
	from := s.st.CurrentNode
	if from == "" {
		from = r.g.Start
	}
	var warnings []string
	// Forcing the current node re-enters it (a reset: attempts counted
	// anew, parking cleared); that is not a walk outside the model.
	if from != to && !r.declaredEdge(from, to) {
		warnings = append(warnings, fmt.Sprintf("%s → %s is not a declared edge; you are deliberately outside the model", from, to))
	}
	if fn, ok := r.g.Node(from); ok && fn.Required && from != to {
		warnings = append(warnings, fmt.Sprintf("node '%s' is marked required — this force bypasses a guarantee the process treats as mandatory", from))
	} else if target.Required && from != to {
		warnings = append(warnings, fmt.Sprintf("node '%s' is marked required — this force bypasses a guarantee the process treats as mandatory", to))
	}
	for _, gate := range r.bypassedGates(s, from, to) {
		warnings = append(warnings, fmt.Sprintf("human gate '%s' is bypassed — no recorded human decision lets the work item past it", gate))
	}
	if actor == "" {
		actor = "(shell)"
	}
	rec := ForceRecord{From: from, To: to, Reason: reason, Actor: actor, At: timestamp(s.now), Warnings: append([]string{}, warnings...)}
	s.st.Forced = append(s.st.Forced, rec)
	res := &ForceResult{WorkItem: s.wi.Ref, FromNode: from, ToNode: to, Reason: reason, Warnings: warnings, Messages: append([]string{}, s.warn...)}
	if res.WorkItem == "" {
		res.WorkItem = s.wi.ID
	}
	// The event is saved with the forced state by enter and logged after
	// it: never an event for a force that did not happen.
	r.journal(s, EventForced, LevelWarning, Field{"from", from}, Field{"to", to}, Field{"actor", actor}, Field{"reason", reason})
	msgs, err := r.enter(ctx, s, to, entryForce)
	if err != nil {
		return nil, err
	}
	res.Messages = append(res.Messages, msgs...)
	if r.opts.Auditor != nil {
		if err := r.opts.Auditor.Forced(ctx, s.wi, rec); err != nil {
			res.Warnings = append(res.Warnings, "could not record the audit trail: "+err.Error())
		}
	}
	return res, nil
}

// bypassedGates names, in declaration order, the human gates a force from
// → to walks past (R10.9): from itself when it is a human gate, and every
// human gate declared between from and to, when to lies ahead. A gate the
// work item declared skipped is not bypassed; forcing backwards or in place
// bypasses nothing.
func (r *Runtime) bypassedGates(s *session, from, to string) []string {
	if from == to || !r.g.Before(from, to) {
		return nil
	}
	fn, _ := r.g.Node(from)
	tn, _ := r.g.Node(to)
	var out []string
	for _, n := range r.g.nodes[fn.Index:tn.Index] {
		if n.IsHuman() && !s.st.Skips.Has(n.ID) {
			out = append(out, n.ID)
		}
	}
	return out
}

func (r *Runtime) declaredEdge(from, to string) bool {
	if next, ok := r.g.Next(from, string(StatusPass)); ok && next == to {
		return true
	}
	for _, e := range r.g.edges {
		if e.From == from && e.To == to {
			return true
		}
	}
	return false
}
