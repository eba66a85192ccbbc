package graph

import (
	"context"
	"fmt"
	"strings"
)

// SkipRejection is a token DeclareSkips refused, and why.
type SkipRejection struct {
	Token string `json:"token"`
	Why   string `json:"why"`
}

// SkipResult is what DeclareSkips returns.
type SkipResult struct {
	WorkItem string          `json:"workItem"`
	Declared []string        `json:"declared"`
	Rejected []SkipRejection `json:"rejected"`
	Reason   string          `json:"reason"`
	Warnings []string        `json:"warnings"`
}

// skipInfo is the effective skip set of a state: honoured declarations plus
// unselected opt-ins.
type skipInfo struct {
	decl    map[string]SkipDecl
	invalid map[string]bool
	// unproven holds human gates declared skipped that no verified
	// decision declares skipped (only with a verifier).
	unproven map[string]bool
	// gen tells skip sets of one verb apart (Runtime.skips numbers them
	// from 1), so that a session memoises what it derives from one.
	gen uint32
}

func (k skipInfo) has(id string) bool { _, ok := k.decl[id]; return ok }

func (k *skipInfo) declare(id string, d SkipDecl) {
	if k.decl == nil {
		k.decl = map[string]SkipDecl{}
	}
	k.decl[id] = d
}

// skips filters the state's declarations through the compiled graph: a
// declaration is honoured only for a declared, skippable, non-required node;
// every opt-in node not selected is skipped with via "not-selected". With a
// verifier, a human gate counts as skipped only when a verified decision
// (phase selection) lists it among its skips, and an opt-in node a verified
// decision selected stays selected whatever the state says: graph-state.json
// is the agent's to edit, and a skip is as good as a pass.
func (r *Runtime) skips(ctx context.Context, s *session) skipInfo {
	st := s.st
	// The maps are made on first write: most states declare nothing, and
	// a nil map reads as empty.
	s.skipGen++
	k := skipInfo{gen: s.skipGen}
	var provenSkips, provenOptIns map[string]bool
	if r.opts.Verifier != nil {
		provenSkips, provenOptIns = map[string]bool{}, map[string]bool{}
		for _, key := range st.Decisions.Keys() {
			if r.verify(ctx, s, key) != nil {
				continue
			}
			d, _ := st.Decisions.Get(key)
			for _, n := range d.Skips {
				provenSkips[n] = true
			}
			for _, n := range d.OptIns {
				provenOptIns[n] = true
			}
		}
	}
	for _, id := range st.Skips.Keys() {
		d, _ := st.Skips.Get(id)
		n, ok := r.g.Node(id)
		if !ok || !n.Skippable || n.Required {
			if k.invalid == nil {
				k.invalid = map[string]bool{}
			}
			k.invalid[id] = true
			continue
		}
		if provenSkips != nil && n.IsHuman() && !provenSkips[id] {
			if k.unproven == nil {
				k.unproven = map[string]bool{}
			}
			k.unproven[id] = true
			continue
		}
		k.declare(id, d)
	}
	for _, n := range r.g.nodes {
		if !n.OptIn {
			continue
		}
		if _, ok := k.decl[n.ID]; ok {
			continue
		}
		if st.OptIns.Has(n.ID) || provenOptIns[n.ID] {
			continue
		}
		k.declare(n.ID, SkipDecl{Via: "not-selected"})
	}
	return k
}

// skippedArtifacts is every artifact name produced by a skipped node (nil
// when there is none).
func (r *Runtime) skippedArtifacts(k skipInfo) map[string]bool {
	var out map[string]bool
	if len(k.decl) == 0 {
		return nil
	}
	for _, n := range r.g.nodes {
		if !k.has(n.ID) {
			continue
		}
		for _, name := range n.ProducedNames() {
			if out == nil {
				out = map[string]bool{}
			}
			out[name] = true
		}
	}
	return out
}

// skipProvenance renders why a node is skipped, for reports and logs.
func skipProvenance(d SkipDecl) string {
	if d.Via == "not-selected" {
		return "not selected — an opt-in phase, off unless it is ticked at `phase-selection`"
	}
	via := d.Via
	if via == "" {
		via = "unknown"
	}
	s := "skipped by declaration — via " + via
	if d.Token != "" {
		s += ", token '" + d.Token + "'"
	}
	if d.By != "" {
		s += ", by " + d.By
	}
	if d.Reason != "" {
		s += ", reason: " + d.Reason
	}
	return s
}

