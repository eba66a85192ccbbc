package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
)

// The verbs in this file talk to a running loopd over its control plane
// (package loop/api): the unix socket <state root>/loopd.sock by default,
// or --url with a bearer token from the environment.

func serviceFlags() []cli.Flag {
	stateRoot := *stateRootFlag // a flag value per command
	stateRoot.Usage = "loopd's state root, whose loopd.sock this talks to (default: $" + loop.StateRootEnv + ", else the CLI config's state.root)"
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "the operator's cli-config.yaml (for state.root)", TakesFile: true},
		&stateRoot,
		&cli.StringFlag{Name: "socket", Usage: "loopd's control socket (default: <state root>/loopd.sock; wins over --state-root)", TakesFile: true},
		&cli.StringFlag{Name: "url", Usage: "loopd's TCP control plane (http://host:port) instead of the socket; needs the token"},
		&cli.StringFlag{Name: "token-env", Value: api.DefaultTokenEnv, Usage: "the variable holding the bearer token for --url"},
		&cli.StringFlag{Name: "format", Value: "table", Usage: "table or json"},
		outputFlags()[0], outputFlags()[1],
	}
}

// serviceOptions are the flags every control-plane verb shares.
type serviceOptions struct {
	Factory   *Factory
	Config    string
	StateRoot string
	Socket    string
	URL       string
	TokenEnv  string
	Format    string
	// Output is --jq / --template over the JSON answer.
	Output output
}

func readServiceOptions(f *Factory, c *cli.Context) (*serviceOptions, error) {
	o := &serviceOptions{Factory: f, Config: c.String("config"), StateRoot: c.String("state-root"), Socket: c.String("socket"), URL: c.String("url"), TokenEnv: c.String("token-env"), Format: c.String("format")}
	switch o.Format {
	case "table", "json":
	default:
		return nil, failWith(exitRefused, "loopctl %s: --format must be table or json, not %q", c.Command.FullName(), o.Format)
	}
	out, err := readOutput(c, c.Command.FullName(), &o.Format)
	if err != nil {
		return nil, err
	}
	o.Output = out
	return o, nil
}

// client builds the API client: --url (with the token), else --socket,
// else the socket under --state-root, $THE_LOOP_STATE_ROOT or the CLI
// config's state root.
func (o *serviceOptions) client() (*api.Client, error) {
	if o.URL != "" {
		tok := o.Factory.Getenv(o.TokenEnv)
		if tok == "" {
			return nil, failWith(exitRefused, "loopctl: --url needs the bearer token in $%s", o.TokenEnv)
		}
		return api.NewTCPClient(o.URL, tok, nil), nil
	}
	if o.Socket != "" {
		return api.NewSocketClient(o.Socket), nil
	}
	root, err := o.Factory.stateRoot(o.StateRoot, o.Config)
	if err != nil {
		return nil, err
	}
	return api.NewSocketClient(api.SocketPath(root)), nil
}

// call runs one API call and, with --format json, prints the answer as
// loopd sent it (the API's JSON is the CLI's JSON); otherwise it decodes
// into out for a table.
func (o *serviceOptions) call(ctx context.Context, method, path string, q url.Values, body, out any) (printed bool, err error) {
	c, err := o.client()
	if err != nil {
		return false, err
	}
	data, err := c.Raw(ctx, method, path, q, body)
	if err != nil {
		return false, apiFailure(err)
	}
	if o.Format == "json" {
		if o.Output.JQ == "" && o.Output.Template == "" {
			_, err := o.Factory.IO.Out.Write(data)
			return true, err
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			return false, fmt.Errorf("loopd's answer to %s %s: %w", method, path, err)
		}
		return true, o.Output.write(o.Factory.IO.Out, v)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return false, fmt.Errorf("loopd's answer to %s %s: %w", method, path, err)
		}
	}
	return false, nil
}

