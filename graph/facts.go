package graph

import (
	"context"
	"encoding/json"
	"sort"
)

// recordFacts records what a satisfied exit chain decided (§5.8, and the
// gate verdict of decision 2). It reports whether skips or opt-ins changed.
func (r *Runtime) recordFacts(ctx context.Context, s *session, n *Node, c ChainOutcome, ev *Event) bool {
	st := s.st
	at := timestamp(s.now)
	var recorded []string
	for _, res := range c.Results {
		key := res.DataString("decision")
		if key == "" || res.Data["recorded"] == true {
			continue
		}
		d := Decision{At: at, Outcome: res.Outcome(), By: res.DataString("by"), Comment: res.DataString("comment")}
		if ev != nil {
			d.Event = ev.ID
		}
		if fg, ok := res.Data["frozenGraph"]; ok && fg != nil {
			d.Graph = rawJSON(fg)
			d.Via = res.DataString("selectionSource")
		}
		if sf := res.DataString("surface"); sf != "" {
			d.Surface = sf
			st.Surface = sf
		}
		d.SessionPerPr = res.DataString("sessionPerPr")
		if g, ok := res.Data["goal"]; ok && g != nil {
			d.Goal = rawJSON(g)
		}
		if st.Decisions.SetDefault(key, d) {
			recorded = append(recorded, key)
		}
	}
	// A human gate's verdict is a recorded decision with provenance.
	if n.IsHuman() && !st.Decisions.Has(n.ID) {
		if last := lastDecisive(c); last != nil && last.Data["recorded"] != true {
			d := Decision{At: at, Outcome: c.Outcome(), By: last.DataString("by"), Comment: last.DataString("comment"), Via: "event"}
			if ev != nil {
				d.Event = ev.ID
				if d.Comment == "" && len(ev.Comments) > 0 {
					d.Comment = ev.Comments[len(ev.Comments)-1].ID
				}
			}
			st.Decisions.Set(n.ID, d)
			recorded = append(recorded, n.ID)
		}
	}

	changed := false
	var skipped, opted []string
	for _, res := range c.Results {
		for node, raw := range AsValues(res.Data["declaredSkips"]) {
			t, ok := r.g.Node(node)
			if !ok || !t.Skippable || t.Required || st.Record(node).EnteredAt != "" {
				continue
			}
			v := AsValues(raw)
			if st.Skips.SetDefault(node, SkipDecl{Via: v.StringOr("via", "selection"), Token: v.StringOr("token", node), By: v.String("by"), Reason: v.String("reason"), At: at}) {
				skipped = append(skipped, node)
				changed = true
			}
		}
		for node, raw := range AsValues(res.Data["optIns"]) {
			t, ok := r.g.Node(node)
			if !ok || !t.OptIn || st.Record(node).EnteredAt != "" {
				continue
			}
			v := AsValues(raw)
			if st.OptIns.SetDefault(node, OptInSelection{Via: v.StringOr("via", "selection"), Token: v.StringOr("token", node), By: v.String("by"), At: at}) {
				opted = append(opted, node)
				changed = true
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
	// The decisions recorded here carry the skips and opt-ins they made,
	// under their signature: a verifier honours a skipped human gate only
	// on that proof.
	if len(recorded) > 0 {
		gated := gatedNames(c)
		for _, key := range recorded {
			if len(skipped) > 0 || len(opted) > 0 {
				d, _ := st.Decisions.Get(key)
				d.Skips, d.OptIns = append([]string(nil), skipped...), append([]string(nil), opted...)
				st.Decisions.Set(key, d)
			}
			r.sign(ctx, s, key, gated, ev)
		}
	}
	return changed
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
		if o, ok := c.Results[i].Data["outcome"].(string); ok && o != "" {
			return &c.Results[i]
		}
	}
	return nil
}
