package hooks

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/lazyre"
)

// SelectionMarker identifies the phase-selection checklist comment.
const SelectionMarker = "<!-- the-loop:phase-selection -->"

// DefaultExecuteKeyword is the reply that answers the checklist.
const DefaultExecuteKeyword = "the-loop execute"

// Tokens of the checklist's non-phase rows.
// SelectionDecision is the decision key phase selection records under; its
// record carries the frozen graph.
const SelectionDecision = "phase-selection"

const (
	surfaceToken      = "outer-loop-on-pull-request"
	prSessionsPrefix  = "pr-sessions-"
	surfacePR         = "pull-request"
	surfaceWorkItem   = "work-item"
	contributionLoop  = "pdlc-contribution-loop"
	decisionSelection = SelectionDecision
)

// Sessions-per-PR modes, in checklist order.
var prSessionModes = []string{"never", "cross-repository", "always"}

var prSessionText = map[string]string{
	"never":            "one session works every pull request of this work item",
	"cross-repository": "a separate session for each pull request in another repository",
	"always":           "a separate session for every pull request",
}

// checklistLine matches one checklist row: "- [x] token" (backticks
// optional).
var checklistLine = lazyre.New("(?m)^\\s*[-*]\\s*\\[([ xX])\\]\\s*`?([A-Za-z0-9][A-Za-z0-9._-]*)`?")

// ChecklistRow is one parsed row.
type ChecklistRow struct {
	Token  string
	Ticked bool
}

// ParseChecklist returns the checklist rows of a comment body in order.
func ParseChecklist(body string) []ChecklistRow {
	var out []ChecklistRow
	for _, m := range checklistLine.FindAllStringSubmatch(body, -1) {
		out = append(out, ChecklistRow{Token: m[2], Ticked: m[1] != " "})
	}
	return out
}

func defaultSessionPerPr(hc *graph.HookContext) string {
	m := hc.Config.String("sessionPerPr")
	for _, v := range prSessionModes {
		if v == m {
			return m
		}
	}
	return "cross-repository"
}

func executeKeyword(hc *graph.HookContext) string {
	return hc.Config.StringOr("executeKeyword", DefaultExecuteKeyword)
}

// RenderChecklist renders the phase-selection checklist for a graph: every
// skippable phase ticked by default, opt-in phases unticked, protected
// phases listed without a box, and the two non-phase questions.
func RenderChecklist(g *graph.Graph, current, keyword, sessionDefault string) string {
	var b strings.Builder
	b.WriteString("🤖 _the-loop_ — **which phases does this work item need?**\n\n")
	var optIns, protected []*graph.Node
	var defaults []*graph.Node
	for _, n := range g.Nodes() {
		switch {
		case n.OptIn:
			optIns = append(optIns, n)
		case n.Skippable:
			defaults = append(defaults, n)
		case !n.Terminal && n.ID != current:
			protected = append(protected, n)
		}
	}
	if len(optIns) > 0 {
		fmt.Fprintf(&b, "Untick the phases this work item does not need and tick the optional ones you want, on this comment, then reply `%s`.\n\n", keyword)
	} else {
		fmt.Fprintf(&b, "Untick the phases this work item does not need, on this comment, then reply `%s`.\n\n", keyword)
	}
	for _, n := range defaults {
		fmt.Fprintf(&b, "- [x] %s\n", n.ID)
	}
	if len(optIns) > 0 {
		b.WriteString("\n**Optional phases — they do not run unless you tick them:**\n\n")
		for _, n := range optIns {
			if n.Description != "" {
				fmt.Fprintf(&b, "- [ ] %s — %s\n", n.ID, n.Description)
			} else {
				fmt.Fprintf(&b, "- [ ] %s\n", n.ID)
			}
		}
	}
	if len(protected) > 0 {
		b.WriteString("\nThese phases always run; they cannot be skipped:\n\n")
		for _, n := range protected {
			fmt.Fprintf(&b, "- %s\n", n.ID)
		}
	} else if len(defaults) > 0 {
		b.WriteString("\n**Every phase here is selectable. Each one you untick is recorded against you as a declared skip.**\n")
	}
	if g.Name != contributionLoop {
		b.WriteString("\n**Where should the outer loop iterate on the spec artifacts?**\n\n")
		fmt.Fprintf(&b, "- [ ] `%s` — on a pull request in this repository.\n", surfaceToken)
		b.WriteString("\nLeft unticked, the work item itself is the surface: comments on this ticket.\n")
	} else {
		b.WriteString("\nA contribution has no outer loop to place: its plan is reviewed here, its code on its pull requests.\n")
	}
	b.WriteString("\n**How many agent sessions should deliver this work item's pull requests? Tick exactly one.**\n\n")
	for _, m := range prSessionModes {
		box := " "
		if m == sessionDefault {
			box = "x"
		}
		fmt.Fprintf(&b, "- [%s] `%s%s` — %s\n", box, prSessionsPrefix, m, prSessionText[m])
	}
	b.WriteString("\nNone or several ticked means the default above.\n\n")
	fmt.Fprintf(&b, "Reply `%s` with the boxes untouched to run the full process. A checklist inside your reply wins over this one. Your reply is the authorization: the-loop records who chose.\n\n", keyword)
	b.WriteString(SelectionMarker + "\n")
	return b.String()
}

