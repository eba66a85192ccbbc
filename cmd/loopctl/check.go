package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/run"
)

type checkOptions struct {
	IO      IOStreams
	Factory *Factory
	Repo    repoFlags
	ID      string
	All     bool
	// Changed is the base revision of --changed.
	Changed   string
	Recompute bool
	Format    string
	FailOn    string
	Output    output
}

func newCheckCmd(f *Factory, runF func(*checkOptions) error) *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "report every node's verdict for a work item (pure: no network, no subprocess, no writes)",
		ArgsUsage: "[WORK-ITEM]",
		Description: `check evaluates every node's exit chain, in declaration order, against the
work item's artifacts and reports pass, skip, wait or block for each.

With --recompute the stored pointer is not trusted: the current node is the
first node that is not satisfied, from the artifacts and the recorded human
decisions alone. The Stop hook and CI always use it.

The repository is found from the current directory upwards, as git finds it
(--repo overrides). --all with no work items fails: CI never passes on nothing.

--changed BASE checks every work item whose spec directory has a file that
differs between BASE and HEAD (git diff BASE...HEAD: what a pull request
changed). It fails when the diff cannot be computed (no git, not a
repository, an unknown revision — fetch the base first); a pull request that
touches no work item passes with a note. A deleted work item is reported and
not checked.

Recorded decisions count only when signed by a trusted key once a trust anchor
is given (--trust-key, $THE_LOOP_TRUST_KEYS, or --trust-base REV to read the
base branch's .the-loop/trusted-keys); a refused decision blocks its gate and
says why. Without an anchor they are honoured as the-loop does, with a warning.

Exit status: 0 ok; 1 the check failed (see --fail-on), no such work item, or
no repository; 2 bad usage.

Examples:
   loopctl check issue-42 --recompute
   loopctl check issue-42 --recompute --fail-on block --format json   # CI
   loopctl check --all --recompute
   loopctl check --changed origin/main --recompute --fail-on block   # a pull request`,
		Flags: append(append(repoFlagDefs(true),
			&cli.BoolFlag{Name: "all", Usage: "check every work item under the spec directory"},
			&cli.StringFlag{Name: "changed", Usage: "check every work item whose spec directory changed between `BASE` and HEAD (git diff BASE...HEAD)"},
			&cli.BoolFlag{Name: "recompute", Usage: "derive the current node from the artifacts, ignoring graph-state.json's pointer"},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table or json"},
			&cli.StringFlag{Name: "fail-on", Value: "unmet", Usage: "unmet: fail unless every node up to the current one is satisfied; block: fail only on a block at or before the current node"},
			trustFlagDefs()[0], trustFlagDefs()[1],
		), outputFlags()...),
		Action: func(c *cli.Context) error {
			opts := &checkOptions{IO: f.IO, Factory: f, Repo: readRepoFlags(c), ID: c.Args().First(), All: c.Bool("all"), Changed: c.String("changed"),
				Recompute: c.Bool("recompute"), Format: c.String("format"), FailOn: c.String("fail-on")}
			var err error
			if opts.Output, err = readOutput(c, "check", &opts.Format); err != nil {
				return err
			}
			if c.NArg() > 1 {
				return failWith(exitRefused, "loopctl check: one work item at a time (or --all); got %s", strings.Join(c.Args().Slice(), " "))
			}
			if c.IsSet("changed") && strings.TrimSpace(opts.Changed) == "" {
				return failWith(exitRefused, "loopctl check: --changed needs a base revision, e.g. --changed origin/main")
			}
			picked := 0
			for _, on := range []bool{opts.ID != "", opts.All, opts.Changed != ""} {
				if on {
					picked++
				}
			}
			if picked == 0 {
				return failWith(exitRefused, "loopctl check: name a work item (e.g. issue-42), or pass --all or --changed BASE")
			}
			if picked > 1 {
				return failWith(exitRefused, "loopctl check: pass one of a work item, --all or --changed BASE")
			}
			switch opts.Format {
			case "table", "json":
			default:
				return failWith(exitRefused, "loopctl check: --format must be table or json, not %q", opts.Format)
			}
			switch opts.FailOn {
			case "unmet", "block":
			default:
				return failWith(exitRefused, "loopctl check: --fail-on must be unmet or block, not %q", opts.FailOn)
			}
			if runF != nil {
				return runF(opts)
			}
			return runCheck(c.Context, opts)
		},
	}
}

