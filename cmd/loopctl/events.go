package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/sessions"
)

type eventsOptions struct {
	Factory   *Factory
	Config    string
	StateRoot string
	Path      string
	WorkItem  string
	Event     string
	Since     string
	Limit     int
	Format    string
	Output    output
	// Claims also merges the agents' own logs (their checkouts'): what
	// each claimed, beside what loopd's recompute made of it.
	Claims bool
	// Follow keeps printing new events from every log read until Ctx ends.
	Follow bool
	// Ctx ends a --follow (interrupt or SIGTERM from the command line).
	Ctx context.Context
	// Poll is how often --follow looks at the logs (default 250ms).
	Poll time.Duration
}

func newEventsCmd(f *Factory, runF func(*eventsOptions) error) *cli.Command {
	return &cli.Command{
		Name:  "events",
		Usage: "query loopd's event log, the one stream the dashboard and /metrics read",
		Description: `The events of loopd's log (<state root>/logs/events.jsonl): every
transition of every work item, as loopd's recompute bore the agents'
claims out. Without a loopd log (loopctl used alone), this checkout's log.
--claims also merges, in time order, the agents' own logs in their
checkouts (what each claimed; source "cli"). --path reads one file instead.

Examples:
   loopctl events --work-item issue-42
   loopctl events --work-item github:octo/demo#42 --follow
   loopctl events --event graph. --since 2h
   loopctl events --event graph.escalated --since 2026-11-01 --format json`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "the operator's cli-config.yaml (for state.root and eventLog.path)", TakesFile: true},
			stateRootFlag,
			&cli.StringFlag{Name: "path", Usage: "read this event log only (default: loopd's)", TakesFile: true},
			&cli.BoolFlag{Name: "claims", Usage: "also merge the agents' own logs (this checkout's and the work items' checkouts'): what they claimed"},
			&cli.StringFlag{Name: "work-item", Aliases: []string{"w"}, Usage: "a ref (github:o/r#42) or id (issue-42, 42)"},
			&cli.StringFlag{Name: "event", Usage: "an event name, or a prefix ending in . or *"},
			&cli.StringFlag{Name: "since", Usage: "a duration ago (90m, 2h, 3d) or a time (2026-11-01, RFC 3339)"},
			&cli.IntFlag{Name: "limit", Usage: "only the last N matching events"},
			&cli.BoolFlag{Name: "follow", Aliases: []string{"f"}, Usage: "then print new events as they are written, until interrupted"},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, json (an array) or jsonl (the stored lines)"},
			outputFlags()[0], outputFlags()[1],
		},
		Action: func(c *cli.Context) error {
			if err := noArgs(c, "events", "filter by work item with --work-item"); err != nil {
				return err
			}
			opts := &eventsOptions{Factory: f, Config: c.String("config"), StateRoot: c.String("state-root"), Path: c.String("path"), WorkItem: c.String("work-item"),
				Event: c.String("event"), Since: c.String("since"), Limit: c.Int("limit"), Format: c.String("format"), Follow: c.Bool("follow"), Claims: c.Bool("claims")}
			var err error
			if opts.Output, err = readOutput(c, "events", &opts.Format); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts.Ctx = ctx
			return runEvents(opts)
		},
	}
}

func runEvents(opts *eventsOptions) error {
	f := opts.Factory
	if opts.Limit < 0 {
		return failWith(exitRefused, "loopctl events: --limit %d: give a positive number of events (0: all)", opts.Limit)
	}
	switch opts.Format {
	case "table", "jsonl":
	case "json":
		if opts.Follow {
			return failWith(exitRefused, "loopctl events: --follow prints events as they come, which a JSON array cannot; use --format jsonl")
		}
	default:
		return failWith(exitRefused, "loopctl events: --format must be table, json or jsonl, not %q", opts.Format)
	}
	since, err := loop.ParseSince(opts.Since, f.Clock.Now())
	if err != nil {
		return failWith(exitRefused, "loopctl events: %v", err)
	}
	paths, err := eventLogs(opts)
	if err != nil {
		return err
	}
	q := loop.EventQuery{WorkItem: opts.WorkItem, Event: opts.Event, Since: since, Limit: opts.Limit}
	// With --follow the tails start before the history is read: a line
	// written in between is printed twice at worst, never lost.
	var tails []*loop.EventTail
	if opts.Follow {
		for _, p := range paths {
			t := loop.TailEvents(p, loop.EventQuery{WorkItem: opts.WorkItem, Event: opts.Event, Since: since})
			defer t.Close()
			tails = append(tails, t)
		}
	}
	recs, err := loop.MergeEvents(paths, q)
	if err != nil {
		return err
	}
	if len(recs) == 0 && opts.WorkItem != "" && !opts.Follow && opts.Since == "" && opts.Event == "" {
		if err := knownWorkItem(opts, paths); err != nil {
			return err
		}
	}
	w := f.IO.Out
	if opts.Format == "json" {
		out := make([]map[string]any, 0, len(recs))
		for _, r := range recs {
			out = append(out, r.JSON())
		}
		return opts.Output.write(w, out)
	}
	p := newEventPrinter(w, opts.Format, f.colour(w))
	p.print(recs, true)
	if !opts.Follow {
		return nil
	}
	return followEvents(opts, tails, p)
}