// apiFailure maps API errors to exit codes: 400 (and 404) ⇒ 2 refused,
// unreachable ⇒ 2, others ⇒ 1 (docs/daemon.md §13).
func apiFailure(err error) error {
	var ae *api.APIError
	switch {
	case errors.As(err, &ae) && (ae.Status == 400 || ae.Status == 403 || ae.Status == 404):
		return failWith(exitRefused, "loopctl: %s", ae.Detail)
	case errors.As(err, &ae):
		return failWith(exitFailed, "loopctl: %v", ae)
	case errors.Is(err, api.ErrUnreachable):
		return failWith(exitRefused, "loopctl: %v", err)
	}
	return err
}

// refVerb reads a work-item verb's service options and its REF argument.
func refVerb(f *Factory, c *cli.Context, verb string) (*serviceOptions, string, error) {
	o, err := readServiceOptions(f, c)
	if err != nil {
		return nil, "", err
	}
	ref, err := refArg(c, verb)
	if err != nil {
		return nil, "", err
	}
	return o, ref, nil
}

func refArg(c *cli.Context, verb string) (string, error) {
	if c.NArg() == 1 {
		return c.Args().First(), nil
	}
	if c.NArg() == 0 && c.String("work-item") != "" {
		return c.String("work-item"), nil
	}
	return "", failWith(exitRefused, "loopctl sessions %s: name one work item, e.g. `loopctl sessions %s github:octo/repo#42`", verb, verb)
}

// --- sessions ------------------------------------------------------------------

// sessionJSON is the registry record's shape as loopd answers it.
type sessionJSON struct {
	WorkItem struct {
		Ref string `json:"ref"`
	} `json:"workItem"`
	Harness          string  `json:"harness"`
	HarnessSessionID string  `json:"harnessSessionId"`
	Cwd              string  `json:"cwd"`
	Status           string  `json:"status"`
	CreatedAt        string  `json:"createdAt"`
	LastDeliveryAt   *string `json:"lastDeliveryAt"`
	TmuxTarget       string  `json:"tmuxTarget"`
	Parent           *struct {
		Ref string `json:"ref"`
	} `json:"parent"`
	PullRequests []struct {
		PullRequest struct {
			Ref string `json:"ref"`
		} `json:"pullRequest"`
		Branch   string `json:"branch"`
		Declined string `json:"declined"`
		Closed   bool   `json:"closed"`
	} `json:"pullRequests"`
}

