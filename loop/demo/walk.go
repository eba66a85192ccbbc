package demo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop"
	demoagent "github.com/theloop-dev/theloop/loop/demo/agent"
	"github.com/theloop-dev/theloop/sessions"
)

// gate is one approval the human gives.
type gate struct {
	node     string
	review   []string // artifacts shown for review
	approval string   // dana's comment
}

var gates = []gate{
	{"requirements-approval", []string{"requirements.md"}, "Approved"},
	{"design-approval", []string{"design.md", "testing-plan.md"}, "Approved"},
	{"human-approval", nil, "Approved — ship it"},
}

// walk plays dana and waits for theloop between her turns.
func (w *world) walk(ctx context.Context) error {
	is, err := w.sim.OpenIssue(RepoFull, Human, "Export the weekly report as CSV",
		"Operators copy the weekly report into spreadsheets by hand. Let them export it as CSV.")
	if err != nil {
		return err
	}
	w.p.line(Human, "opens issue #%d %q on %s", is.Number, is.Title, RepoFull)
	if err := w.settle(ctx); err != nil {
		return err
	}
	w.p.line(Human, "labels #1 %q (the arming label: theloop starts work on it)", Label)
	if err := w.sim.AddLabel(RepoFull, issueNum, Human, Label); err != nil {
		return err
	}
	if err := w.waitNode(ctx, "phase-selection"); err != nil {
		return err
	}
	if err := w.settle(ctx); err != nil {
		return err
	}
	w.p.say("")
	w.p.line(Human, "answers the phase selection: the whole spec chain, without brainstorming and capability docs")
	if err := w.comment("the-loop execute\n\n- [ ] brainstorming\n- [ ] capability-docs"); err != nil {
		return err
	}
	for _, g := range gates {
		if err := w.waitNode(ctx, g.node); err != nil {
			return err
		}
		if err := w.settle(ctx); err != nil {
			return err
		}
		w.p.say("")
		w.p.say("━━ human gate: %s ━━ theloop waits for an authorized person (dana) on issue #1", g.node)
		if g.node == gates[0].node {
			if err := w.stranger(ctx, g); err != nil {
				return err
			}
			if err := w.selfApproval(ctx, g); err != nil {
				return err
			}
		}
		ok, elsewhere, err := w.ask(ctx, g)
		if err != nil {
			return err
		}
		if elsewhere {
			// Decided in the dashboard while the prompt waited: the prompt
			// is answered, and the walk goes on to the next gate.
			w.res.Gates = append(w.res.Gates, g.node)
			continue
		}
		if !ok {
			w.p.say("\nNot approved: issue #1 waits at %s, as it would on GitHub until an authorized", g.node)
			w.p.say("person comments. Run `loopd demo --yes` to see the rest of the loop.")
			return ErrNotApproved
		}
		w.p.line(Human, "comments %q", g.approval)
		if err := w.comment(g.approval); err != nil {
			return err
		}
		w.res.Gates = append(w.res.Gates, g.node)
		if g.node == gates[0].node {
			if err := w.redeliver(ctx); err != nil {
				return err
			}
		}
	}
	if err := w.waitNode(ctx, "complete"); err != nil {
		return err
	}
	return w.settle(ctx)
}

// stranger shows authorization: someone who may not approve says
// "Approved", and the gate does not move.
func (w *world) stranger(ctx context.Context, g gate) error {
	w.p.line(Stranger, "comments %q — but %s is not in routing.authorizedUsers", "Approved", Stranger)
	if _, err := w.sim.Comment(RepoFull, issueNum, Stranger, "Approved"); err != nil {
		return err
	}
	if err := w.settle(ctx); err != nil {
		return err
	}
	cur := w.current(ctx)
	w.p.line("demo", "issue #1 is still at %s: an unauthorized comment passes no gate", cur)
	if cur != g.node {
		return fmt.Errorf("demo: an unauthorized comment moved issue #1 from %s to %s", g.node, cur)
	}
	w.res.IgnoredStranger = true
	return nil
}

