package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/loop"
)

type eventsOptions struct {
	Factory  *Factory
	Config   string
	Path     string
	WorkItem string
	Event    string
	Since    string
	Limit    int
	Format   string
	Output   output
}

func newEventsCmd(f *Factory, runF func(*eventsOptions) error) *cli.Command {
	return &cli.Command{
		Name:  "events",
		Usage: "query the JSONL event log (rotated files included)",
		Description: `Examples:
   loopctl events --work-item issue-42
   loopctl events --event graph. --since 2h
   loopctl events --event graph.escalated --since 2026-11-01 --format json`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "the operator's cli-config.yaml (for eventLog.path)", TakesFile: true},
			&cli.StringFlag{Name: "path", Usage: "the event log (default: eventLog.path from the CLI config)", TakesFile: true},
			&cli.StringFlag{Name: "work-item", Aliases: []string{"w"}, Usage: "a ref (github:o/r#42) or id (issue-42, 42)"},
			&cli.StringFlag{Name: "event", Usage: "an event name, or a prefix ending in . or *"},
			&cli.StringFlag{Name: "since", Usage: "a duration ago (90m, 2h, 3d) or a time (2026-11-01, RFC 3339)"},
			&cli.IntFlag{Name: "limit", Usage: "only the last N matching events"},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, json (an array) or jsonl (the stored lines)"},
			outputFlags()[0], outputFlags()[1],
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c, "events", "filter by work item with --work-item"); err != nil {
				return err
			}
			opts := &eventsOptions{Factory: f, Config: c.String("config"), Path: c.String("path"), WorkItem: c.String("work-item"),
				Event: c.String("event"), Since: c.String("since"), Limit: c.Int("limit"), Format: c.String("format")}
			var err error
			if opts.Output, err = readOutput(c, "events", &opts.Format); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runEvents(opts)
		},
	}
}

func runEvents(opts *eventsOptions) error {
	f := opts.Factory
	if opts.Limit < 0 {
		return failWith(exitRefused, "loopctl events: --limit %d: give a positive number of events (0: all)", opts.Limit)
	}
	path := opts.Path
	if path == "" {
		// The default log lives in the repository's state root; outside a
		// repository, relative paths stay relative to the working directory.
		root := ""
		if wd, err := f.Getwd(); err == nil {
			root, _ = loop.FindRoot(wd)
		}
		cfg, err := f.cliConfig(opts.Config, root)
		if err != nil {
			return err
		}
		path = cfg.EventLogPath
	} else if _, err := os.Stat(path); err != nil {
		return failWith(exitFailed, "loopctl events: --path %s: %v", path, err)
	}
	since, err := loop.ParseSince(opts.Since, f.Clock.Now())
	if err != nil {
		return failWith(exitRefused, "loopctl events: %v", err)
	}
	switch opts.Format {
	case "table", "json", "jsonl":
	default:
		return failWith(exitRefused, "loopctl events: --format must be table, json or jsonl, not %q", opts.Format)
	}
	recs, err := loop.ReadEvents(path, loop.EventQuery{WorkItem: opts.WorkItem, Event: opts.Event, Since: since, Limit: opts.Limit})
	if err != nil {
		return err
	}
	w := f.IO.Out
	switch opts.Format {
	case "jsonl":
		for _, r := range recs {
			fmt.Fprintf(w, "%s\n", r.Line)
		}
	case "json":
		out := make([]map[string]any, 0, len(recs))
		for _, r := range recs {
			out = append(out, r.JSON())
		}
		if err := opts.Output.write(w, out); err != nil {
			return err
		}
	default:
		cut := detailWidth(w)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME\tEVENT\tLEVEL\tWORK ITEM\tDETAIL")
		for _, r := range recs {
			wi, _ := r.Get("work_item")
			var detail []string
			for _, fl := range r.Fields {
				if fl.Key != "work_item" {
					detail = append(detail, fmt.Sprintf("%s=%v", fl.Key, fl.Value))
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%v\t%s\n", r.Time.Local().Format("2006-01-02 15:04:05"), r.Event, r.Level, orDash(wi), oneLineN(strings.Join(detail, " "), cut))
		}
		tw.Flush()
	}
	return nil
}

func orDash(v any) any {
	if v == nil {
		return "-"
	}
	return v
}