func newSessionsCmd(f *Factory) *cli.Command {
	refFlags := func() []cli.Flag {
		return append(serviceFlags(), &cli.StringFlag{Name: "work-item", Aliases: []string{"w"}, Usage: "the work item ref (instead of the argument)"})
	}
	control := func(verb, usage string) *cli.Command {
		return &cli.Command{
			Name: verb, Usage: usage, ArgsUsage: "REF",
			Description: "Recorded with source cli under your identity (the socket's), and announced on the work item unless --no-comment.\n\nExample:\n   loopctl sessions " + verb + " github:octo/repo#42",
			Flags: append(refFlags(), &cli.StringFlag{Name: "actor", Usage: "deprecated: loopd records who you are from the socket (your OS user, or the dashboard operator's GitHub login) or the token; a different actor is refused"},
				&cli.BoolFlag{Name: "no-comment", Usage: "do not announce the command on the work item with a marked comment"}),
			Action: func(c *cli.Context) error {
				o, ref, err := refVerb(f, c, verb)
				if err != nil {
					return err
				}
				// The actor is loopd's to establish (apiserver.Caller): sent
				// only when the operator names one, which loopd refuses
				// unless it is who the socket says they are.
				var res api.ControlResult
				printed, err := o.call(c.Context, "POST", "/sessions/control", nil, api.ControlRequest{Ref: ref, Verb: verb, Actor: c.String("actor"), NoComment: c.Bool("no-comment")}, &res)
				if err != nil || printed {
					return err
				}
				fmt.Fprintf(f.IO.Out, "%s %s: %s\n", res.Ref, res.Verb, res.Effect)
				if res.AnnounceError != "" {
					fmt.Fprintf(f.IO.ErrOut, "warning: the command was applied but not announced on the work item: %s\n", res.AnnounceError)
				}
				return nil
			},
		}
	}
	return &cli.Command{
		Name:  "sessions",
		Usage: "list, show and control the running daemon's agent sessions",
		Description: `These verbs ask the running loopd over its control socket.

Examples:
   loopctl sessions list --status active
   loopctl sessions pause github:octo/repo#42
   $(loopctl sessions attach github:octo/repo#42)`,
		Subcommands: []*cli.Command{
			{
				Name: "list", Usage: "every session record (active, paused, closed)", Description: "Example:\n   loopctl sessions list --status active --jq '.[].workItem.ref'",
				Flags: append(serviceFlags(), &cli.StringFlag{Name: "status", Usage: "only active, paused or closed"}),
				Action: func(c *cli.Context) error {
					o, err := readServiceOptions(f, c)
					if err != nil {
						return err
					}
					var q url.Values
					if s := c.String("status"); s != "" {
						q = url.Values{"status": {s}}
					}
					var recs []sessionJSON
					printed, err := o.call(c.Context, "GET", "/sessions", q, nil, &recs)
					if err != nil || printed {
						return err
					}
					on := f.colour(f.IO.Out)
					tw := newTable(f.IO.Out, on)
					tw.head("WORK ITEM\tSTATUS\tHARNESS\tTMUX\tCREATED\tLAST DELIVERY", 1)
					for _, r := range recs {
						last := "-"
						if r.LastDeliveryAt != nil {
							last = *r.LastDeliveryAt
						}
						tw.row("%s\t%s\t%s\t%s\t%s\t%s\n", r.WorkItem.Ref, paint(on, r.Status), r.Harness, r.TmuxTarget, r.CreatedAt, last)
					}
					return tw.flush()
				},
			},
			{
				Name: "show", Usage: "one work item's session record", ArgsUsage: "REF", Description: "Example:\n   loopctl sessions show github:octo/repo#42", Flags: refFlags(),
				Action: func(c *cli.Context) error {
					o, ref, err := refVerb(f, c, "show")
					if err != nil {
						return err
					}
					var r sessionJSON
					printed, err := o.call(c.Context, "GET", "/sessions/one", url.Values{"ref": {ref}}, nil, &r)
					if err != nil || printed {
						return err
					}
					fmt.Fprintf(f.IO.Out, "work item:  %s\nstatus:     %s\nharness:    %s (session %s)\ntmux:       %s\ncwd:        %s\ncreated:    %s\n",
						r.WorkItem.Ref, r.Status, r.Harness, r.HarnessSessionID, r.TmuxTarget, r.Cwd, r.CreatedAt)
					if r.Parent != nil {
						fmt.Fprintf(f.IO.Out, "pull request session of: %s\n", r.Parent.Ref)
					}
					for _, l := range r.PullRequests {
						var notes []string
						if l.Branch != "" {
							notes = append(notes, "branch "+l.Branch)
						}
						if l.Declined != "" {
							notes = append(notes, "no own session: "+l.Declined)
						}
						if l.Closed {
							notes = append(notes, "closed")
						}
						fmt.Fprintf(f.IO.Out, "linked PR:  %s %s\n", l.PullRequest.Ref, strings.Join(notes, ", "))
					}
					return nil
				},
			},
			control("stop", "close the work item's session (recorded with source cli)"),
			{
				Name: "link-pr", Usage: "link a pull request to the work item's session, so its events reach that session", ArgsUsage: "REF", Description: "Example:\n   loopctl sessions link-pr github:octo/repo#42 --pull-request '#57'",
				Flags: append(refFlags(), &cli.StringFlag{Name: "pull-request", Aliases: []string{"p"}, Required: true, Usage: "#57, 57 (the work item's repository) or github:owner/repo#57"}),
				Action: func(c *cli.Context) error {
					o, ref, err := refVerb(f, c, "link-pr")
					if err != nil {
						return err
					}
					var res api.LinkPRResult
					printed, err := o.call(c.Context, "POST", "/sessions/link-pr", nil, api.LinkPRRequest{Ref: ref, PullRequest: c.String("pull-request")}, &res)
					if err != nil || printed {
						return err
					}
					state := "linked"
					if !res.Linked {
						state = "already linked"
					}
					fmt.Fprintf(f.IO.Out, "%s: %s %s\n", res.Ref, res.PullRequest, state)
					return nil
				},
			},
			newSessionsStartCleanupCmd(f, "start", "start the work item's session, as the ticket's start keyword does", "loopctl sessions start github:octo/repo#42"),
			newSessionsStartCleanupCmd(f, "cleanup", "end the session and remove its checkout, as the ticket's cleanup keyword does", "loopctl sessions cleanup github:octo/repo#42 --no-comment"),
			newSessionsReplyCmd(f),
			newSessionsTranscriptCmd(f),
			newSessionsResetCmd(f),
			newSessionsRegisterCmd(f),
			newSessionsCloseCmd(f),
			control("pause", "hold events back from the session until resume"),
			control("resume", "deliver events to a paused session again"),
			{
				Name: "attach", Usage: "print the tmux command that attaches to the work item's session", ArgsUsage: "REF", Description: "Example:\n   $(loopctl sessions attach github:octo/repo#42)", Flags: refFlags(),
				Action: func(c *cli.Context) error {
					o, ref, err := refVerb(f, c, "attach")
					if err != nil {
						return err
					}
					var r struct {
						Command string `json:"command"`
					}
					printed, err := o.call(c.Context, "GET", "/sessions/attach", url.Values{"ref": {ref}}, nil, &r)
					if err != nil || printed {
						return err
					}
					fmt.Fprintln(f.IO.Out, r.Command)
					return nil
				},
			},
		},
	}
}

