package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

type checkOptions struct {
	IO        IOStreams
	Factory   *Factory
	Repo      repoFlags
	ID        string
	All       bool
	Recompute bool
	Format    string
	FailOn    string
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

Recorded decisions count only when signed by a trusted key once a trust anchor
is given (--trust-key, $THE_LOOP_TRUST_KEYS, or --trust-base REV to read the
base branch's .the-loop/trusted-keys); a refused decision blocks its gate and
says why. Without an anchor they are honoured as the-loop does, with a warning.

Exit status: 0 ok, 1 the check failed (see --fail-on), 2 bad usage.

Examples:
   loopctl check issue-42 --recompute
   loopctl check issue-42 --recompute --fail-on block --format json   # CI
   loopctl check --all --recompute`,
		Flags: append(repoFlagDefs(true),
			&cli.BoolFlag{Name: "all", Usage: "check every work item under the spec directory"},
			&cli.BoolFlag{Name: "recompute", Usage: "derive the current node from the artifacts, ignoring graph-state.json's pointer"},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table or json"},
			&cli.StringFlag{Name: "fail-on", Value: "unmet", Usage: "unmet: fail unless every node up to the current one is satisfied; block: fail only on a block at or before the current node"},
			trustFlagDefs()[0], trustFlagDefs()[1],
		),
		Action: func(c *cli.Context) error {
			opts := &checkOptions{IO: f.IO, Factory: f, Repo: readRepoFlags(c), ID: c.Args().First(), All: c.Bool("all"),
				Recompute: c.Bool("recompute"), Format: c.String("format"), FailOn: c.String("fail-on")}
			if c.NArg() > 1 {
				return failWith(exitRefused, "loopctl check: one work item at a time (or --all); got %s", strings.Join(c.Args().Slice(), " "))
			}
			if opts.ID == "" && !opts.All {
				return failWith(exitRefused, "loopctl check: name a work item (e.g. issue-42) or pass --all")
			}
			if opts.ID != "" && opts.All {
				return failWith(exitRefused, "loopctl check: pass a work item or --all, not both")
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
		return err
	}
	if st, err := os.Stat(root); err != nil || !st.IsDir() {
		no := false
		rep := checkReport{Report: &graph.Report{WorkItem: opts.ID, Nodes: []graph.NodeReport{}}, RepoResolved: &no}
		if opts.Format == "json" {
			writeJSON(opts.IO.Out, rep)
		}
		return failWith(exitFailed, "loopctl check: repository %s not found; pass its root with --repo", root)
	}
	repo, err := loop.OpenRepo(root, "")
	if err != nil {
		return err
	}
	ids := []string{opts.ID}
	if opts.All {
		if ids, err = workItems(filepath.Join(repo.Root, filepath.FromSlash(repo.SpecDir))); err != nil {
			return err
		}
	}
	g, err := opts.Repo.graph()
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
	for _, id := range ids {
		// Each work item may record its own loop (contribution, ad hoc).
		rt, err := repo.Runtime(loop.Options{Graph: g, WorkItem: id, PR: opts.Repo.PR, PRRepo: opts.Repo.PRRepo, Clock: opts.Factory.Clock, DecisionVerifier: verifier})
		if err != nil {
			return err
		}
		loopName = rt.Graph().Name
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
		if opts.All {
			writeJSON(opts.IO.Out, reports)
		} else {
			writeJSON(opts.IO.Out, reports[0])
		}
	} else if opts.All {
		writeSummary(opts.IO.Out, reports, opts.FailOn)
	} else {
		writeReport(opts.IO.Out, reports[0], loopName, opts.Recompute)
	}
	if failed {
		return &exitError{code: exitFailed}
	}
	return nil
}

// checkFails applies --fail-on to a report (reference graph-spec §5.5).
func checkFails(rep *graph.Report, failOn string) bool {
	if failOn == "unmet" {
		return !rep.OK
	}
	for _, n := range rep.Nodes {
		if n.Status == string(graph.StatusBlock) {
			return true
		}
		if n.Node == rep.CurrentNode {
			break
		}
	}
	return false
}

// workItems lists the spec directory's work items (directories with valid
// ids), sorted.
func workItems(specRoot string) ([]string, error) {
	entries, err := os.ReadDir(specRoot)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && loop.ValidateWorkItemID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	sort.Strings(ids)
	return ids, nil
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeReport prints one work item's report for people.
func writeReport(w io.Writer, rep *graph.Report, loopName string, recompute bool) {
	mode := "stored pointer"
	if recompute {
		mode = "recomputed from the artifacts"
	}
	verdict := "ok"
	if !rep.OK {
		verdict = "NOT ok"
	}
	fmt.Fprintf(w, "%s — %s — current node: %s (%s) — %s\n", rep.WorkItem, loopName, rep.CurrentNode, mode, verdict)
	if rep.Parked != nil {
		fmt.Fprintf(w, "parked at %s since %s\n", rep.Parked.Node, rep.Parked.Since)
	}
	for _, warn := range rep.Warnings {
		fmt.Fprintln(w, "warning:", warn)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tNODE\tSTATUS\tATTEMPTS\tDETAIL")
	for _, n := range rep.Nodes {
		mark := ""
		if n.Node == rep.CurrentNode {
			mark = "▶"
		}
		status := n.Status
		if n.Forced {
			status += " (forced)"
		}
		detail := ""
		if len(n.Messages) > 0 {
			detail = n.Messages[0]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", mark, n.Node, status, n.Attempts, oneLine(detail))
		for _, m := range n.Messages[min(1, len(n.Messages)):] {
			fmt.Fprintf(tw, "\t\t\t\t%s\n", oneLine(m))
		}
	}
	tw.Flush()
}

// writeSummary prints one line per work item.
func writeSummary(w io.Writer, reps []*graph.Report, failOn string) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORK ITEM\tCURRENT NODE\tSTATUS\tRESULT\tDETAIL")
	bad := 0
	for _, rep := range reps {
		status, detail := "", ""
		if n, ok := rep.Node(rep.CurrentNode); ok {
			status = n.Status
			if len(n.Messages) > 0 {
				detail = n.Messages[0]
			}
		}
		result := "ok"
		if checkFails(rep, failOn) {
			result = "FAIL"
			bad++
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", rep.WorkItem, rep.CurrentNode, status, result, oneLine(detail))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d work item(s), %d failing (--fail-on %s)\n", len(reps), bad, failOn)
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if r := []rune(s); len(r) > 160 {
		s = string(r[:159]) + "…"
	}
	return s
}