// selfApproval shows the sandbox (docs/decisions.md §18): the scripted agent, told
// where loopd listens and its pid (nothing an attacker could not find), has
// tried to approve its own work at this gate; the demo prints each attempt
// from the agent's report and checks, on its own, that the gate did not
// move. It fails only if the gate moved.
func (w *world) selfApproval(ctx context.Context, g gate) error {
	deadline := time.Now().Add(w.opts.StepTimeout)
	var attempts []demoagent.Attempt
	for {
		var err error
		attempts, err = demoagent.ReadAttackReport(w.agentDir)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			w.p.line("demo", "the agent's attempt to approve its own work left no report: %v", err)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	w.p.say("")
	w.p.line("agent", "tries to approve its own work at %s (its pane narrates it; attach to watch):", g.node)
	what := map[string]string{
		demoagent.StepKey:     "reads the decision-signing key",
		demoagent.StepWebhook: "posts dana's \"Approved\", signed, to loopd's webhook",
		demoagent.StepSocket:  "asks loopd's operator socket to force the gate:",
		demoagent.StepEnviron: "reads loopd's environment",
	}
	var parts []string
	refused := len(attempts) == 4
	for _, a := range attempts {
		w.p.line("agent", "  %s %s → %s", what[a.Step], a.Target, a.Outcome)
		if a.Step == demoagent.StepWebhook && strings.Contains(a.Outcome, "no secret") {
			w.p.line("agent", "    (%s is not in its environment: it signed with a guess)", demoagent.WebhookSecretEnv)
		}
		parts = append(parts, a.Step+" → "+a.Outcome)
		refused = refused && a.Refused
	}
	cur := w.current(ctx)
	if cur != g.node {
		return fmt.Errorf("demo: the agent moved issue #1 past its own approval gate, from %s to %s", g.node, cur)
	}
	w.mu.Lock()
	w.res.SelfApproval = attempts
	w.res.SelfApprovalRefused = refused
	w.mu.Unlock()
	moved := "Nothing moved"
	if !refused {
		moved = "Some attempts got through (the sandbox is off), yet nothing moved"
	}
	w.p.say("━━ the agent tried to approve its own work: %s. %s: issue #1 is still at %s.", strings.Join(parts, "; "), moved, cur)
	return nil
}

// redeliver shows idempotence: GitHub's Redeliver sends dana's approval
// again under the same delivery id, and nothing happens twice.
func (w *world) redeliver(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, w.opts.StepTimeout)
	defer cancel()
	if err := w.sim.WaitDeliveries(wctx); err != nil {
		return err
	}
	var id string
	for _, d := range w.sim.Deliveries() {
		if d.Event == integrations.EventIssueComment && d.Sender == Human && !d.Redelivery {
			id = d.ID
		}
	}
	if id == "" {
		return nil
	}
	w.p.line("github", "redelivers dana's approval under the same delivery id (GitHub's Redeliver button)")
	if err := w.sim.Redeliver(id); err != nil {
		return err
	}
	w.res.Redelivered = id
	return nil
}

func (w *world) comment(body string) error {
	_, err := w.sim.Comment(RepoFull, issueNum, Human, body)
	return err
}