// checkReport is graph.Report plus the repoResolved flag the-loop prints for
// a repository that does not exist.
type checkReport struct {
	*graph.Report
	RepoResolved *bool `json:"repoResolved,omitempty"`
}

func runCheck(ctx context.Context, opts *checkOptions) error {
	root, err := opts.Factory.repoRoot(opts.Repo)
	if err != nil {
		if opts.Format == "json" {
			no := false
			rep := checkReport{Report: &graph.Report{WorkItem: opts.ID, Nodes: []graph.NodeReport{}}, RepoResolved: &no}
			_ = opts.Output.write(opts.IO.Out, rep)
		}
		return err
	}
	if opts.Repo.Config != "" {
		// check's verdicts need nothing of the CLI config (it is pure), but
		// a file named on the command line is loaded and validated as every
		// verb does: a broken or missing config never passes in silence.
		if _, err := os.Stat(opts.Repo.Config); err != nil {
			return failWith(exitRefused, "loopctl check: --config %s: %v", opts.Repo.Config, err)
		}
		if _, err := opts.Factory.cliConfig(opts.Repo.Config, root); err != nil {
			return failWith(exitRefused, "loopctl check: --config %s: %v", opts.Repo.Config, strings.TrimPrefix(err.Error(), "loopctl: "))
		}
	}
	repo, err := loop.OpenRepo(root, "")
	if err != nil {
		return err
	}
	ids := []string{opts.ID}
	many := opts.All || opts.Changed != ""
	if opts.Changed != "" {
		changed, err := repo.ChangedWorkItems(ctx, run.Exec{}, opts.Changed)
		if err != nil {
			if opts.Format == "json" {
				_ = opts.Output.write(opts.IO.Out, []*graph.Report{})
			}
			// Fail closed: CI must never pass on a diff it could not read.
			return failWith(exitFailed, "loopctl check --changed: %v; nothing was checked", err)
		}
		for _, id := range changed.Deleted {
			fmt.Fprintf(opts.IO.ErrOut, "note: work item %s was deleted between %s and HEAD; it is not checked\n", id, opts.Changed)
		}
		ids = changed.Present
		if len(ids) == 0 {
			if opts.Format == "json" {
				return opts.Output.write(opts.IO.Out, []*graph.Report{})
			}
			fmt.Fprintf(opts.IO.Out, "no work item under %s changed between %s and HEAD; nothing to check\n", repo.SpecRoot(), opts.Changed)
			return nil
		}
		for _, id := range ids {
			if err := repo.RequireWorkItem(id); err != nil {
				return workItemError(err)
			}
		}
	} else if opts.All {
		if ids, err = repo.WorkItems(); err != nil {
			return err
		}
		if len(ids) == 0 {
			// CI must never pass green on nothing.
			if opts.Format == "json" {
				_ = opts.Output.write(opts.IO.Out, []*graph.Report{})
			}
			return failWith(exitFailed, "loopctl check --all: no work items in %s (no work item directories under %s); nothing was checked", repo.Root, repo.SpecRoot())
		}
	} else if err := repo.RequireWorkItem(opts.ID); err != nil {
		return workItemError(err)
	}
	g, err := opts.Factory.graphFlag(opts.Repo)
	if err != nil {
		return err
	}
	verifier, err := opts.Factory.verifier(ctx, opts.Factory.withTrustEnv(opts.Repo.Trust, repo.Root), true)
	if err != nil {
		return err
	}
	var reports []*graph.Report
	loopName := ""
	failed := false
	phasesSaid := map[*graph.Graph]bool{}
	for _, id := range ids {
		// Each work item may record its own loop (contribution, ad hoc).
		rt, err := repo.Runtime(loop.Options{Graph: g, WorkItem: id, PR: opts.Repo.PR, PRRepo: opts.Repo.PRRepo, Clock: opts.Factory.Clock, DecisionVerifier: verifier})
		if err != nil {
			return err
		}
		loopName = rt.Graph().Name
		// R9.3: workflow.phases is derived from the graph; say once per
		// graph where it differs (stderr: the JSON report keeps its shape).
		if rg := rt.Graph(); !phasesSaid[rg] && loop.PhaseGraph(rg) {
			phasesSaid[rg] = true
			for _, w := range repo.Harness.PhaseWarnings(rg) {
				fmt.Fprintln(opts.IO.ErrOut, "warning:", w)
			}
		}
		rep, err := rt.Status(ctx, id, opts.Recompute)
		if err != nil {
			return err
		}
		reports = append(reports, rep)
		if checkFails(rep, opts.FailOn) {
			failed = true
		}
	}
	if opts.Format == "json" {
		var v any = reports[0]
		if many {
			v = reports
		}
		if err := opts.Output.write(opts.IO.Out, v); err != nil {
			return err
		}
	} else if many {
		writeSummary(opts.IO.Out, opts.colour(), reports, opts.FailOn)
	} else {
		writeReport(opts.IO.Out, opts.colour(), reports[0], loopName, opts.Recompute)
	}
	if !many {
		if hint := phaseSelectionHint(reports[0]); hint != "" {
			fmt.Fprintln(opts.IO.ErrOut, hint)
		}
	}
	if failed {
		return &exitError{code: exitFailed}
	}
	return nil
}

