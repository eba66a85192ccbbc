package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

func newGraphCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name:  "graph",
		Usage: "show, walk, force and verify the process graph",
		Description: `The verbs an agent uses: complete (report a node's work done).
The verbs an operator uses: show, status, advance, run, force, skip, hooks, verify.

A claim is not a verdict: complete runs the node's real exit chain; at a human
gate it answers wait, because only an authorized person's comment on the
ticket (through the daemon) can pass a gate.`,
		Subcommands: []*cli.Command{
			newShowCmd(f, nil),
			newStatusCmd(f, nil),
			newCompleteCmd(f, nil),
			newAdvanceCmd(f, nil),
			newRunCmd(f, nil),
			newForceCmd(f, nil),
			newSkipCmd(f, nil),
			newHooksCmd(f, nil),
			newVerifyCmd(f, nil),
		},
	}
}

func workItemArg(c *cli.Context, verb string) (string, error) {
	switch c.NArg() {
	case 1:
		return c.Args().First(), nil
	case 0:
		if id := c.String("work-item"); id != "" {
			return id, nil
		}
	}
	return "", failWith(exitRefused, "loopctl graph %s: name one work item, e.g. `loopctl graph %s issue-42`", verb, verb)
}

var workItemFlag = &cli.StringFlag{Name: "work-item", Aliases: []string{"w"}, Usage: "the work item (instead of the argument)"}

// --- show -----------------------------------------------------------------

type showOptions struct {
	Factory  *Factory
	Repo     repoFlags
	Format   string
	WorkItem string
	Loop     string
	Output   output
}

func newShowCmd(f *Factory, runF func(*showOptions) error) *cli.Command {
	return &cli.Command{
		Name:  "show",
		Usage: "print the graph (text, json, mermaid, dot), optionally marking a work item's position (as check --recompute computes it)",
		Description: `Examples:
   loopctl graph show
   loopctl graph show --format mermaid --work-item issue-42
   loopctl graph show --loop pdlc-pr-loop --format dot | dot -Tsvg > pr-loop.svg`,
		Flags: append(repoFlagDefs(true), workItemFlag,
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text, json, mermaid or dot"},
			&cli.StringFlag{Name: "loop", Usage: "a shipped loop: " + strings.Join(loop.ShippedLoopNames(), ", ")},
			outputFlags()[0], outputFlags()[1],
		),
		Action: func(c *cli.Context) error {
			if err := noArgs(c, "graph show", "mark a work item with --work-item"); err != nil {
				return err
			}
			opts := &showOptions{Factory: f, Repo: readRepoFlags(c), Format: c.String("format"), WorkItem: c.String("work-item"), Loop: c.String("loop")}
			switch opts.Format {
			case "text", "json", "mermaid", "dot":
			default:
				return failWith(exitRefused, "loopctl graph show: --format must be text, json, mermaid or dot, not %q", opts.Format)
			}
			var err error
			if opts.Output, err = readOutput(c, "graph show", &opts.Format); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runShow(c.Context, opts)
		},
	}
}

func runShow(ctx context.Context, opts *showOptions) error {
	var g *graph.Graph
	var m *marks
	var rep *graph.Report
	if opts.WorkItem == "" && opts.Repo.GraphFile == "" && opts.Repo.PR == 0 {
		name := opts.Loop
		if name == "" {
			name = loop.WorkItemLoop
		}
		var err error
		if g, err = shippedGraph(name); err != nil {
			return err
		}
	} else if opts.WorkItem == "" && opts.Repo.PR == 0 {
		// A graph file alone needs no repository.
		var err error
		if g, err = opts.Factory.graphFlag(opts.Repo); err != nil {
			return err
		}
	} else {
		rt, err := opts.Factory.openCheck(opts.Repo, opts.WorkItem)
		if err != nil {
			return err
		}
		g = rt.Graph()
		if opts.WorkItem != "" {
			// Marked where check --recompute (the CI gate, the Stop hook)
			// says the work item stands; a stored pointer elsewhere is
			// said, not drawn.
			rep, err = rt.Status(ctx, opts.WorkItem, true)
			if err != nil {
				return err
			}
			m = marksFrom(rep)
			if stored, err := rt.Status(ctx, opts.WorkItem, false); err == nil && stored.CurrentNode != "" && stored.CurrentNode != rep.CurrentNode {
				fmt.Fprintf(opts.Factory.IO.ErrOut, "note: %s is marked at %s (recomputed from the artifacts); its stored pointer is at %s\n", opts.WorkItem, rep.CurrentNode, stored.CurrentNode)
			}
		}
	}
	w := opts.Factory.IO.Out
	switch opts.Format {
	case "json":
		if opts.Output.JQ == "" && opts.Output.Template == "" {
			renderJSON(w, g, rep)
			break
		}
		var buf bytes.Buffer
		renderJSON(&buf, g, rep)
		var v any
		if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
			return err
		}
		return opts.Output.write(w, v)
	case "mermaid":
		renderMermaid(w, g, m)
	case "dot":
		renderDot(w, g, m)
	default:
		renderText(w, g, m)
	}
	return nil
}

