package graph

import (
	"context"
	"fmt"
)

func (r *Runtime) hookContext(ctx context.Context, s *session, n *Node, b Boundary, mode Mode, ev *Event, k *skipInfo) *HookContext {
	hc := new(HookContext)
	r.fillHookContext(hc, ctx, s, n, b, mode, ev, k)
	return hc
}

// fillHookContext writes the base context of n's chain at boundary b into
// hc (which the caller zeroed).
func (r *Runtime) fillHookContext(hc *HookContext, ctx context.Context, s *session, n *Node, b Boundary, mode Mode, ev *Event, k *skipInfo) {
	*hc = HookContext{
		WorkItem: s.wi,
		Node:     n,
		Boundary: b,
		Mode:     mode,
		Session:  s.st.Session,
		Event:    ev,
		Config:   r.opts.Config,
		Surface:  s.st.Surface,
		Graph:    r.g,
		Now:      s.now,
		observe:  r.opts.HookObserver,
	}
	if mode == ModeCheck {
		if s.ro == nil {
			s.ro = &readOnly{Artifacts: s.arts}
		}
		hc.Artifacts = s.ro
	} else {
		hc.Artifacts = s.arts
		hc.Integrations = r.opts.Integrations
		hc.Commands = r.opts.Commands
		hc.RepoCommands = r.opts.RepoCommands
		hc.Deliver = r.opts.Deliver
	}
	if b == Exit && k != nil {
		if s.exitGen != k.gen {
			// Empty sets stay nil (a nil map reads as empty): most
			// items have no decision or skip yet.
			s.decisions = nil
			if n := s.st.Decisions.Len(); n > 0 {
				s.decisions = make(map[string]Decision, n)
				for _, key := range s.st.Decisions.Keys() {
					// With a verifier, hooks see only the decisions that count.
					if r.verify(ctx, s, key) != nil {
						continue
					}
					s.decisions[key], _ = s.st.Decisions.Get(key)
				}
			}
			s.skipped = r.skippedArtifacts(*k)
			s.skippedNodes = nil
			if len(k.decl) > 0 {
				s.skippedNodes = make(map[string]bool, len(k.decl))
				for id := range k.decl {
					s.skippedNodes[id] = true
				}
			}
			s.exitGen = k.gen
		}
		hc.Decisions = s.decisions
		hc.SkippedArtifacts = s.skipped
		hc.SkippedNodes = s.skippedNodes
	}
}

// standingDecision returns the recorded verdict of a human gate when it
// still stands: its outcome leads forward (to a later node, or nowhere from
// a terminal node). A verdict that sent the work item back (changes
// requested) does not satisfy the gate; the gate waits for a new review.
func (r *Runtime) standingDecision(st *State, n *Node) (Decision, bool) {
	if !n.IsHuman() {
		return Decision{}, false
	}
	d, ok := st.Decisions.Get(n.ID)
	if !ok || d.Outcome == "" {
		return Decision{}, false
	}
	to, ok := r.g.Next(n.ID, d.Outcome)
	if !ok {
		return d, n.Terminal
	}
	if target, _ := r.g.Node(to); target != nil && target.Index > n.Index {
		return d, true
	}
	return Decision{}, false
}

// standing returns the outcome of a human gate whose recorded decision
// still stands, without running its chain.
func (r *Runtime) standing(st *State, n *Node) (ChainOutcome, bool) {
	d, ok := r.standingDecision(st, n)
	if !ok {
		return ChainOutcome{}, false
	}
	res := PassWith(d.Outcome, nil)
	res.recorded = true
	res.Hook = "(recorded decision)"
	text := "recorded decision: " + d.Outcome + decisionBy(d)
	if d.At != "" {
		text += " at " + d.At
	}
	res.Messages = []Message{{Text: text, Severity: SeverityInfo}}
	return ChainOutcome{Status: StatusPass, Results: []HookResult{res}, Blocking: -1}, true
}

// evaluate runs n's exit chain (or honours its standing decision). A
// standing decision the verifier refuses blocks without an event; an
// inbound event drops the refused record and decides the gate afresh.
func (r *Runtime) evaluate(ctx context.Context, s *session, n *Node, mode Mode, ev *Event, k *skipInfo) ChainOutcome {
	if c, ok := r.standing(s.st, n); ok {
		err := r.verify(ctx, s, n.ID)
		if err == nil {
			return c
		}
		if ev == nil {
			return refused(n, err)
		}
		s.st.Decisions.Delete(n.ID)
		delete(s.verdicts, n.ID)
		s.exitGen = 0
		r.journal(s, EventDecisionRefused, LevelWarning, Field{"node", n.ID}, Field{"error", err.Error()})
	}
	return runChain(ctx, sharedPool, n.Exit, func(hc *HookContext) { r.fillHookContext(hc, ctx, s, n, Exit, mode, ev, k) })
}

func decisionBy(d Decision) string {
	if d.By == "" {
		return ""
	}
	return " by " + d.By
}

// noteResults records a live exit-chain evaluation in the node's record:
// each hook's result (R8.1) and the hooks that reported skip, which also go
// to the event log (R2.5, R8.7). An evaluation like the last one changes
// nothing and copies nothing (the claim and Stop-hook hot path).
func (r *Runtime) noteResults(s *session, node string, c ChainOutcome) {
	rec := s.st.Record(node)
	prev, prevHooks := rec.SkippedHooks, rec.Hooks
	n, same, logging := 0, len(prevHooks) == len(c.Results), r.logging()
	for i, res := range c.Results {
		if same {
			h := prevHooks[i]
			same = h.Hook == res.Hook && h.Status == res.Status && h.Outcome == res.Route && h.Degraded == res.Degraded
		}
		if res.Status == StatusSkip {
			same = same && n < len(prev) && prev[n] == res.Hook
			n++
			if logging { // the fields are not even built for a discarding sink
				r.journal(s, EventHookSkipped, LevelInfo, Field{"node", node}, Field{"boundary", string(Exit)}, Field{"hook", res.Hook})
			}
		}
	}
	if same && n == len(prev) {
		return // the record already says so: no copy on the hot path
	}
	var skipped []string
	if n > 0 {
		skipped = make([]string, 0, n)
	}
	var hooks []HookRecord
	if len(c.Results) > 0 {
		hooks = make([]HookRecord, 0, len(c.Results))
	}
	for _, res := range c.Results {
		if res.Status == StatusSkip {
			skipped = append(skipped, res.Hook)
		}
		hooks = append(hooks, HookRecord{Hook: res.Hook, Status: res.Status, Outcome: res.Route, Degraded: res.Degraded})
	}
	s.st.update(node, func(rec *NodeRecord) { rec.SkippedHooks, rec.Hooks = skipped, hooks })
}

func (r *Runtime) noteDegraded(s *session, node string, c ChainOutcome) []string {
	var msgs []string
	for _, res := range c.Degraded() {
		e := res.Degraded
		msgs = append(msgs, fmt.Sprintf("warning: %s did not complete: %s", res.Hook, e))
		r.emit(s, EventHookDegraded, LevelWarning, Field{"node", node}, Field{"hook", res.Hook}, Field{"error", e})
	}
	return msgs
}