// --- daemon status ---------------------------------------------------------------

// daemonStatusOptions is `loopctl daemon status`.
type daemonStatusOptions struct {
	Service *serviceOptions
}

func newDaemonCmd(f *Factory, runF func(context.Context, *daemonStatusOptions) error) *cli.Command {
	return &cli.Command{
		Name:  "daemon",
		Usage: "ask the running loopd how it is; restart it",
		Subcommands: []*cli.Command{{
			Name:        "status",
			Usage:       "version, uptime, webhook address, queue and live sessions; exit 0 iff loopd answers",
			Description: "Example:\n   loopctl daemon status --template '{{.version}} up {{.uptimeSeconds}}s'",
			Flags:       serviceFlags(),
			Action: func(c *cli.Context) error {
				if err := noArgs(c, "daemon status", ""); err != nil {
					return err
				}
				o, err := readServiceOptions(f, c)
				if err != nil {
					return err
				}
				opts := &daemonStatusOptions{Service: o}
				if runF != nil {
					return runF(c.Context, opts)
				}
				return runDaemonStatus(c.Context, opts)
			},
		}, newDaemonRestartCmd(f)},
	}
}

func runDaemonStatus(ctx context.Context, opts *daemonStatusOptions) error {
	o := opts.Service
	var st api.Status
	printed, err := o.call(ctx, "GET", "/status", nil, nil, &st)
	if err != nil {
		var xe *exitError
		if errors.As(err, &xe) && strings.Contains(xe.msg, api.ErrUnreachable.Error()) {
			xe.code = exitFailed
		}
		return err
	}
	if printed {
		return nil
	}
	w := o.Factory.IO.Out
	fmt.Fprintf(w, "loopd %s (pid %d) up %s\nstate root: %s\nwebhook:    %s\nsessions:   %d live\n",
		st.Version, st.PID, time.Duration(st.Uptime*float64(time.Second)).Round(time.Second), st.StateRoot, st.Webhook, st.LiveSessions)
	if h := st.Health; h != nil {
		if h.OK {
			fmt.Fprintf(w, "health:     %s\n", h.State)
		} else {
			fmt.Fprintf(w, "health:     %s (%s): %s\n", h.State, h.Reason, h.Detail)
		}
	}
	if st.Queue != nil {
		fmt.Fprintf(w, "queue:      %d pending (oldest %s), %d dead letter(s)\n", st.Queue.Depth, age(st.Queue.OldestAge), st.Queue.DeadLetters)
	}
	for _, h := range st.Harnesses {
		mark := ""
		if h.Default {
			mark = " (default)"
		}
		fmt.Fprintf(w, "harness:    %s%s: %s %s\n", h.Name, mark, h.Binary, h.Version)
	}
	for _, warn := range st.Warnings {
		fmt.Fprintln(w, "warning:", warn)
	}
	return nil
}