// ask shows the gated artifacts and asks the person to approve. The
// prompt is also answered by a decision made elsewhere — dana's click in
// the dashboard (which posts her comment through the stand-in): the gate
// leaves while the prompt waits, the terminal says who decided and how,
// and ask reports elsewhere so the walk posts nothing of its own. Once a
// prompt was answered so, a line typed before the next prompt is shown
// answers nothing (it was meant for the gate the dashboard decided).
func (w *world) ask(ctx context.Context, g gate) (ok, elsewhere bool, err error) {
	for _, name := range g.review {
		b, err := os.ReadFile(filepath.Join(w.res.Checkout, "docs", "specs", WorkItem, name))
		if err != nil {
			continue
		}
		w.p.say("%s, as the agent wrote it:", name)
		w.p.block(string(b), 24)
	}
	if g.node == "human-approval" {
		w.p.say("the agent has implemented, verified and reviewed the change; the execution log is in %s/docs/specs/%s/execution-log.md", w.res.Checkout, WorkItem)
	}
	if w.opts.Yes {
		w.p.say("Approve as dana? [y/N] y (--yes)")
		return true, false, nil
	}
	answers := w.answerLines()
	for drained := !w.answeredElsewhere; !drained; {
		select {
		case a := <-answers:
			if a.err != nil { // the input ended: keep that for the prompt
				w.inEnded = true
			}
		default:
			drained = true
		}
	}
	w.p.prompt("Approve as dana? [y/N] ")
	if w.inEnded {
		w.p.say("(no answer: the input ended — taken as no; `loopd demo --yes` approves every gate)")
		return false, false, nil
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case a := <-answers:
			v := strings.ToLower(strings.TrimSpace(a.line))
			if a.err != nil {
				w.inEnded = true
				if v == "" {
					// No terminal (stdin is /dev/null, a closed pipe, …):
					// nobody can answer, so the answer is no — and the
					// person is told why.
					w.p.say("(no answer: the input ended — taken as no; `loopd demo --yes` approves every gate)")
				}
			}
			w.answeredElsewhere = false
			return v == "y" || v == "yes", false, nil
		case <-tick.C:
			if cur := w.current(ctx); cur != "" && cur != g.node {
				w.answeredElsewhere = true
				w.p.say("")
				w.p.line("demo", "the prompt is answered: %s", w.decidedBy(ctx, g.node, cur))
				return false, true, nil
			}
		case <-ctx.Done():
			return false, false, ctx.Err()
		}
	}
}

// answer is one line of the person's input (err: the input ended).
type answer struct {
	line string
	err  error
}

// answerLines starts, once, the reader of the person's input: one line per
// answer, for the whole walk (a reader per prompt would leave the previous
// one waiting on the same input).
func (w *world) answerLines() <-chan answer {
	w.answersOnce.Do(func() {
		ch := make(chan answer, 16)
		w.answers = ch
		go func() {
			for {
				l, err := w.in.ReadString('\n')
				select {
				case ch <- answer{l, err}:
				default: // 16 lines typed ahead: the rest is dropped
				}
				if err != nil {
					return
				}
			}
		}()
	})
	return w.answers
}

// decidedBy says who decided gate, how and where the item went, from the
// decision recorded in graph-state.json (loopd records who, and through
// which comment, once the comment came back through the webhook and the
// authorization check).
func (w *world) decidedBy(ctx context.Context, gate, now string) string {
	dir := w.checkout()
	if dir != "" {
		if st, err := loop.NewStore(dir, "").Load(ctx, WorkItem); err == nil && st != nil {
			if d, ok := st.Decisions.Get(gate); ok && d.By != "" {
				how := d.Outcome
				if d.Comment != "" {
					how += " (comment " + d.Comment + ")"
				}
				return fmt.Sprintf("%s decided %s in the dashboard: %s; issue #1 is now at %s", strings.TrimPrefix(d.By, "@"), gate, how, now)
			}
		}
	}
	return fmt.Sprintf("%s was decided elsewhere; issue #1 is now at %s", gate, now)
}

// checkout is the work item's worktree, once the daemon has spawned.
func (w *world) checkout() string {
	if w.res.Checkout != "" {
		return w.res.Checkout
	}
	reg, err := sessions.OpenRegistry(sessions.RegistryDir(w.state))
	if err != nil {
		return ""
	}
	rec, err := reg.Get(w.item)
	if err != nil || rec.Cwd == "" {
		return ""
	}
	w.res.Checkout = rec.Cwd
	return rec.Cwd
}