// --- status -----------------------------------------------------------------

type statusOptions struct {
	Factory  *Factory
	Repo     repoFlags
	WorkItem string
	Format   string
	Output   output
}

func newStatusCmd(f *Factory, runF func(*statusOptions) error) *cli.Command {
	return &cli.Command{
		Name:        "status",
		Usage:       "the work item's verdicts at its stored pointer (check without --recompute); exit 0 iff ok",
		Description: "Example:\n   loopctl graph status issue-42 --jq .currentNode",
		ArgsUsage:   "WORK-ITEM",
		Flags: append(append(repoFlagDefs(true), workItemFlag,
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table or json"}), outputFlags()...),
		Action: func(c *cli.Context) error {
			id, err := workItemArg(c, "status")
			if err != nil {
				return err
			}
			opts := &statusOptions{Factory: f, Repo: readRepoFlags(c), WorkItem: id, Format: c.String("format")}
			if opts.Output, err = readOutput(c, "graph status", &opts.Format); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			rt, err := f.openCheck(opts.Repo, id)
			if err != nil {
				return err
			}
			rep, err := rt.Status(c.Context, id, false)
			if err != nil {
				return err
			}
			if opts.Format == "json" {
				if err := opts.Output.write(f.IO.Out, rep); err != nil {
					return err
				}
			} else {
				writeReport(f.IO.Out, f.colour(f.IO.Out), rep, rt.Graph().Name, false)
			}
			if !rep.OK {
				return &exitError{code: exitFailed}
			}
			return nil
		},
	}
}

// --- complete ---------------------------------------------------------------

type completeOptions struct {
	Factory  *Factory
	Repo     repoFlags
	WorkItem string
	Node     string
	Actor    string
	Output   output
}

func newCompleteCmd(f *Factory, runF func(*completeOptions) error) *cli.Command {
	return &cli.Command{
		Name:      "complete",
		Usage:     "claim that the current node's work is done; prints the claim envelope (JSON)",
		ArgsUsage: "WORK-ITEM",
		Description: `The agent's one verb. complete runs the current node's real exit chain: if it
passes, the work item moves on and the reply names the node it now stands at;
if not, the reply lists what is missing. At a human gate the answer is wait.

The reply is JSON: {node, status, outcome, moved, currentNode, messages, reason},
printed whatever the answer. Exit status: 0 when the claim was answered
without a failed check (pass, wait, refused, noop, busy: read status), 1 when
the node's checks blocked (block, escalated) or for an unknown work item or
no repository, 2 for bad usage.

In a session loopd started (THE_LOOP_SESSION_ID, THE_LOOP_WORK_ITEM and
THE_LOOP_STATE_ROOT set) the session holds no GitHub credential, and its claim
is a request, not a fact: the claim (node, status, where it moved) is written to
the session's outbox, <state root>/outbox/<session id>/intents.jsonl, and loopd
recomputes the work item from the artifacts under its own trust anchor and
derives the ticket's effects (the loop: phase label, the review request) from
that recompute, usually within a second. A claim the recompute does not bear
out changes nothing on the ticket. The reply then says so:
   "ticketEffects": {"via": "loopd", "pending": [{"id", "op", "workItem", "summary"}]}
Pending is not failed: watch them land with ` + "`loopctl events`" + ` (outbox.performed,
outbox.failed, outbox.refused). Run by hand outside loopd, complete performs
the effects itself with your own credentials and the field is absent.

Example:
   loopctl graph complete issue-42`,
		Flags: append(append(repoFlagDefs(true), workItemFlag,
			&cli.StringFlag{Name: "node", Usage: "the node you claim (default: the current one); a claim on another node is refused"},
			&cli.StringFlag{Name: "actor", Value: "cli", Usage: "who claims, recorded in graph-state.json"},
			trustFlagDefs()[0], trustFlagDefs()[1],
		), outputFlags()...),
		Action: func(c *cli.Context) error {
			id, err := workItemArg(c, "complete")
			if err != nil {
				return err
			}
			opts := &completeOptions{Factory: f, Repo: readRepoFlags(c), WorkItem: id, Node: c.String("node"), Actor: c.String("actor")}
			if opts.Output, err = readOutput(c, "graph complete", nil); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runComplete(c.Context, opts)
		},
	}
}

func runComplete(ctx context.Context, opts *completeOptions) error {
	l, err := opts.Factory.openLive(opts.Repo, opts.WorkItem, "graph complete")
	if err != nil {
		return err
	}
	defer l.close()
	opts.Factory.warn(l.warnings)
	claim, err := l.rt.Complete(ctx, opts.WorkItem, opts.Node, opts.Actor)
	if errors.Is(err, graph.ErrBusy) {
		// The claim envelope the agent's skill documents: status busy, try
		// again.
		claim, err = busyClaim(opts.Node), nil
	}
	if err != nil {
		return loop.ExplainGraphError(err)
	}
	claim.Messages = escalationHint(opts.WorkItem, claim.Status, claim.Messages)
	var out any = claim
	if l.outbox != nil {
		out = managedClaim{Claim: claim, TicketEffects: pendingEffects(l.outbox)}
	}
	if err := opts.Output.write(opts.Factory.IO.Out, out); err != nil {
		return err
	}
	if claimFailed(claim.Status) {
		// The envelope is the answer; the exit status lets a script (or CI)
		// see a blocked claim without parsing it.
		return &exitError{code: exitFailed}
	}
	return nil
}

// managedClaim is the claim envelope in a loopd-managed session: the claim,
// plus the ticket effects loopd will perform.
type managedClaim struct {
	*graph.Claim
	TicketEffects ticketEffects `json:"ticketEffects"`
}

// ticketEffects are the claims a verb recorded in the session's outbox:
// requests, not effects — loopd recomputes the work item and derives what
// the ticket shows (docs/decisions.md §23).
type ticketEffects struct {
	Via     string          `json:"via"`
	Pending []pendingEffect `json:"pending"`
	// Error says a claim could not be recorded (the outbox full, say):
	// loopd will not hear of it until the next claim.
	Error string `json:"error,omitempty"`
}

type pendingEffect struct {
	ID       string `json:"id"`
	Op       string `json:"op"`
	WorkItem string `json:"workItem"`
	Summary  string `json:"summary"`
}

func pendingEffects(r *loop.Recorder) ticketEffects {
	te := ticketEffects{Via: "loopd", Pending: []pendingEffect{}}
	for _, in := range r.Recorded() {
		te.Pending = append(te.Pending, pendingEffect{ID: in.ID, Op: string(in.Op), WorkItem: in.WorkItem, Summary: in.Summary()})
	}
	if err := r.Err(); err != nil {
		te.Error = err.Error()
	}
	return te
}

// claimFailed reports whether a claim's status means the node's checks did
// not hold: graph complete then exits 1.
func claimFailed(s graph.Status) bool {
	return s == graph.StatusBlock || s == graph.StepEscalated
}

// escalationHint adds to the messages of an escalated step the command a
// human uses to move the work item on by hand.
func escalationHint(id string, status graph.Status, msgs []string) []string {
	if status != graph.StepEscalated {
		return msgs
	}
	return append(msgs, "a human can move it on by hand: `loopctl graph force "+id+" --to <node> --reason \"...\"`")
}

// claimBusy is the claim status loopctl reports when another process holds
// the work item's lock (graph.ErrBusy).
const claimBusy graph.Status = "busy"

func busyClaim(node string) *graph.Claim {
	return &graph.Claim{Node: node, Status: claimBusy, Reason: "busy", Messages: []string{"another theloop process holds the graph-state lock; try again"}}
}

// --- advance ----------------------------------------------------------------

type advanceOptions struct {
	Factory  *Factory
	Repo     repoFlags
	WorkItem string
	Output   output
}

func newAdvanceCmd(f *Factory, runF func(*advanceOptions) error) *cli.Command {
	return &cli.Command{
		Name:      "advance",
		Usage:     "re-evaluate the current node and move on if it passes (no event: human gates wait)",
		ArgsUsage: "WORK-ITEM",
		Description: `advance accepts no event on purpose: the comments a gate reads come only from
the daemon's ingress. Exit status: 0 for pass or wait, 1 for block or escalated
(or an unknown work item), 2 for bad usage.

Example:
   loopctl graph advance issue-42`,
		Flags: append(append(repoFlagDefs(true), workItemFlag), outputFlags()...),
		Action: func(c *cli.Context) error {
			id, err := workItemArg(c, "advance")
			if err != nil {
				return err
			}
			opts := &advanceOptions{Factory: f, Repo: readRepoFlags(c), WorkItem: id}
			if opts.Output, err = readOutput(c, "graph advance", nil); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			l, err := f.openLive(opts.Repo, id, "graph advance")
			if err != nil {
				return err
			}
			defer l.close()
			f.warn(l.warnings)
			rep, err := l.rt.Advance(c.Context, id, nil)
			if errors.Is(err, graph.ErrNotStarted) {
				return failWith(exitFailed, "loopctl graph advance: %v", loop.ExplainGraphError(err))
			}
			if err != nil {
				return loop.ExplainGraphError(err)
			}
			rep.Messages = escalationHint(id, rep.Status, rep.Messages)
			if err := opts.Output.write(f.IO.Out, rep); err != nil {
				return err
			}
			if rep.Status != graph.StatusPass && rep.Status != graph.StatusWait {
				return &exitError{code: exitFailed}
			}
			return nil
		},
	}
}

// --- run ----------------------------------------------------------------------

type runOptions struct {
	Factory  *Factory
	Repo     repoFlags
	WorkItem string
	MaxNodes int
	DryRun   bool
	Create   bool
}

func newRunCmd(f *Factory, runF func(*runOptions) error) *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "start the work item if needed and advance until it waits, blocks or ends",
		ArgsUsage: "WORK-ITEM",
		Description: `Exit status: 0 when the walk waits at a human gate or completes, 1 on a block,
an escalation, a node visited more than twice (a loop needing a human), or an
unknown work item; 2 for bad usage.

A work item without a spec directory is refused unless --create says to start
a new one, so that a typo never starts a second work item.

Examples:
   loopctl graph run issue-42
   loopctl graph run issue-43 --create`,
		Flags: append(repoFlagDefs(true), workItemFlag,
			&cli.IntFlag{Name: "max-nodes", Value: 20, Usage: "stop after this many advances"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the stored-pointer status instead of walking"},
			&cli.BoolFlag{Name: "create", Usage: "start a work item that has no spec directory yet (without it, an unknown id is refused: a typo never starts a new item)"},
		),
		Action: func(c *cli.Context) error {
			id, err := workItemArg(c, "run")
			if err != nil {
				return err
			}
			opts := &runOptions{Factory: f, Repo: readRepoFlags(c), WorkItem: id, MaxNodes: c.Int("max-nodes"), DryRun: c.Bool("dry-run"), Create: c.Bool("create")}
			if runF != nil {
				return runF(opts)
			}
			return runRun(c.Context, opts)
		},
	}
}

func runRun(ctx context.Context, opts *runOptions) error {
	f := opts.Factory
	if opts.DryRun {
		rt, err := f.openCheck(opts.Repo, opts.WorkItem)
		if err != nil {
			return err
		}
		rep, err := rt.Status(ctx, opts.WorkItem, false)
		if err != nil {
			return err
		}
		writeReport(f.IO.Out, f.colour(f.IO.Out), rep, rt.Graph().Name, false)
		return nil
	}
	l, err := f.openLiveWith(opts.Repo, opts.WorkItem, opts.Create, "graph run")
	if err != nil {
		return err
	}
	defer l.close()
	f.warn(l.warnings)
	if start, err := l.rt.Start(ctx, opts.WorkItem); err != nil {
		return err
	} else if start != nil {
		fmt.Fprintf(f.IO.Out, "started at %s\n", start.CurrentNode)
	}
	seen := map[string]int{}
	for i := 0; i < opts.MaxNodes; i++ {
		rep, err := l.rt.Advance(ctx, opts.WorkItem, nil)
		if err != nil {
			return loop.ExplainGraphError(err)
		}
		rep.Messages = escalationHint(opts.WorkItem, rep.Status, rep.Messages)
		fmt.Fprintf(f.IO.Out, "%-24s %-9s → %s\n", rep.Node, rep.Status, rep.CurrentNode)
		for _, m := range rep.Messages {
			fmt.Fprintf(f.IO.Out, "    %s\n", oneLine(m))
		}
		switch rep.Status {
		case graph.StatusWait:
			return nil
		case graph.StatusBlock, graph.StepEscalated:
			return &exitError{code: exitFailed}
		}
		if !rep.Moved {
			if n, ok := l.rt.Graph().Node(rep.CurrentNode); ok && n.Terminal {
				return nil
			}
			return &exitError{code: exitFailed}
		}
		seen[rep.CurrentNode]++
		if seen[rep.CurrentNode] > 2 {
			return failWith(exitFailed, "loopctl graph run: %s was entered more than twice; stopping for a human to look", rep.CurrentNode)
		}
	}
	return nil
}

// --- force ------------------------------------------------------------------

type forceOptions struct {
	Factory  *Factory
	Repo     repoFlags
	WorkItem string
	To       string
	Reason   string
	Actor    string
	Output   output
}

func newForceCmd(f *Factory, runF func(*forceOptions) error) *cli.Command {
	return &cli.Command{
		Name:      "force",
		Usage:     "move the pointer to a node regardless of gates — the audited escape hatch",
		ArgsUsage: "WORK-ITEM",
		Description: `force needs --reason. It enters the target (running its entry chain, also when
going backwards), warns about an undeclared edge or a bypassed required node,
and is recorded in graph-state.json, the execution log, the event log and a
marked comment on the ticket. It never forges a verdict: check --recompute
still reports the bypassed gate as unmet.

Example:
   loopctl graph force issue-42 --to design --reason "requirements approved in the planning meeting"`,
		Flags: append(append(repoFlagDefs(true), workItemFlag,
			&cli.StringFlag{Name: "to", Required: true, Usage: "the node to move to"},
			&cli.StringFlag{Name: "reason", Usage: "why (required)"},
			&cli.StringFlag{Name: "actor", Usage: "who (default: (shell))"},
		), outputFlags()...),
		Action: func(c *cli.Context) error {
			id, err := workItemArg(c, "force")
			if err != nil {
				return err
			}
			opts := &forceOptions{Factory: f, Repo: readRepoFlags(c), WorkItem: id, To: c.String("to"), Reason: c.String("reason"), Actor: c.String("actor")}
			if opts.Output, err = readOutput(c, "graph force", nil); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runForce(c.Context, opts)
		},
	}
}

func runForce(ctx context.Context, opts *forceOptions) error {
	f := opts.Factory
	l, err := f.openLive(opts.Repo, opts.WorkItem, "graph force")
	if err != nil {
		return err
	}
	defer l.close()
	f.warn(l.warnings)
	res, err := l.rt.Force(ctx, opts.WorkItem, graph.ForceRequest{To: opts.To, Reason: opts.Reason, Actor: opts.Actor})
	if errors.Is(err, graph.ErrReasonRequired) {
		return failWith(exitRefused, "refused: %v (--reason)", err)
	}
	if errors.Is(err, graph.ErrUnknownNode) {
		return failWith(exitRefused, "refused: %v", err)
	}
	if err != nil {
		return err
	}
	if err := opts.Output.write(f.IO.Out, res); err != nil {
		return err
	}
	for _, w := range res.Warnings {
		fmt.Fprintln(f.IO.ErrOut, "warning:", w)
	}
	return nil
}

// --- skip -------------------------------------------------------------------

type skipOptions struct {
	Factory  *Factory
	Repo     repoFlags
	WorkItem string
	Tokens   []string
	Reason   string
	Actor    string
	List     bool
	Output   output
}

func newSkipCmd(f *Factory, runF func(*skipOptions) error) *cli.Command {
	return &cli.Command{
		Name:      "skip",
		Usage:     "declare nodes (or skip sets) this work item will not walk",
		ArgsUsage: "WORK-ITEM",
		Description: `A skip is a plan, not an amnesty: nodes already entered or behind the pointer
are refused, as are nodes that are not skippable. --reason is required.
Exit status: 0 if anything was declared, 1 if nothing new was (already
declared), 2 on refusal (no reason, an unknown or unskippable node or set,
every node refused).

Examples:
   loopctl graph skip issue-42 --list
   loopctl graph skip issue-42 --set review-chain --reason "docs-only change"`,
		Flags: append(append(repoFlagDefs(true), workItemFlag,
			&cli.StringSliceFlag{Name: "node", Usage: "a skippable node (repeatable)"},
			&cli.StringSliceFlag{Name: "set", Usage: "a skip set of the graph (repeatable)"},
			&cli.BoolFlag{Name: "list", Usage: "list the graph's skip sets and skippable nodes instead of declaring"},
			&cli.StringFlag{Name: "reason", Usage: "why (required)"},
			&cli.StringFlag{Name: "actor", Usage: "who (default: (shell))"},
		), outputFlags()...),
		Action: func(c *cli.Context) error {
			id, err := workItemArg(c, "skip")
			if err != nil {
				return err
			}
			opts := &skipOptions{Factory: f, Repo: readRepoFlags(c), WorkItem: id, Tokens: append(c.StringSlice("node"), c.StringSlice("set")...), Reason: c.String("reason"), Actor: c.String("actor"), List: c.Bool("list")}
			if opts.Output, err = readOutput(c, "graph skip", nil); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runSkip(c.Context, opts)
		},
	}
}

func runSkip(ctx context.Context, opts *skipOptions) error {
	f := opts.Factory
	if opts.List {
		rt, err := f.openCheck(opts.Repo, opts.WorkItem)
		if err != nil {
			return err
		}
		writeSkippable(f.IO.Out, f.colour(f.IO.Out), rt.Graph())
		return nil
	}
	if len(opts.Tokens) == 0 {
		return failWith(exitRefused, "refused: name at least one node (--node) or skip set (--set) to declare; --list shows them")
	}
	l, err := f.openLive(opts.Repo, opts.WorkItem, "graph skip")
	if err != nil {
		return err
	}
	defer l.close()
	f.warn(l.warnings)
	if err := checkSkipTokens(l.rt.Graph(), opts.Tokens); err != nil {
		return err
	}
	res, err := l.rt.DeclareSkips(ctx, opts.WorkItem, opts.Tokens, opts.Reason, opts.Actor)
	if errors.Is(err, graph.ErrReasonRequired) {
		return failWith(exitRefused, "refused: %v (--reason)", err)
	}
	if err != nil {
		return err
	}
	if err := opts.Output.write(f.IO.Out, res); err != nil {
		return err
	}
	for _, rj := range res.Rejected {
		fmt.Fprintf(f.IO.ErrOut, "refused: %s: %s\n", rj.Token, rj.Why)
	}
	switch {
	case len(res.Declared) > 0:
		return nil
	case len(res.Rejected) > 0:
		return &exitError{code: exitRefused}
	}
	return &exitError{code: exitFailed}
}

// skippable returns the graph's skip sets and skippable nodes.
func skippable(g *graph.Graph) (sets, nodes []string) {
	for _, s := range g.SkipSets() {
		sets = append(sets, s.Name)
	}
	for _, n := range g.Nodes() {
		if n.Skippable && !n.Required {
			nodes = append(nodes, n.ID)
		}
	}
	return sets, nodes
}

// checkSkipTokens refuses (exit 2) a token that is neither a skip set nor a
// skippable node, naming what exists.
func checkSkipTokens(g *graph.Graph, tokens []string) error {
	sets, nodes := skippable(g)
	for _, t := range tokens {
		t = strings.TrimSpace(t)
		if slices.Contains(sets, t) || slices.Contains(nodes, t) {
			continue
		}
		msg := fmt.Sprintf("refused: %q is not a skip set or skippable node of %s", t, g.Name)
		if near := loop.Nearest(t, append(slices.Clone(sets), nodes...)); len(near) > 0 {
			msg += "; did you mean " + strings.Join(near, " or ") + "?"
		}
		msg += fmt.Sprintf("\n  skip sets (--set): %s\n  skippable nodes (--node): %s", orNone(sets), orNone(nodes))
		return failWith(exitRefused, "%s", msg)
	}
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "(none)"
	}
	return strings.Join(s, ", ")
}

