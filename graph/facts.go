package graph

import (
	"cmp"
	"context"
	"encoding/json"
	"sort"
)

// recordFacts records what a satisfied exit chain decided (docs/graph.md §5.8, and the
// gate verdict of docs/decisions.md §2). It reports whether skips or opt-ins changed.
func (r *Runtime) recordFacts(ctx context.Context, s *session, n *Node, c ChainOutcome, ev *Event) bool {
	at := s.stamp()
	recorded := r.recordDecisions(s, c, ev, at)
	if key := r.recordVerdict(s, n, c, ev, at); key != "" {
		recorded = append(recorded, key)
	}
	skipped, opted := r.recordSelections(s, c, at)
	// The decisions recorded here carry the skips and opt-ins they made,
	// under their signature: a verifier honours a skipped human gate only
	// on that proof.
	if len(recorded) > 0 {
		gated := gatedNames(c)
		for _, key := range recorded {
			if len(skipped) > 0 || len(opted) > 0 {
				d, _ := s.st.Decisions.Get(key)
				d.Skips, d.OptIns = append([]string(nil), skipped...), append([]string(nil), opted...)
				s.st.Decisions.Set(key, d)
			}
			r.sign(ctx, s, key, gated, ev)
		}
	}
	return len(skipped) > 0 || len(opted) > 0
}

// recordDecisions records, once each, the keyed decisions the chain's
// results report (a phase selection, a goal), and returns their keys.
func (r *Runtime) recordDecisions(s *session, c ChainOutcome, ev *Event, at string) []string {
	var recorded []string
	for _, res := range c.Results {
		f := res.Decision
		if f == nil || f.Key == "" || res.recorded {
			continue
		}
		d := Decision{At: at, Outcome: res.Outcome(), By: f.By, Rule: f.Rule, Comment: f.Comment, SessionPerPr: f.SessionPerPr}
		if ev != nil {
			d.Event = ev.ID
		}
		if f.FrozenGraph != nil {
			d.Graph = rawJSON(f.FrozenGraph)
			d.Via = f.Via
		}
		if f.Surface != "" {
			d.Surface = f.Surface
			s.st.Surface = f.Surface
		}
		if f.Goal != nil {
			d.Goal = rawJSON(f.Goal)
		}
		if s.st.Decisions.SetDefault(f.Key, d) {
			recorded = append(recorded, f.Key)
		}
	}
	return recorded
}

// recordVerdict records a human gate's verdict as a decision with
// provenance, and returns the gate's id ("" when nothing was recorded).
func (r *Runtime) recordVerdict(s *session, n *Node, c ChainOutcome, ev *Event, at string) string {
	if !n.IsHuman() || s.st.Decisions.Has(n.ID) {
		return ""
	}
	last := lastDecisive(c)
	if last == nil || last.recorded {
		return ""
	}
	d := Decision{At: at, Outcome: c.Outcome(), Via: "event"}
	if f := last.Decision; f != nil {
		d.By, d.Rule, d.Comment = f.By, f.Rule, f.Comment
	}
	if ev != nil {
		d.Event = ev.ID
		if d.Comment == "" && len(ev.Comments) > 0 {
			d.Comment = ev.Comments[len(ev.Comments)-1].ID
		}
	}
	s.st.Decisions.Set(n.ID, d)
	return n.ID
}

// recordSelections records the skips and opt-ins the chain's decisions
// declare, for nodes not yet entered that may take them, and returns the
// nodes newly skipped and selected (sorted).
func (r *Runtime) recordSelections(s *session, c ChainOutcome, at string) (skipped, opted []string) {
	st := s.st
	for _, res := range c.Results {
		f := res.Decision
		if f == nil {
			continue
		}
		for node, d := range f.Skips {
			t, ok := r.g.Node(node)
			if !ok || !t.Skippable || t.Required || st.Record(node).EnteredAt != "" {
				continue
			}
			d.Via, d.Token, d.At = cmp.Or(d.Via, "selection"), cmp.Or(d.Token, node), at
			if st.Skips.SetDefault(node, d) {
				skipped = append(skipped, node)
			}
		}
		for node, o := range f.OptIns {
			t, ok := r.g.Node(node)
			if !ok || !t.OptIn || st.Record(node).EnteredAt != "" {
				continue
			}
			o.Via, o.Token, o.At = cmp.Or(o.Via, "selection"), cmp.Or(o.Token, node), at
			if st.OptIns.SetDefault(node, o) {
				opted = append(opted, node)
			}
		}
	}
	if len(skipped) > 0 {
		sort.Strings(skipped)
		r.journal(s, EventSkipsDeclared, LevelInfo, Field{"via", "selection"}, Field{"nodes", skipped})
	}
	if len(opted) > 0 {
		sort.Strings(opted)
		r.journal(s, EventOptInsSelected, LevelInfo, Field{"via", "selection"}, Field{"nodes", opted})
	}
	return skipped, opted
}

// rawJSON serialises hook data for a decision record (nil when it cannot).
func rawJSON(v any) json.RawMessage {
	b, err := marshalNoEscape(v)
	if err != nil {
		return nil
	}
	return b
}

// lastDecisive is the last result carrying a routing outcome.
func lastDecisive(c ChainOutcome) *HookResult {
	for i := len(c.Results) - 1; i >= 0; i-- {
		if c.Results[i].Route != "" {
			return &c.Results[i]
		}
	}
	return nil
}
