package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop"
	demoagent "github.com/theloop-dev/theloop/loop/demo/agent"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/run"
)

type demoOptions struct {
	Factory *Factory
	Dir     string
	Keep    bool
}

func newDemoCmd(f *Factory, runF func(*demoOptions) error) *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "walk a sample work item through the whole work-item loop (no GitHub account needed)",
		Description: `demo creates a temporary git repository and walks issue #1 through
pdlc-work-item-loop with scripted agent and human turns, against an in-process
stand-in for the ticket (comments and labels). It prints every transition, every
assignment the agent receives, every comment theloop posts, and ends with the
check table and a mermaid picture of where the work item stands.

Everything runs on the real runtime, hooks, filesystem store and git.

Example:
   loopctl demo --yes`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Usage: "create the demo repository here instead of a temporary directory"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the demo repository afterwards (its path is printed)"},
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c, "demo", "name the directory with --dir"); err != nil {
				return err
			}
			opts := &demoOptions{Factory: f, Dir: c.String("dir"), Keep: c.Bool("keep")}
			if runF != nil {
				return runF(opts)
			}
			return runDemo(c.Context, opts)
		},
	}
}

// demo is one scripted walk.
type demo struct {
	ctx     context.Context
	out     io.Writer
	repo    string
	id      string
	ref     string
	git     run.Runner
	tickets *printingTickets
	daemon  *graph.Runtime // drives the graph from ticket events; delivers assignments
	agent   *graph.Runtime // what `loopctl graph complete` uses: no delivery channel
	err     error
}

// printingTickets is the ticket stand-in, narrating what theloop does to the
// ticket.
type printingTickets struct {
	*demoTickets
	out io.Writer
}

func (p *printingTickets) Call(ctx context.Context, op graph.Operation, args map[string]any) (map[string]any, error) {
	res, err := p.demoTickets.Call(ctx, op, args)
	if err != nil {
		return res, err
	}
	v := graph.Values(args)
	switch op {
	case ops.GitHubAddComment:
		title := firstLine(v.String("body"))
		fmt.Fprintf(p.out, "  ticket  ← comment %s\n", title)
	case ops.GitHubSetLabels:
		fmt.Fprintf(p.out, "  ticket  ← labels %s\n", strings.Join(graph.Values(res).Strings("labels"), ", "))
	case ops.SlackPostMessage:
		fmt.Fprintf(p.out, "  slack   ← %s\n", v.String("text"))
	}
	return res, nil
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return ""
}

func runDemo(ctx context.Context, opts *demoOptions) error {
	f := opts.Factory
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "theloop-demo-"); err != nil {
			return err
		}
		if !opts.Keep {
			defer os.RemoveAll(dir)
		}
	} else if err := prepareDemoDir(dir); err != nil {
		return err
	}
	d := &demo{ctx: ctx, out: f.IO.Out, repo: dir, id: "issue-1", ref: "github:demo/widgets#1", git: run.Exec{}}
	d.tickets = &printingTickets{demoTickets: newDemoTickets(), out: d.out}
	if err := d.setUp(f); err != nil {
		return err
	}
	d.script()
	if d.err != nil {
		return d.err
	}
	return d.finish(opts.Keep || opts.Dir != "")
}

func (d *demo) setUp(f *Factory) error {
	fmt.Fprintf(d.out, "theloop demo — issue #1 walked through %s\n", loop.WorkItemLoop)
	fmt.Fprintf(d.out, "repository: %s (a real git repository)\n\n", d.repo)
	if err := d.gitRun("init", "-q", "-b", "main"); err != nil {
		return fmt.Errorf("loopctl demo needs git: %w", err)
	}
	d.write(".the-loop/harness-config.yaml", demoagent.HarnessConfig("demo", "widgets"))
	d.write(".the-loop/collaborators.yaml", demoagent.Collaborators("dana", "Dana"))
	d.write("docs/specs/issue-1/execution-log.md", "# Execution log — issue-1\n")
	d.commit("chore: adopt the-loop")
	// The lock files are per-process coordination, not history.
	d.write(".gitignore", "graph-state.lock\n")
	base := loop.Options{Integrations: d.tickets, AuthorizedUsers: []string{"dana"}, Clock: f.Clock,
		Commands: loop.Commands{Runner: d.git, Root: d.repo}}
	daemonOpts := base
	daemonOpts.Deliver = func(_ context.Context, _ string, text string) (bool, error) {
		fmt.Fprintln(d.out, "  agent   ← assignment (pasted into its session):")
		for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			fmt.Fprintf(d.out, "            %s\n", l)
		}
		return true, nil
	}
	var err error
	if d.daemon, err = loop.Open(d.repo, daemonOpts); err != nil {
		return err
	}
	d.agent, err = loop.Open(d.repo, base)
	return err
}