func writeSkippable(w io.Writer, on bool, g *graph.Graph) {
	tw := newTable(w, on)
	tw.head("KIND\tNAME\tNODES")
	for _, s := range g.SkipSets() {
		tw.row("set\t%s\t%s\n", s.Name, strings.Join(s.Members, ", "))
	}
	_, nodes := skippable(g)
	for _, n := range nodes {
		tw.row("node\t%s\t%s\n", n, n)
	}
	tw.flush()
}

// --- hooks ------------------------------------------------------------------

func newHooksCmd(f *Factory, runF func(*showOptions) error) *cli.Command {
	return &cli.Command{
		Name:        "hooks",
		Usage:       "list the registered hooks, the integration operations each needs, and where the graph uses them",
		Description: "Example:\n   loopctl graph hooks --loop pdlc-pr-loop",
		Flags: append(append(repoFlagDefs(false),
			&cli.StringFlag{Name: "loop", Usage: "a shipped loop (default: pdlc-work-item-loop)"},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table or json"}), outputFlags()...),
		Action: func(c *cli.Context) error {
			if err := noArgs(c, "graph hooks", ""); err != nil {
				return err
			}
			opts := &showOptions{Factory: f, Repo: readRepoFlags(c), Loop: c.String("loop"), Format: c.String("format")}
			var err error
			if opts.Output, err = readOutput(c, "graph hooks", &opts.Format); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runHooks(opts)
		},
	}
}

type hookInfo struct {
	Name    string   `json:"name"`
	Summary string   `json:"summary"`
	Needs   []string `json:"needs"`
	UsedBy  []string `json:"usedBy"`
	// Params are the declared `with:` parameters (null when the hook has
	// not declared them, [] when it takes none).
	Params []graph.Param `json:"params"`
}

// paramsCell renders declared parameters as "name:type" (required ones
// marked "!"), "-" for none and "?" when the hook declares nothing.
func paramsCell(ps []graph.Param) string {
	if ps == nil {
		return "?"
	}
	if len(ps) == 0 {
		return "-"
	}
	cells := make([]string, len(ps))
	for i, p := range ps {
		cells[i] = p.Name + ":" + string(p.Type)
		if p.Required {
			cells[i] += "!"
		}
	}
	return strings.Join(cells, ", ")
}

func runHooks(opts *showOptions) error {
	name := opts.Loop
	if name == "" {
		name = loop.WorkItemLoop
	}
	g, err := shippedGraph(name)
	if err != nil {
		return err
	}
	if opts.Repo.GraphFile != "" {
		if g, err = opts.Factory.graphFlag(opts.Repo); err != nil {
			return err
		}
	}
	used := map[string][]string{}
	use := func(hook, where string) {
		if !slices.Contains(used[hook], where) {
			used[hook] = append(used[hook], where)
		}
	}
	for _, n := range g.Nodes() {
		for _, h := range n.Entry {
			use(h.Name, n.ID+" (entry)")
		}
		for _, h := range n.Exit {
			use(h.Name, n.ID+" (exit)")
		}
	}
	for _, h := range g.OnEscalation() {
		use(h.Name, "onEscalation")
	}
	var infos []hookInfo
	for _, spec := range loop.ShippedHooks().Specs() {
		needs := make([]string, len(spec.Needs))
		for i, op := range spec.Needs {
			needs[i] = string(op)
		}
		infos = append(infos, hookInfo{Name: spec.Name, Summary: spec.Summary, Needs: needs, UsedBy: append([]string{}, used[spec.Name]...), Params: spec.Params})
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].Name < infos[j].Name })
	if opts.Format == "json" {
		return opts.Output.write(opts.Factory.IO.Out, infos)
	}
	tw := newTable(opts.Factory.IO.Out, opts.Factory.colour(opts.Factory.IO.Out))
	tw.head("HOOK\tNEEDS\tUSED IN " + g.Name + "\tPARAMETERS (! required)\tWHAT IT CHECKS OR DOES")
	for _, h := range infos {
		needs := strings.Join(h.Needs, ", ")
		if needs == "" {
			needs = "-"
		}
		usedBy := fmt.Sprintf("%d node(s)", len(h.UsedBy))
		if len(h.UsedBy) == 0 {
			usedBy = "-"
		}
		tw.row("%s\t%s\t%s\t%s\t%s\n", h.Name, needs, usedBy, paramsCell(h.Params), h.Summary)
	}
	return tw.flush()
}
