package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

type verifyOptions struct {
	Factory *Factory
	Repo    repoFlags
	Loop    string
	Format  string
	Output  output
}

func newVerifyCmd(f *Factory, runF func(*verifyOptions) error) *cli.Command {
	return &cli.Command{
		Name:  "verify",
		Usage: "prove, over the compiled graph, the guarantees the process relies on",
		Description: `verify checks the graph itself — no work item, no artifacts:
  gates-guard-what-follows                no producing node reaches what follows its
                                          human gate without passing the gate
  human-gates-exit-through-classify       gates move only on a classified reply
  skippable-nodes-route-on-skipped        every declared skip can be routed around
  phase-selection-cannot-be-routed-around choosing the phases cannot be skipped
  a-terminal-node-is-reachable            a walk can finish without force

Each guarantee prints proved, violated (with a counterexample path) or n/a.
Run inside a repository (or with --repo), a workflow.phases list in its
harness config that differs from the graph is warned about, naming the
differing phases: the graph is authoritative, the list derived.
Exit status 1 on any violation. Without --graph or --loop, every shipped loop
is verified.

Example:
   loopctl graph verify --loop pdlc-work-item-loop`,
		Flags: append(append(repoFlagDefs(false),
			&cli.StringFlag{Name: "loop", Usage: "one shipped loop"},
			&cli.StringFlag{Name: "format", Value: "text", Usage: "text or json"}), outputFlags()...),
		Action: func(c *cli.Context) error {
			if err := noArgs(c, "graph verify", "name a graph with --graph or --loop"); err != nil {
				return err
			}
			opts := &verifyOptions{Factory: f, Repo: readRepoFlags(c), Loop: c.String("loop"), Format: c.String("format")}
			var err error
			if opts.Output, err = readOutput(c, "graph verify", &opts.Format); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runVerify(c.Context, opts)
		},
	}
}

type verifiedGraph struct {
	Graph      string           `json:"graph"`
	Guarantees []loop.Guarantee `json:"guarantees"`
	// Warnings are the graph's compile warnings (an unreachable node, an
	// edge never taken) and, inside a repository, where its
	// workflow.phases differs from the graph (R9.3).
	Warnings []string `json:"warnings"`
}

func runVerify(_ context.Context, opts *verifyOptions) error {
	var gs []*graph.Graph
	switch {
	case opts.Repo.GraphFile != "":
		g, err := opts.Repo.graph()
		if err != nil {
			return err
		}
		gs = append(gs, g)
	case opts.Loop != "":
		g, err := shippedGraph(opts.Loop)
		if err != nil {
			return err
		}
		gs = append(gs, g)
	default:
		for _, name := range loop.ShippedLoopNames() {
			g, err := shippedGraph(name)
			if err != nil {
				return err
			}
			gs = append(gs, g)
		}
	}
	// Run inside a repository (or with --repo), the repository's
	// workflow.phases is compared with the graph it describes (R9.3).
	var harness *loop.HarnessConfig
	if root, err := opts.Factory.repoRoot(opts.Repo); err == nil {
		if repo, err := loop.OpenRepo(root, ""); err == nil {
			harness = &repo.Harness
		}
	}
	var out []verifiedGraph
	violated := false
	for _, g := range gs {
		name := g.Name
		if name == "" {
			name = g.Source
		}
		vg := verifiedGraph{Graph: name, Guarantees: loop.Verify(g), Warnings: []string{}}
		for _, w := range g.Warnings() {
			vg.Warnings = append(vg.Warnings, w.String())
		}
		if harness != nil && loop.PhaseGraph(g) {
			vg.Warnings = append(vg.Warnings, harness.PhaseWarnings(g)...)
		}
		for _, gr := range vg.Guarantees {
			if gr.Verdict == loop.Violated {
				violated = true
			}
		}
		out = append(out, vg)
	}
	w := opts.Factory.IO.Out
	if opts.Format == "json" {
		if err := opts.Output.write(w, out); err != nil {
			return err
		}
	} else {
		for _, vg := range out {
			fmt.Fprintln(w, vg.Graph)
			for _, warn := range vg.Warnings {
				fmt.Fprintf(w, "  warning   %s\n", warn)
			}
			for _, gr := range vg.Guarantees {
				fmt.Fprintf(w, "  %-9s %s\n", gr.Verdict, gr.Name)
				fmt.Fprintf(w, "            %s\n", gr.Detail)
				if len(gr.Counterexample) > 0 {
					fmt.Fprintf(w, "            counterexample: %s\n", strings.Join(gr.Counterexample, " → "))
				}
			}
		}
	}
	if violated {
		return &exitError{code: exitFailed}
	}
	return nil
}