func (d *demo) fail(err error) {
	if d.err == nil && err != nil {
		d.err = err
	}
}

func (d *demo) write(rel, content string) {
	p := filepath.Join(d.repo, filepath.FromSlash(rel))
	d.fail(os.MkdirAll(filepath.Dir(p), 0o755))
	d.fail(os.WriteFile(p, []byte(content), 0o644))
}

func (d *demo) appendLog(section, body string) {
	p := filepath.Join(d.repo, "docs", "specs", d.id, "execution-log.md")
	old, err := os.ReadFile(p)
	d.fail(err)
	d.fail(os.WriteFile(p, append(old, []byte("\n## "+section+"\n\n"+body+"\n")...), 0o644))
}

func (d *demo) gitRun(args ...string) error {
	c := run.Git(append([]string{"-c", "user.name=demo agent", "-c", "user.email=agent@demo.invalid"}, args...)...)
	c.Dir = d.repo
	_, err := d.git.Run(d.ctx, c)
	return err
}

func (d *demo) commit(msg string) {
	d.fail(d.gitRun("add", "-A"))
	d.fail(d.gitRun("commit", "-q", "--allow-empty", "-m", msg))
}

// human comments on the ticket; the daemon hands the comment to the gate.
func (d *demo) human(body string) {
	if d.err != nil {
		return
	}
	fmt.Fprintf(d.out, "\n@dana comments: %q\n", firstLine(body))
	c := d.tickets.Comment(d.ref, "dana", body)
	rep, err := d.daemon.Advance(d.ctx, d.id, &graph.Event{ID: "demo-" + c.ID, Kind: integrations.EventIssueComment, Comments: []graph.Comment{c}})
	if err != nil {
		d.fail(err)
		return
	}
	d.step(rep.Node, rep.Status, rep.Outcome, rep.CurrentNode, rep.Moved, rep.Messages)
}

// agent writes artifacts, commits, and claims the node done.
func (d *demo) agentTurn(what string, files map[string]string) {
	if d.err != nil {
		return
	}
	fmt.Fprintf(d.out, "\nagent: %s\n", what)
	for rel, content := range files {
		// The agent edits an approved artifact: the lock and the review
		// the gate wrote stay (R5.2).
		p := filepath.Join(d.repo, "docs", "specs", d.id, filepath.FromSlash(rel))
		if old, err := os.ReadFile(p); err == nil {
			content = demoagent.Revise(string(old), content)
		}
		d.write("docs/specs/"+d.id+"/"+rel, content)
	}
	d.commit("docs(" + d.id + "): " + what)
	fmt.Fprintf(d.out, "  agent   $ loopctl graph complete %s\n", d.id)
	claim, err := d.agent.Complete(d.ctx, d.id, "", "demo-agent")
	if err != nil {
		d.fail(err)
		return
	}
	d.step(claim.Node, claim.Status, claim.Outcome, claim.CurrentNode, claim.Moved, claim.Messages)
}

func (d *demo) step(node string, status graph.Status, outcome, current string, moved bool, msgs []string) {
	switch {
	case moved:
		fmt.Fprintf(d.out, "  theloop %s: %s → now at %s\n", node, outcome, current)
	default:
		fmt.Fprintf(d.out, "  theloop %s: %s — stays at %s\n", node, status, current)
	}
	for _, m := range msgs {
		if strings.HasPrefix(m, "advanced to ") {
			continue
		}
		fmt.Fprintf(d.out, "            %s\n", oneLine(m))
	}
}