// knownWorkItem refuses a --work-item nothing knows: no event in any log
// read, no session in the registry, no spec directory in this checkout. A
// typo then exits 1 with the reason, instead of an empty table and 0.
func knownWorkItem(opts *eventsOptions, paths []string) error {
	f := opts.Factory
	if root, err := f.stateRoot(opts.StateRoot, opts.Config); err == nil {
		recs, _ := sessions.ListRecords(sessions.RegistryDir(root))
		for _, rec := range recs {
			if loop.WorkItemMatches(opts.WorkItem, rec.Item.String()) {
				return nil
			}
		}
	}
	if wd, err := f.Getwd(); err == nil {
		if root, ok := loop.FindRoot(wd); ok {
			if repo, err := loop.OpenRepo(root, ""); err == nil {
				id := opts.WorkItem
				if n, err := strconv.Atoi(id); err == nil && n > 0 {
					id = "issue-" + id
				}
				if repo.RequireWorkItem(id) == nil {
					return nil
				}
			}
		}
	}
	logs := "no event log"
	if len(paths) > 0 {
		logs = strings.Join(paths, ", ")
	}
	return failWith(exitFailed, "loopctl events: no work item %s: no event for it in %s, no session in loopd's registry, and no spec directory for it in this checkout; `loopctl sessions list` and `loopctl check --all` list the known ones", opts.WorkItem, logs)
}

// eventLogs lists the logs `loopctl events` reads: --path alone, else
// loopd's log under its state root — the one stream (docs/decisions.md
// §24). This checkout's log is read when there is no loopd log (loopctl
// used without the daemon) or with --claims, which also reads the log in
// the checkout of each work item the session registry knows (the agents'
// claims), only --work-item's when given.
func eventLogs(opts *eventsOptions) ([]string, error) {
	f := opts.Factory
	if opts.Path != "" {
		if _, err := os.Stat(opts.Path); err != nil {
			return nil, failWith(exitFailed, "loopctl events: --path %s: %v", opts.Path, err)
		}
		return []string{opts.Path}, nil
	}
	var paths []string
	// The daemon's log: found from the state root the way every verb that
	// talks to loopd finds it.
	opCfg, err := f.cliConfig(opts.Config, "")
	if err != nil {
		return nil, err
	}
	root, err := f.stateRoot(opts.StateRoot, opts.Config)
	daemonLog := false
	switch {
	case err != nil && opts.StateRoot != "":
		return nil, err
	case err != nil:
		// No state root to find (no home directory): this checkout's log
		// is still worth reading.
		fmt.Fprintf(f.IO.ErrOut, "loopctl events: warning: loopd's log is not read: %v\n", err)
	case opCfg.EventLogEnabled:
		p := loop.DaemonEventLogPath(root, opCfg)
		paths = append(paths, p)
		if _, err := os.Stat(p); err == nil {
			daemonLog = true
		}
	}
	if daemonLog && !opts.Claims {
		return paths, nil
	}
	// This checkout's log (outside a repository a relative eventLog.path
	// stays relative to the working directory).
	repo := ""
	if wd, err := f.Getwd(); err == nil {
		repo, _ = loop.FindRoot(wd)
	}
	if cfg, err := f.cliConfig(opts.Config, repo); err == nil && cfg.EventLogEnabled {
		paths = append(paths, cfg.EventLogPath)
	}
	if !opts.Claims {
		return loop.DistinctLogs(paths), nil
	}
	// The work items' checkouts, from the session registry.
	var recs []sessions.Record
	if root != "" {
		recs, _ = sessions.ListRecords(sessions.RegistryDir(root))
	}
	for _, rec := range recs {
		if rec.Cwd == "" || opts.WorkItem != "" && !loop.WorkItemMatches(opts.WorkItem, rec.Item.String()) {
			continue
		}
		paths = append(paths, loop.CheckoutEventLogPath(rec.Cwd))
	}
	return loop.DistinctLogs(paths), nil
}

// followEvents polls the tails until opts.Ctx ends, printing each round's
// new events in time order.
func followEvents(opts *eventsOptions, tails []*loop.EventTail, p *eventPrinter) error {
	ctx := opts.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	every := opts.Poll
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		var round []loop.EventRecord
		for _, t := range tails {
			recs, err := t.Poll()
			if err != nil {
				fmt.Fprintf(opts.Factory.IO.ErrOut, "loopctl events: %s: %v\n", t.Path(), err)
			}
			round = append(round, recs...)
		}
		sort.SliceStable(round, func(i, j int) bool { return round[i].Time.Before(round[j].Time) })
		p.print(round, false)
	}
}

// eventPrinter prints events as a table or as their stored lines.
type eventPrinter struct {
	w      io.Writer
	format string
	cut    int
	header bool
	on     bool
}

func newEventPrinter(w io.Writer, format string, on bool) *eventPrinter {
	return &eventPrinter{w: w, format: format, cut: detailWidth(w), on: on}
}

func (p *eventPrinter) print(recs []loop.EventRecord, first bool) {
	if p.format == "jsonl" {
		for _, r := range recs {
			fmt.Fprintf(p.w, "%s\n", r.Line)
		}
		return
	}
	if len(recs) == 0 && !first {
		return
	}
	tw := newTable(p.w, p.on)
	if !p.header {
		p.header = true
		tw.head("TIME\tEVENT\tLEVEL\tWORK ITEM\tDETAIL", 2)
	}
	for _, r := range recs {
		wi, _ := r.Get("work_item")
		var detail []string
		for _, fl := range r.Fields {
			if fl.Key != "work_item" {
				detail = append(detail, fmt.Sprintf("%s=%v", fl.Key, fl.Value))
			}
		}
		tw.row("%s\t%s\t%s\t%v\t%s\n", r.Time.Local().Format("2006-01-02 15:04:05"), r.Event, paint(p.on, string(r.Level)), orDash(wi), oneLineN(strings.Join(detail, " "), p.cut))
	}
	tw.flush()
}

func orDash(v any) any {
	if v == nil {
		return "-"
	}
	return v
}