func age(sec float64) string {
	if sec <= 0 {
		return "-"
	}
	return time.Duration(sec * float64(time.Second)).Round(time.Second).String()
}

// --- queue ----------------------------------------------------------------------

// queueOptions is one `loopctl queue` verb: status, dead or replay (of
// the dead letter Seq).
type queueOptions struct {
	Service *serviceOptions
	Verb    string
	Seq     uint64
}

func newQueueCmd(f *Factory, runF func(context.Context, *queueOptions) error) *cli.Command {
	verb := func(name, usage, argsUsage, example string) *cli.Command {
		return &cli.Command{
			Name: name, Usage: usage, ArgsUsage: argsUsage, Description: "Example:\n   " + example, Flags: serviceFlags(),
			Action: func(c *cli.Context) error {
				opts := &queueOptions{Verb: name}
				if name == "replay" {
					seq, err := strconv.ParseUint(c.Args().First(), 10, 64)
					if c.NArg() != 1 || err != nil || seq == 0 {
						return failWith(exitRefused, "loopctl queue replay: name one dead letter's SEQ (see `loopctl queue dead`)")
					}
					opts.Seq = seq
				} else if err := noArgs(c, "queue "+name, ""); err != nil {
					return err
				}
				o, err := readServiceOptions(f, c)
				if err != nil {
					return err
				}
				opts.Service = o
				if runF != nil {
					return runF(c.Context, opts)
				}
				return runQueue(c.Context, opts)
			},
		}
	}
	return &cli.Command{
		Name:  "queue",
		Usage: "the daemon's durable event queue: depth, oldest age, dead letters, replay",
		Subcommands: []*cli.Command{
			verb("status", "pending events, the oldest one's age, dead letters", "", "loopctl queue status --format json"),
			verb("dead", "list the events that failed dispatch every attempt", "", "loopctl queue dead --jq '.[] | [.seq, .reason] | @tsv'"),
			verb("replay", "put a dead letter back on the queue", "SEQ", "loopctl queue replay 17"),
		},
	}
}

func runQueue(ctx context.Context, opts *queueOptions) error {
	o := opts.Service
	out := o.Factory.IO.Out
	switch opts.Verb {
	case "status":
		var v api.QueueView
		printed, err := o.call(ctx, "GET", "/queue", nil, nil, &v)
		if err != nil || printed {
			return err
		}
		fmt.Fprintf(out, "%d pending (oldest %s), %d dead letter(s)\n", v.Depth, age(v.OldestAge), v.DeadLetters)
		return nil
	case "dead":
		var dls []api.DeadLetterView
		printed, err := o.call(ctx, "GET", "/queue/dead", nil, nil, &dls)
		if err != nil || printed {
			return err
		}
		tw := newTable(out, o.Factory.colour(out))
		tw.head("SEQ\tDELIVERY\tEVENT\tWORK ITEMS\tATTEMPTS\tAT\tREASON")
		for _, d := range dls {
			tw.row("%d\t%s\t%s\t%s\t%d\t%s\t%s\n", d.Seq, d.DeliveryID, strings.TrimSuffix(d.Event+"."+d.Action, "."), strings.Join(d.WorkItems, ","), d.Attempts, d.At.Local().Format("2006-01-02 15:04:05"), oneLine(d.Reason))
		}
		return tw.flush()
	case "replay":
		printed, err := o.call(ctx, "POST", "/queue/dead/replay", nil, api.ReplayRequest{Seq: opts.Seq}, nil)
		if err != nil || printed {
			return err
		}
		fmt.Fprintf(out, "replayed dead letter %d\n", opts.Seq)
		return nil
	}
	return failWith(exitRefused, "loopctl queue: unknown verb %q", opts.Verb)
}