// routeSkips walks from id around every skipped node along its `skipped`
// edge, recording each as skipped, and returns the first node that is not
// skipped. A skipped node without a `skipped` edge (impossible in a compiled
// graph) is landed on: fail closed.
func (r *Runtime) routeSkips(s *session, id string, k skipInfo) string {
	visited := map[string]bool{}
	for k.has(id) && !visited[id] {
		visited[id] = true
		to, ok := r.g.Next(id, OutcomeSkipped)
		if !ok {
			break
		}
		now := s.now
		s.st.update(id, func(rec *NodeRecord) {
			if rec.EnteredAt == "" {
				rec.EnteredAt = timestamp(now)
			}
			rec.Outcome = OutcomeSkipped
			rec.ExitedAt = timestamp(now)
		})
		d := k.decl[id]
		fields := []Field{{"node", id}}
		for _, kv := range [][2]string{{"via", d.Via}, {"token", d.Token}, {"by", d.By}, {"reason", d.Reason}, {"at", d.At}} {
			if kv[1] != "" {
				fields = append(fields, Field{kv[0], kv[1]})
			}
		}
		r.journal(s, EventNodeSkipped, LevelInfo, fields...)
		id = to
	}
	return id
}

// DeclareSkips records skip declarations for nodes or skip sets (tokens)
// that the work item has not reached. A reason is required. A node already
// entered, current, or behind the pointer is rejected: a skip is a plan,
// not an amnesty.
func (r *Runtime) DeclareSkips(ctx context.Context, id string, tokens []string, reason, actor string) (*SkipResult, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" {
		return nil, fmt.Errorf("%w: an unexplained skip is refused. Record why this work item does not walk the phase", ErrReasonRequired)
	}
	type pick struct{ node, token string }
	var picks []pick
	seen := map[string]bool{}
	res := &SkipResult{Reason: reason, Declared: []string{}, Rejected: []SkipRejection{}, Warnings: []string{}}
	for _, t := range tokens {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		if members, ok := r.g.SkipSet(t); ok {
			for _, m := range members {
				if !seen[m] {
					seen[m] = true
					picks = append(picks, pick{m, t})
				}
			}
			continue
		}
		if n, ok := r.g.Node(t); ok && n.Skippable && !n.Required {
			if !seen[t] {
				seen[t] = true
				picks = append(picks, pick{t, t})
			}
			continue
		}
		res.Rejected = append(res.Rejected, SkipRejection{Token: t, Why: "not a skippable node or shipped skip set"})
	}
	if len(picks) == 0 && len(res.Rejected) == 0 {
		return nil, fmt.Errorf("%w: name at least one node or skip set to declare", ErrReasonRequired)
	}
	s, unlock, err := r.openLocked(ctx, id)
	if err != nil {
		return nil, err
	}
	defer r.done(ctx, s, unlock)
	res.WorkItem = s.wi.Ref
	if res.WorkItem == "" {
		res.WorkItem = s.wi.ID
	}
	if actor == "" {
		actor = "(shell)"
	}
	cur := s.st.CurrentNode
	at := timestamp(s.now)
	for _, p := range picks {
		if n, _ := r.g.Node(p.node); r.opts.Verifier != nil && n != nil && n.IsHuman() {
			res.Rejected = append(res.Rejected, SkipRejection{Token: p.node, Why: "a human gate is skipped only by a signed phase selection, not from the command line"})
			continue
		}
		if p.node == cur || s.st.Record(p.node).EnteredAt != "" || (cur != "" && r.g.Before(p.node, cur)) {
			res.Rejected = append(res.Rejected, SkipRejection{Token: p.node, Why: "already entered or behind the pointer — a skip is a plan, not an amnesty"})
			continue
		}
		if s.st.Skips.SetDefault(p.node, SkipDecl{Via: "cli", Token: p.token, By: actor, Reason: reason, At: at}) {
			res.Declared = append(res.Declared, p.node)
		}
	}
	if len(res.Declared) > 0 {
		r.journal(s, EventSkipsDeclared, LevelInfo, Field{"via", "cli"}, Field{"actor", actor}, Field{"reason", reason}, Field{"nodes", res.Declared})
		if err := r.save(ctx, s); err != nil {
			return nil, err
		}
		if r.opts.Auditor != nil {
			if err := r.opts.Auditor.SkipsDeclared(ctx, s.wi, res.Declared, actor, reason); err != nil {
				res.Warnings = append(res.Warnings, "could not record the audit trail: "+err.Error())
			}
		}
	}
	for _, rj := range res.Rejected {
		r.emit(s, EventSkipsRejected, LevelWarning, Field{"token", rj.Token}, Field{"via", "cli"}, Field{"why", rj.Why})
	}
	return res, nil
}