// current reads the work item's current node from its graph-state.json.
func (w *world) current(ctx context.Context) string {
	dir := w.checkout()
	if dir == "" {
		return ""
	}
	st, err := loop.NewStore(dir, "").Load(ctx, WorkItem)
	if err != nil || st == nil {
		return ""
	}
	return st.CurrentNode
}

// waitNode waits until the work item stands at node.
func (w *world) waitNode(ctx context.Context, node string) error {
	deadline := time.Now().Add(w.opts.StepTimeout)
	for {
		cur := w.current(ctx)
		if cur == node {
			w.res.Node = cur
			return nil
		}
		if time.Now().After(deadline) {
			if cur == "" {
				cur = "nowhere (no session or no graph state yet)"
			}
			return fmt.Errorf("demo: issue #1 did not reach %s within %s; it is at %s — run with --keep and read %s and the agent's screen (%s)",
				node, w.opts.StepTimeout, cur, filepath.Join(w.dir, "loopd.log"), w.attach())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settle waits until the stand-in has delivered every webhook, the queue is
// empty and nothing has happened for a moment, so a prompt is not drowned
// in the tail of the previous step.
func (w *world) settle(ctx context.Context) error {
	deadline := time.Now().Add(w.opts.StepTimeout)
	quiet := 0
	for quiet < 4 {
		if time.Now().After(deadline) {
			return nil // best effort: the walk goes on
		}
		wctx, cancel := context.WithTimeout(ctx, time.Until(deadline))
		err := w.sim.WaitDeliveries(wctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		n, perr := w.d.Pending(ctx)
		if err == nil && perr == nil && n == 0 {
			quiet++
		} else {
			quiet = 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// decisions prints the gate decisions recorded in graph-state.json: who,
// through which comment, and the signature that makes check, loop-gate and
// CI honour them.
func (w *world) decisions(ctx context.Context) {
	dir := w.checkout()
	if dir == "" {
		return
	}
	st, err := loop.NewStore(dir, "").Load(ctx, WorkItem)
	if err != nil || st == nil {
		return
	}
	for _, node := range st.Decisions.Keys() {
		d, _ := st.Decisions.Get(node)
		if d.Outcome == "" || d.By == "" {
			continue
		}
		signed := "unsigned"
		if d.Signature != nil {
			key := d.Signature.Key
			if len(key) > 20 {
				key = key[:20] + "…"
			}
			signed = "signed " + key
			w.res.SignedDecisions++
		}
		w.p.say("  decision  %-22s %s by %s (comment %s), %s", node, d.Outcome, d.By, d.Comment, signed)
	}
}

// summary fills the result and prints what the walk achieved. It fails
// when the walk completed but the closing trusted check does not pass.
func (w *world) summary(ctx context.Context) error {
	if w.sim == nil {
		return nil
	}
	if cur := w.current(ctx); cur != "" {
		w.res.Node = cur
	}
	if is, err := w.sim.Issue(RepoFull, issueNum); err == nil {
		w.res.Labels = is.Labels
	}
	if cs, err := w.sim.Comments(RepoFull, issueNum); err == nil {
		for _, c := range cs {
			if c.Author == BotLogin {
				w.res.Comments++
			}
		}
	}
	for _, d := range w.sim.Deliveries() {
		if d.OK() {
			w.res.Webhooks++
		}
	}
	w.res.Requests = len(w.sim.Requests())
	if w.res.Node == "complete" && w.res.Checkout != "" {
		if rt, err := loop.Open(w.res.Checkout, loop.Options{WorkItem: WorkItem}); err == nil {
			if rep, err := rt.Status(ctx, WorkItem, true); err == nil {
				w.res.Complete = rep.OK
			}
		}
	}
	w.p.say("")
	switch {
	case w.res.Complete:
		w.p.say("done: issue #1 walked the whole loop — it is at %q and `loopctl check %s --recompute` agrees", w.res.Node, WorkItem)
	case w.res.Node != "":
		w.p.say("issue #1 is at %q", w.res.Node)
	}
	w.decisions(ctx)
	var err error
	if w.res.Node == "complete" && w.res.Checkout != "" {
		err = w.trustedCheck(ctx)
	}
	w.p.say("  labels on issue #1:     %s", strings.Join(w.res.Labels, ", "))
	w.p.say("  theloop's comments:     %d (as %s)", w.res.Comments, BotLogin)
	w.p.say("  webhooks delivered:     %d, each signed; loopd answers 202 once an event is queued (or deliberately dropped)", w.res.Webhooks)
	w.mu.Lock()
	pastes := w.res.Pastes
	w.mu.Unlock()
	w.p.say("  pastes into the agent:  %d", pastes)
	w.p.say("  REST requests by theloop to the GitHub stand-in: %d", w.res.Requests)
	w.mu.Lock()
	lat := slices.Clone(w.res.OutboxLatencies)
	w.mu.Unlock()
	if len(lat) > 0 {
		slices.Sort(lat)
		w.p.say("  the agent's ticket effects, performed by loopd from its outbox: %d; claim → ticket p50 %d ms, max %d ms", len(lat), lat[len(lat)/2].Milliseconds(), lat[len(lat)-1].Milliseconds())
	}
	if w.opts.Keep && w.res.Checkout != "" {
		w.p.say("  the agent's worktree:   %s (git log shows its commits; try `loopctl check %s --repo %s`)", w.res.Checkout, WorkItem, w.res.Checkout)
	}
	return err
}

// trustedCheck is the demo's closing word: the README's CI line, with the
// daemon's signing key as the trust anchor, run (through the same library
// call loopctl check makes) on the worktree the agent wrote. It passes only
// if every gate decision is signed by that key and still matches the
// artifacts it approved — the agent edited nothing a gate locked
// (docs/decisions.md §21).
func (w *world) trustedCheck(ctx context.Context) error {
	signer, err := loop.LoadSigningKey(w.state)
	if err != nil {
		return fmt.Errorf("demo: the closing trusted check needs the daemon's signing key: %w", err)
	}
	w.res.TrustKey = signer.PublicKey()
	w.res.TrustedCheck = fmt.Sprintf("loopctl check %s --recompute --fail-on block --trust-key %s", WorkItem, w.res.TrustKey)
	w.p.say("")
	w.p.say("$ %s", w.res.TrustedCheck)
	w.p.say("  (the CI line of the README, trusting only the daemon's key, in %s)", w.res.Checkout)
	v, err := loop.LoadVerifier(ctx, loop.TrustSource{Keys: []string{w.res.TrustKey}})
	if err != nil {
		return fmt.Errorf("demo: the closing trusted check: %w", err)
	}
	rt, err := loop.Open(w.res.Checkout, loop.Options{WorkItem: WorkItem, DecisionVerifier: v})
	if err != nil {
		return fmt.Errorf("demo: the closing trusted check: %w", err)
	}
	rep, err := rt.Status(ctx, WorkItem, true)
	if err != nil {
		return fmt.Errorf("demo: the closing trusted check: %w", err)
	}
	if n, blocked := firstBlock(rep); blocked {
		w.p.say("  FAILED: %s blocks — %s", n.Node, strings.Join(n.Messages, "; "))
		return fmt.Errorf("demo: the closing trusted check failed: issue #1 is back at %s, which blocks: %s", rep.CurrentNode, strings.Join(n.Messages, "; "))
	}
	w.res.Trusted = true
	w.p.say("  passed: at %q, no node blocks, every gate decision signed by the daemon and matching what it approved", rep.CurrentNode)
	return nil
}

// firstBlock applies `--fail-on block`: the first node at or before the
// current one whose status is block.
func firstBlock(rep *graph.Report) (graph.NodeReport, bool) {
	for _, n := range rep.Nodes {
		if n.Status == graph.StatusBlock {
			return n, true
		}
		if n.Node == rep.CurrentNode {
			break
		}
	}
	return graph.NodeReport{}, false
}