// postPhaseSelection posts the checklist once per work item.
func postPhaseSelection(ctx context.Context, hc *graph.HookContext) graph.HookResult {
	if cs, err := listComments(ctx, hc); err == nil {
		for _, c := range cs {
			if strings.Contains(c.Body, SelectionMarker) {
				return graph.Pass(map[string]any{"posted": false, "reason": "already asked"})
			}
		}
	}
	body := RenderChecklist(hc.Graph, hc.Node.ID, executeKeyword(hc), defaultSessionPerPr(hc))
	if _, err := postComment(ctx, hc, body); err != nil {
		return sideEffect(err, map[string]any{"posted": false}, "no ticket integration configured; the checklist was not posted")
	}
	return graph.Pass(map[string]any{"posted": true})
}

// Selection is a parsed phase selection.
type Selection struct {
	Skips        []string
	OptIns       []string
	Refused      []string
	Surface      string
	SessionPerPr string
}

// ReadSelection applies checklist rows to a graph (docs/graph.md §7.13 rules): an opt-in
// ticked is selected; a skippable phase unticked is a declared skip; a
// protected phase unticked is refused; unknown tokens are ignored; a phase
// not mentioned keeps its default.
func ReadSelection(g *graph.Graph, rows []ChecklistRow, sessionDefault string) Selection {
	var sel Selection
	seen := map[string]bool{}
	add := func(list *[]string, id string) {
		if !seen[id] {
			seen[id] = true
			*list = append(*list, id)
		}
	}
	var modes []string
	surface := ""
	for _, r := range rows {
		if r.Token == surfaceToken {
			if surface == "" {
				surface = surfaceWorkItem
				if r.Ticked {
					surface = surfacePR
				}
			}
			continue
		}
		if m, ok := strings.CutPrefix(r.Token, prSessionsPrefix); ok {
			if r.Ticked && prSessionText[m] != "" && !slices.Contains(modes, m) {
				modes = append(modes, m)
			}
			continue
		}
		n, ok := g.Node(r.Token)
		if !ok {
			continue
		}
		switch {
		case n.OptIn && r.Ticked:
			add(&sel.OptIns, n.ID)
		case r.Ticked:
		case n.Skippable && !n.OptIn:
			add(&sel.Skips, n.ID)
		case !n.Skippable:
			add(&sel.Refused, n.ID)
		}
	}
	if surface == "" {
		surface = surfaceWorkItem
	}
	if g.Name == contributionLoop {
		surface = ""
	}
	sel.Surface = surface
	sel.SessionPerPr = sessionDefault
	if len(modes) == 1 {
		sel.SessionPerPr = modes[0]
	}
	return sel
}