// script is the walk: a selection, a blocked claim, a request for changes,
// an approval with comments, and the rest of the loop.
func (d *demo) script() {
	fmt.Fprintln(d.out, "@dana comments: \"the-loop start\"  (the daemon starts the work item)")
	rep, err := d.daemon.Start(d.ctx, d.id)
	if err != nil {
		d.fail(err)
		return
	}
	if rep == nil {
		d.fail(fmt.Errorf("loopctl demo: %s was already started in %s; run the demo in a new directory", d.id, d.repo))
		return
	}
	d.step("start", rep.Status, "start", rep.CurrentNode, false, rep.Messages)

	d.human("the-loop execute\n\n- [ ] brainstorming\n- [ ] capability-docs")

	d.agentTurn("writes requirements.md (forgets the security section)", map[string]string{"requirements.md": demoagent.RequirementsDraft})
	d.agentTurn("adds the security considerations", map[string]string{"requirements.md": demoagent.Requirements})
	d.agentTurn("claims the approval gate too (it may not)", nil)
	d.human("Changes requested: name the CSV dialect.")
	d.agentTurn("names the dialect (RFC 4180)", map[string]string{"requirements.md": strings.Replace(demoagent.Requirements, "as CSV.", "as CSV (RFC 4180).", 1)})
	d.human("Approved, but keep the column order stable.")

	d.agentTurn("writes design.md (does not answer the trust boundary)", map[string]string{"design.md": demoagent.DesignDraft})
	d.agentTurn("answers the trust boundary and the abuse case", map[string]string{"design.md": demoagent.Design})
	d.agentTurn("writes testing-plan.md", map[string]string{"testing-plan.md": demoagent.TestingPlan})
	d.human("LGTM")

	d.agentTurn("breaks the work into tasks", map[string]string{"tasks.md": demoagent.TasksOpen})
	d.agentTurn("claims implementation with tasks still open", nil)
	d.agentTurn("implements and ticks every task", map[string]string{"tasks.md": demoagent.TasksDone})
	d.appendLog(demoagent.LogVerification.Heading, demoagent.LogVerification.Body)
	d.agentTurn("records the verification results in the execution log (the testing plan is locked)", nil)
	d.appendLog(demoagent.LogReviewCycles.Heading, demoagent.LogReviewCycles.Body)
	d.agentTurn("self-review recorded in the execution log", nil)
	d.agentTurn("critic review (same section)", nil)
	d.appendLog(demoagent.LogSecurityReview.Heading, demoagent.LogSecurityReview.Body)
	d.agentTurn("security review recorded", nil)
	d.appendLog(demoagent.LogEvidence.Heading, demoagent.LogEvidence.Body)
	d.agentTurn("evidence recorded", nil)
	d.appendLog(demoagent.LogPullRequests.Heading, demoagent.LogPullRequests.Body)
	d.agentTurn("reviewer briefing recorded", nil)
	d.human("Approved — ship it")
}

func (d *demo) finish(kept bool) error {
	d.commit("chore(" + d.id + "): graph state")
	fmt.Fprintf(d.out, "\n$ loopctl check %s --recompute\n", d.id)
	rep, err := d.agent.Status(d.ctx, d.id, true)
	if err != nil {
		return err
	}
	writeReport(d.out, colourFor(d.out, os.Getenv), rep, loop.WorkItemLoop, true)
	fmt.Fprintf(d.out, "\n$ loopctl graph show --work-item %s --format mermaid\n", d.id)
	var buf bytes.Buffer
	plain, err := d.agent.Status(d.ctx, d.id, false)
	if err != nil {
		return err
	}
	renderMermaid(&buf, d.agent.Graph(), marksFrom(plain))
	fmt.Fprint(d.out, buf.String())
	fmt.Fprintf(d.out, "\nlabels on the ticket: %s\n", strings.Join(d.tickets.Labels(d.ref), ", "))
	fmt.Fprintf(d.out, "comments theloop posted: %d\n", d.tickets.Posted())
	if kept {
		fmt.Fprintf(d.out, "the repository is kept at %s — try: loopctl check %s --repo %s\n", d.repo, d.id, d.repo)
	}
	if !rep.OK {
		return failWith(exitFailed, "loopctl demo: the walk did not complete")
	}
	return nil
}
