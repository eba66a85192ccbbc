package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/dashboard"
	"github.com/theloop-dev/theloop/loop/daemon/usage"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// Budgets (routing.budget, docs/usage.md): after each poll of the usage
// watch, every item that spent is measured against its caps — the item's
// own (all its sessions) and its repository's for the UTC day, each in
// tokens or estimated cost. At routing.budget.warnAt of a cap loopd
// comments once on the ticket and lists the item under "needs you"; at the
// cap it pauses the session (the pause `the-loop pause` gives: nothing
// reaches the agent), says why on the ticket and on the board, and logs
// session.budget_capped (audited). An authorized `the-loop resume` (or the
// operator's `loopctl sessions resume`) lets it go on past that cap; a
// raised budget (SIGHUP) or a new day releases it. The marks are kept
// with the ledger, written before the comment or the pause they lead to.

type budgetMark struct {
	// Warned: scope instance ("item", "day:2026-12-03") → warned.
	Warned map[string]bool `json:"warned,omitempty"`
	// Capped is the scope instance whose cap paused the session; CapDesc
	// the cap as it stood (its limits).
	Capped  string    `json:"capped,omitempty"`
	CapDesc string    `json:"capDesc,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	At      time.Time `json:"at,omitzero"`
	// Overridden: scope instance → the cap (CapDesc) an authorized resume
	// let the session go past.
	Overridden map[string]string `json:"overridden,omitempty"`
	// Pending are ticket comments decided and not yet posted.
	Pending []string `json:"pending,omitempty"`
	// Worst is the last measure (for the API and the board).
	Worst *api.UsageBudget `json:"worst,omitempty"`
}

type budgetMarks map[string]*budgetMark

func loadMarks(b json.RawMessage) budgetMarks {
	m := budgetMarks{}
	if len(b) > 0 {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

func (m budgetMarks) encode() json.RawMessage {
	b, _ := json.Marshal(m)
	return b
}

func (m budgetMarks) of(ref string) *budgetMark {
	mk := m[ref]
	if mk == nil {
		mk = &budgetMark{}
		m[ref] = mk
	}
	if mk.Warned == nil {
		mk.Warned = map[string]bool{}
	}
	if mk.Overridden == nil {
		mk.Overridden = map[string]string{}
	}
	return mk
}

// scopeMeasure is one scope's worst cap.
type scopeMeasure struct {
	id, scope, unit string
	limit, used     float64
	desc            string
}

func (s scopeMeasure) frac() float64 { return s.used / s.limit }

func (s scopeMeasure) wire(state, reason string) *api.UsageBudget {
	return &api.UsageBudget{Scope: s.scope, Unit: s.unit, Limit: s.limit, Used: s.used, State: state, Reason: reason}
}

// measure is item's standing against each scope with a cap.
func (w *usageWatch) measure(item workitem.Ref, now time.Time, b loop.BudgetSettings, rates usage.Rates) []scopeMeasure {
	var out []scopeMeasure
	one := func(id, scope string, f usage.Filter, tokCap int64, costCap float64) {
		if tokCap <= 0 && costCap <= 0 {
			return
		}
		t, cost, _ := w.ledger.Sum(f, rates)
		desc := fmt.Sprintf("tokens=%d,cost=%g", tokCap, costCap)
		var best *scopeMeasure
		if tokCap > 0 {
			best = &scopeMeasure{id: id, scope: scope, unit: "tokens", limit: float64(tokCap), used: float64(t.Total()), desc: desc}
		}
		if costCap > 0 {
			c := scopeMeasure{id: id, scope: scope, unit: "estimated cost", limit: costCap, used: cost, desc: desc}
			if best == nil || c.frac() > best.frac() {
				best = &c
			}
		}
		out = append(out, *best)
	}
	day := usage.DayOf(now)
	one("item", "item", usage.Filter{Item: item.String()}, b.ItemTokens, b.ItemCost)
	one("day:"+day, "repository-day", usage.Filter{Repository: item.Owner + "/" + item.Repo, Day: day}, b.DayTokens, b.DayCost)
	return out
}

func (s scopeMeasure) text() string {
	what := fmt.Sprintf("%.0f of %.0f tokens", s.used, s.limit)
	if s.unit != "tokens" {
		what = fmt.Sprintf("an estimated %s of %s", money(s.used), money(s.limit))
	}
	where := "this work item's budget (routing.budget.item)"
	if s.scope == "repository-day" {
		where = "the repository's budget for today (routing.budget.repositoryDaily, UTC)"
	}
	return fmt.Sprintf("%s — %s", what, where)
}

// checkBudgets measures the items that spent and the ones a cap holds;
// it reports whether a mark changed.
func (w *usageWatch) checkBudgets(ctx context.Context, recs []sessions.Record, spent map[string]sessions.Record, now time.Time) bool {
	b := w.budget()
	rates := w.rates()
	changed := false
	byItem := map[string]sessions.Record{}
	for _, rec := range recs {
		if rec.Parent.IsZero() {
			byItem[rec.Item.String()] = rec
		}
	}
	refs := make([]string, 0, len(spent))
	for ref := range spent {
		refs = append(refs, ref)
	}
	for ref, mk := range w.marks {
		if _, ok := spent[ref]; !ok && (mk.Capped != "" || len(mk.Pending) > 0) {
			refs = append(refs, ref)
		}
	}
	sort.Strings(refs)
	for _, ref := range refs {
		rec, ok := byItem[ref]
		if !ok || !rec.Status.Live() {
			continue
		}
		if w.checkItem(ctx, rec, b, rates, now) {
			changed = true
		}
	}
	return changed
}

func (w *usageWatch) checkItem(ctx context.Context, rec sessions.Record, b loop.BudgetSettings, rates usage.Rates, now time.Time) bool {
	ref := rec.Item.String()
	mk := w.marks.of(ref)
	changed := false
	ms := w.measure(rec.Item, now, b, rates)
	if mk.Capped != "" && rec.Status == sessions.StatusActive {
		// Someone resumed it (an authorized the-loop resume, the operator's
		// verb): the cap as it stands lets it go on.
		mk.Overridden[mk.Capped] = mk.CapDesc
		w.d.emit("session.budget_overridden", graph.LevelInfo, graph.Field{Key: "work_item", Value: ref},
			graph.Field{Key: "scope", Value: mk.Capped}, graph.Field{Key: "cap", Value: mk.CapDesc})
		mk.Capped, mk.CapDesc, mk.Reason = "", "", ""
		changed = true
	}
	var worst *scopeMeasure
	var over *scopeMeasure
	for i := range ms {
		m := &ms[i]
		if worst == nil || m.frac() > worst.frac() {
			worst = m
		}
		if m.frac() >= 1 && mk.Overridden[m.id] != m.desc && (over == nil || m.frac() > over.frac()) {
			over = m
		}
	}
	switch {
	case mk.Capped != "" && rec.Status == sessions.StatusPaused && !w.stillOver(ms, mk):
		// A raised budget, or a new day: the cap no longer holds.
		if err := w.d.intake.setStatus(ctx, rec.Item, sessions.StatusActive); err == nil {
			_ = w.d.ctl.Record(rec.Item, ingress.CmdResume, "cli", "loopd", "budget: the cap no longer holds", now)
			w.d.emit("session.budget_released", graph.LevelInfo, graph.Field{Key: "work_item", Value: ref}, graph.Field{Key: "scope", Value: mk.Capped})
			mk.Capped, mk.CapDesc, mk.Reason = "", "", ""
			changed = true
		}
	case over != nil && mk.Capped == "" && rec.Status == sessions.StatusActive:
		mk.Capped, mk.CapDesc, mk.At = over.id, over.desc, now
		mk.Reason = "budget cap reached: " + over.text()
		mk.Pending = append(mk.Pending, budgetCappedComment(ref, over.text()))
		mk.Warned[over.id] = true
		// State before the effects (the pause, the comment).
		if err := w.save(); err != nil {
			w.d.logf("warning: saving the usage ledger: %v", err)
			return changed
		}
		if err := w.d.ctl.Record(rec.Item, ingress.CmdPause, "cli", "loopd", mk.Reason, now); err != nil {
			w.d.logf("warning: recording the budget pause of %s: %v", ref, err)
		}
		if err := w.d.intake.setStatus(ctx, rec.Item, sessions.StatusPaused); err != nil {
			w.d.logf("warning: pausing %s at its budget cap: %v", ref, err)
		}
		w.d.emit("session.budget_capped", graph.LevelWarning, graph.Field{Key: "work_item", Value: ref}, graph.Field{Key: "scope", Value: over.scope},
			graph.Field{Key: "unit", Value: over.unit}, graph.Field{Key: "limit", Value: over.limit}, graph.Field{Key: "used", Value: over.used})
		changed = true
	}
	if worst != nil && worst.frac() >= b.WarnAt && !mk.Warned[worst.id] && mk.Overridden[worst.id] != worst.desc {
		mk.Warned[worst.id] = true
		if mk.At.IsZero() {
			mk.At = now
		}
		mk.Pending = append(mk.Pending, budgetWarningComment(ref, worst.text(), b.WarnAt))
		w.d.emit("session.budget_warning", graph.LevelInfo, graph.Field{Key: "work_item", Value: ref}, graph.Field{Key: "scope", Value: worst.scope},
			graph.Field{Key: "unit", Value: worst.unit}, graph.Field{Key: "limit", Value: worst.limit}, graph.Field{Key: "used", Value: worst.used})
		changed = true
	}
	var state *api.UsageBudget
	if worst != nil {
		st := "ok"
		switch {
		case mk.Capped != "":
			st = "capped"
		case mk.Overridden[worst.id] == worst.desc && worst.frac() >= 1:
			st = "released"
		case worst.frac() >= b.WarnAt:
			st = "warned"
		}
		state = worst.wire(st, mk.Reason)
	}
	mk.Worst = state
	if len(mk.Pending) > 0 {
		// Decided, written down, then posted; what was posted is written
		// down at once, so a restart does not post it again.
		if err := w.save(); err == nil {
			w.tell(ctx, rec.Item, mk)
			_ = w.save()
		}
		changed = true
	}
	return changed
}

// stillOver reports whether the cap that holds the session is still
// crossed as the budget stands now.
func (w *usageWatch) stillOver(ms []scopeMeasure, mk *budgetMark) bool {
	for _, m := range ms {
		if m.id == mk.Capped && m.frac() >= 1 && mk.Overridden[m.id] != m.desc {
			return true
		}
	}
	return false
}

// tell posts the pending comments, oldest first; one that fails stays for
// the next poll.
func (w *usageWatch) tell(ctx context.Context, item workitem.Ref, mk *budgetMark) {
	if w.d.integ == nil {
		mk.Pending = nil
		return
	}
	for len(mk.Pending) > 0 {
		if _, err := w.d.integ.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": item.String(), "body": hooks.Mark(mk.Pending[0])}); err != nil {
			w.d.emit("session.budget_comment_failed", graph.LevelWarning, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "error", Value: err.Error()})
			return
		}
		mk.Pending = mk.Pending[1:]
	}
}

func budgetWarningComment(ref, what string, warnAt float64) string {
	return fmt.Sprintf("🤖 _the-loop_ — **budget warning** on work item `%s`: the agent's sessions have spent %s (warning at %.0f%%).\n\n"+
		"Figures are loopd's reading of the harness's own record; cost is an estimate from `usage.rates`. At the cap loopd pauses the session. "+
		"`loopctl usage %s` shows where it went, by node.\n", ref, what, warnAt*100, ref)
}

func budgetCappedComment(ref, what string) string {
	return fmt.Sprintf("🤖 _the-loop_ — **paused at its budget cap**: work item `%s` has spent %s.\n\n"+
		"Nothing more reaches the agent's session until it is resumed. What you can do:\n"+
		"- **Let it go on**: an authorized person comments `the-loop resume` (or the operator runs `loopctl sessions resume %s`); the cap as it stands is then let pass.\n"+
		"- **Raise the budget** (`routing.budget` in the configuration, then `systemctl reload loopd`): the session goes on by itself.\n"+
		"- **Stop the work**: comment `the-loop stop`.\n", ref, what, ref)
}

// budgetOf is item's standing (w.mu held).
func (w *usageWatch) budgetOf(ref string) *api.UsageBudget {
	if mk := w.marks[ref]; mk != nil {
		return mk.Worst
	}
	return nil
}

// Budgets implements dashboard.BudgetSource: the items warned or held at
// a cap, for "needs you".
func (s *dashSource) Budgets(context.Context) ([]dashboard.Budget, error) {
	w := s.d.usage.Load()
	if w == nil {
		return nil, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []dashboard.Budget
	for ref, mk := range w.marks {
		if mk.Worst == nil || mk.Worst.State == "ok" || mk.Worst.State == "released" {
			continue
		}
		why := fmt.Sprintf("at %.0f%% of its %s budget (%s)", 100*mk.Worst.Used/mk.Worst.Limit, mk.Worst.Scope, mk.Worst.Unit)
		if mk.Capped != "" {
			why = mk.Reason + " — paused; `the-loop resume` by an authorized person lets it go on"
		}
		out = append(out, dashboard.Budget{Ref: ref, Why: why, Capped: mk.Capped != "", Since: mk.At})
	}
	return out, nil
}