// phaseSelectionHint says, for an item waiting at phase-selection, how it
// gets past: the gate moves only on an authorized reply on the ticket, which
// reaches the runtime through loopd's ingress (no CLI verb carries a ticket
// event), or by an audited force. "" for any other item.
func phaseSelectionHint(rep *graph.Report) string {
	if rep == nil || rep.CurrentNode != "phase-selection" {
		return ""
	}
	next := ""
	for i, n := range rep.Nodes {
		if n.Node == rep.CurrentNode {
			if n.Status != graph.StatusWait {
				return ""
			}
			if i+1 < len(rep.Nodes) {
				next = rep.Nodes[i+1].Node
			}
		}
	}
	if next == "" {
		return ""
	}
	return fmt.Sprintf("note: %s waits at phase-selection until an authorized person replies `the-loop execute` on its ticket (with the phases ticked); loopd hears that reply and signs the decision — no loopctl verb can, since the CLI carries no ticket event. Without loopd, move on with an audited force: loopctl graph force %s --to %s --reason \"…\" (and loopctl graph skip %s --set … for phases you will not walk).", rep.WorkItem, rep.WorkItem, next, rep.WorkItem)
}

// checkFails applies --fail-on to a report (docs/graph.md §5.5).
func checkFails(rep *graph.Report, failOn string) bool {
	if failOn == "unmet" {
		return !rep.OK
	}
	for _, n := range rep.Nodes {
		if n.Status == graph.StatusBlock {
			return true
		}
		if n.Node == rep.CurrentNode {
			break
		}
	}
	return false
}

