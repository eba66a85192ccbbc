package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/loop/api"
)

// loopctl usage is what the agent sessions spent, from loopd's reading of
// each harness's own record (GET /api/v1/usage, docs/usage.md): tokens by
// kind, turns, models and an estimated cost from usage.rates, for one work
// item or all, grouped by node, session, day, model, item or repository.

func newUsageCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name:      "usage",
		Usage:     "tokens and estimated cost the agent sessions spent, per node, session or day",
		ArgsUsage: "[ITEM]",
		Description: `Asks the running loopd over its control socket. Tokens are what each harness
recorded (Claude Code's transcript, Codex's session log, Gemini's chat record);
cost is an estimate from usage.rates — "—" where a model has no rate. A harness
that keeps no record (cursor) is listed as unknown. See docs/usage.md.

Examples:
   loopctl usage github:octo/demo#12
   loopctl usage --by day
   loopctl usage github:octo/demo#12 --by session --json
   loopctl usage --by repository --jq '.rows[] | {key, total: .tokens.total, cost}'`,
		Flags: append(serviceFlags(),
			&cli.StringFlag{Name: "by", Value: "node", Usage: "group by " + strings.Join(api.UsageGroupings, ", ")},
			&cli.StringFlag{Name: "repository", Usage: "only this repository (owner/repo)"}),
		Action: func(c *cli.Context) error {
			if c.NArg() > 1 {
				return failWith(exitRefused, "loopctl usage: takes at most one ITEM, got %d arguments (run 'loopctl usage --help')", c.NArg())
			}
			o, err := readServiceOptions(f, c)
			if err != nil {
				return err
			}
			q := url.Values{"by": {c.String("by")}}
			if c.NArg() == 1 {
				q.Set("item", c.Args().First())
			}
			if r := c.String("repository"); r != "" {
				q.Set("repository", r)
			}
			var rep api.UsageReport
			printed, err := o.call(c.Context, "GET", api.UsagePath, q, nil, &rep)
			if err != nil || printed {
				return err
			}
			return printUsage(f, rep)
		},
	}
}

func printUsage(f *Factory, rep api.UsageReport) error {
	out := f.IO.Out
	if len(rep.Rows) == 0 {
		if _, err := fmt.Fprintln(out, "no usage counted yet"); err != nil {
			return err
		}
	} else {
		tw := newTable(out, f.colour(out))
		tw.head(strings.ToUpper(rep.By)+"\tINPUT\tOUTPUT\tCACHE WRITE\tCACHE READ\tTOTAL\tTURNS\tEST. COST\tMODELS", 1)
		for _, r := range append(rep.Rows, rep.Total) {
			key := r.Key
			if key == "" {
				key = "total"
			}
			t := r.Tokens
			tw.row("%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n", key, t.Input, t.Output, t.CacheWrite, t.CacheRead, t.Total, r.Turns, costText(r), strings.Join(r.Models, ","))
		}
		if err := tw.flush(); err != nil {
			return err
		}
	}
	if b := rep.Budget; b != nil {
		fmt.Fprintf(out, "budget (%s, %s): %s — %.0f of %.0f\n", b.Scope, b.Unit, b.State, b.Used, b.Limit)
	}
	for _, u := range rep.Unknown {
		fmt.Fprintf(out, "unknown: %s keeps no record theloop reads\n", u)
	}
	_, err := fmt.Fprintln(out, rep.Estimate)
	return err
}

func costText(r api.UsageRow) string {
	if r.Cost == nil {
		return "—"
	}
	return fmt.Sprintf("≈%.2f", *r.Cost)
}