// classifyPhaseSelection freezes the phase selection from an authorized
// reply carrying the execute keyword.
func classifyPhaseSelection(ctx context.Context, hc *graph.HookContext) graph.HookResult {
	if _, ok := hc.Decisions[decisionSelection]; ok {
		return decided("selected", graph.DecisionFact{Key: decisionSelection}, nil)
	}
	kw := executeKeyword(hc)
	var decisive []graph.Comment
	for _, c := range authorizedComments(hc) {
		if strings.Contains(strings.ToLower(c.Body), strings.ToLower(kw)) {
			decisive = append(decisive, c)
		}
	}
	if len(decisive) == 0 {
		return graph.Wait("waiting for an authorized user to choose the phases and reply `" + kw + "`")
	}
	reply := decisive[len(decisive)-1]
	actor := strings.TrimPrefix(reply.Author, "@")
	rows := ParseChecklist(reply.Body)
	source := "reply"
	if len(rows) == 0 {
		source = "checklist"
		if cs, err := listComments(ctx, hc); err == nil {
			for i := len(cs) - 1; i >= 0; i-- {
				if strings.Contains(cs[i].Body, SelectionMarker) {
					rows = ParseChecklist(cs[i].Body)
					break
				}
			}
		}
	}
	sel := ReadSelection(hc.Graph, rows, defaultSessionPerPr(hc))
	by := "@" + actor
	skips := map[string]graph.SkipDecl{}
	for _, id := range sel.Skips {
		skips[id] = graph.SkipDecl{Via: "selection", Token: id, By: by}
	}
	optIns := map[string]graph.OptInSelection{}
	for _, id := range sel.OptIns {
		optIns[id] = graph.OptInSelection{Via: "selection", Token: id, By: by}
	}
	res := decided("selected", graph.DecisionFact{
		Key:          decisionSelection,
		By:           by,
		Comment:      reply.ID,
		FrozenGraph:  freeze(hc, sel),
		Via:          source,
		Surface:      sel.Surface,
		SessionPerPr: sel.SessionPerPr,
		Skips:        skips,
		OptIns:       optIns,
	}, map[string]any{"refused": sel.Refused})
	if _, err := postComment(ctx, hc, confirmation(hc.Graph, sel, actor)); err != nil {
		res.Degraded = sideEffect(err, nil, "").Degraded
	}
	return res
}

// freeze renders the frozen graph recorded with the selection.
func freeze(hc *graph.HookContext, sel Selection) map[string]any {
	skipped := map[string]bool{}
	for id := range hc.SkippedNodes {
		skipped[id] = true
	}
	for _, id := range sel.Skips {
		skipped[id] = true
	}
	for _, id := range sel.OptIns {
		delete(skipped, id)
	}
	nodes := make([]any, 0, len(hc.Graph.Nodes()))
	for _, n := range hc.Graph.Nodes() {
		nodes = append(nodes, map[string]any{"id": n.ID, "phase": n.Phase, "skipped": skipped[n.ID] || (n.OptIn && !slices.Contains(sel.OptIns, n.ID)), "selectable": n.Skippable, "optIn": n.OptIn})
	}
	return map[string]any{"loop": hc.Graph.Name, "workItem": hc.WorkItem.ID, "surface": sel.Surface, "sessionPerPr": sel.SessionPerPr, "nodes": nodes}
}

func backticked(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = "`" + id + "`"
	}
	return strings.Join(q, ", ")
}

// confirmation is the comment recording what was chosen. It names node ids
// and the replier's login only.
func confirmation(g *graph.Graph, sel Selection, actor string) string {
	var b strings.Builder
	b.WriteString("🤖 _the-loop_ — **phase selection recorded**\n\n")
	if len(sel.Skips) > 0 {
		fmt.Fprintf(&b, "Skipping, as declared by @%s: %s. These are declarations, not verdicts: `loopctl check` shows them as skipped, never as passed.\n\n", actor, backticked(sel.Skips))
	} else {
		fmt.Fprintf(&b, "@%s kept every default phase.\n\n", actor)
	}
	var offered []string
	for _, n := range g.Nodes() {
		if n.OptIn && !slices.Contains(sel.OptIns, n.ID) {
			offered = append(offered, n.ID)
		}
	}
	if len(sel.OptIns) > 0 {
		fmt.Fprintf(&b, "Also running, as @%s asked: %s.\n\n", actor, backticked(sel.OptIns))
	} else if len(offered) > 0 {
		fmt.Fprintf(&b, "Not running (offered, not selected): %s.\n\n", backticked(offered))
	}
	if len(sel.Refused) > 0 {
		fmt.Fprintf(&b, "**Refused** (these phases are protected and always run): %s.\n\n", backticked(sel.Refused))
	}
	switch sel.Surface {
	case surfacePR:
		b.WriteString("The spec artifacts iterate on a pull request in this repository.\n\n")
	case surfaceWorkItem:
		b.WriteString("The spec artifacts iterate on this work item.\n\n")
	}
	fmt.Fprintf(&b, "Pull requests delivering this work item: **`%s`** — %s.\n\n", sel.SessionPerPr, prSessionText[sel.SessionPerPr])
	b.WriteString("Starting the loop.\n")
	return b.String()
}