func writeJSON(w io.Writer, v any) {
	if reps, ok := v.([]*graph.Report); ok && len(reps) > 0 {
		writeReportsJSON(w, reps)
		return
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeReportsJSON writes the bytes writeJSON's encoder gives for reps, one
// report at a time: the encoder marshals a whole value, then indents a copy
// of it, so `check --all` held its 300 KB report list in memory three times
// over (two growing buffers, paid in page faults on a fresh heap). An array
// element indented under the prefix "  " is what the whole array's encoding
// holds at that place (TestWriteReportsJSONIsEncoderOutput compares).
func writeReportsJSON(w io.Writer, reps []*graph.Report) {
	bw := bufio.NewWriterSize(w, 64<<10)
	var one bytes.Buffer
	enc := json.NewEncoder(&one)
	enc.SetEscapeHTML(false)
	enc.SetIndent("  ", "  ")
	bw.WriteString("[\n  ")
	for i, rep := range reps {
		one.Reset()
		if err := enc.Encode(rep); err != nil {
			return
		}
		if i > 0 {
			bw.WriteString(",\n  ")
		}
		// Without Encode's newline: the separator or the bracket follows.
		bw.Write(bytes.TrimSuffix(one.Bytes(), []byte("\n")))
	}
	bw.WriteString("\n]\n")
	_ = bw.Flush()
}

// writeReport prints one work item's report for people.
func writeReport(w io.Writer, on bool, rep *graph.Report, loopName string, recompute bool) {
	mode := "stored pointer"
	if recompute {
		mode = "recomputed from the artifacts"
	}
	verdict := "ok"
	if !rep.OK {
		verdict = "NOT ok"
	}
	fmt.Fprintf(w, "%s — %s — current node: %s (%s) — %s\n", rep.WorkItem, loopName, rep.CurrentNode, mode, paint(on, verdict))
	if rep.Parked != nil {
		fmt.Fprintf(w, "parked at %s since %s\n", rep.Parked.Node, rep.Parked.Since)
	}
	for _, warn := range rep.Warnings {
		fmt.Fprintln(w, "warning:", warn)
	}
	cut := detailWidth(w)
	tw := newTable(w, on)
	tw.head("\tNODE\tSTATUS\tATTEMPTS\tDETAIL", 2)
	for _, n := range rep.Nodes {
		mark := ""
		if n.Node == rep.CurrentNode {
			mark = "▶"
		}
		status := paint(on, string(n.Status))
		if n.Forced {
			status += " (forced)"
		}
		detail := ""
		if len(n.Messages) > 0 {
			detail = n.Messages[0]
		}
		tw.row("%s\t%s\t%s\t%d\t%s\n", mark, n.Node, status, n.Attempts, oneLineN(detail, cut))
		for _, m := range n.Messages[min(1, len(n.Messages)):] {
			tw.row("\t\t%s\t\t%s\n", paint(on, ""), oneLineN(m, cut))
		}
	}
	tw.flush()
}

// colour reports whether the check's output is coloured.
func (o *checkOptions) colour() bool {
	if o.Factory != nil {
		return o.Factory.colour(o.IO.Out)
	}
	return colourFor(o.IO.Out, os.Getenv)
}

// writeSummary prints one line per work item.
func writeSummary(w io.Writer, on bool, reps []*graph.Report, failOn string) {
	cut := detailWidth(w)
	tw := newTable(w, on)
	tw.head("WORK ITEM\tCURRENT NODE\tSTATUS\tRESULT\tDETAIL", 2, 3)
	bad := 0
	for _, rep := range reps {
		status, detail := "", ""
		if n, ok := rep.Node(rep.CurrentNode); ok {
			status = string(n.Status)
			if len(n.Messages) > 0 {
				detail = n.Messages[0]
			}
		}
		result := "ok"
		if checkFails(rep, failOn) {
			result = "FAIL"
			bad++
		}
		tw.row("%s\t%s\t%s\t%s\t%s\n", rep.WorkItem, rep.CurrentNode, paint(on, status), paint(on, result), oneLineN(detail, cut))
	}
	tw.flush()
	fmt.Fprintf(w, "%d work item(s), %d failing (--fail-on %s)\n", len(reps), bad, failOn)
}

// maxDetail bounds one table cell whatever the output (a guard against a
// pathological message, not a layout choice).
const maxDetail = 2000

func oneLine(s string) string { return oneLineN(s, maxDetail) }

// oneLineN puts s on one line, cut to n runes (n <= 0: maxDetail).
func oneLineN(s string, n int) string {
	if n <= 0 || n > maxDetail {
		n = maxDetail
	}
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
