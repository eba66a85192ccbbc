package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/loop/api"
)

// The operator's per-session verbs that act as the ticket's keywords do
// (start, cleanup), answer the agent (reply) and read what it did
// (transcript). loopd does the work; these map flags to one API call.

func sessionRefFlags() []cli.Flag {
	return append(serviceFlags(), &cli.StringFlag{Name: "work-item", Aliases: []string{"w"}, Usage: "the work item ref (instead of the argument)"})
}

func newSessionsStartCleanupCmd(f *Factory, verb, usage, example string) *cli.Command {
	return &cli.Command{
		Name: verb, Usage: usage, ArgsUsage: "REF",
		Description: `Acts as the ticket's "the-loop ` + verb + `" keyword does: loopd queues the command for the
work item, checks that you (the operator's GitHub login, --dashboard-operator) are one
of routing.authorizedUsers, records it with source cli and announces it on the ticket.

Example:
   ` + example,
		Flags: append(sessionRefFlags(), &cli.BoolFlag{Name: "no-comment", Usage: "do not announce the command on the work item with a marked comment"}),
		Action: func(c *cli.Context) error {
			o, err := readServiceOptions(f, c)
			if err != nil {
				return err
			}
			ref, err := refArg(c, verb)
			if err != nil {
				return err
			}
			var res api.ControlResult
			printed, err := o.call(c.Context, "POST", api.SessionPath(ref, verb), nil, api.OperatorRequest{NoComment: c.Bool("no-comment")}, &res)
			if err != nil || printed {
				return err
			}
			fmt.Fprintf(f.IO.Out, "%s %s: %s (delivery %s); follow it with `loopctl events --work-item %s`\n", res.Ref, res.Verb, res.Effect, res.Queued, res.Ref)
			if res.AnnounceError != "" {
				fmt.Fprintf(f.IO.ErrOut, "warning: the command was queued but not announced on the work item: %s\n", res.AnnounceError)
			}
			return nil
		},
	}
}

func newSessionsReplyCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name: "reply", Usage: "paste a message into the agent's session, marked as from you", ArgsUsage: "REF",
		Description: `loopd pastes the message into the session's pane, opened by a line naming you as the
operator, and records who, when and what in the event log. A reply never decides a gate
and may not carry a control keyword (use the verbs for those).

Example:
   loopctl sessions reply github:octo/repo#42 --message "Use the v2 client; v1 is gone."`,
		Flags: append(sessionRefFlags(), &cli.StringFlag{Name: "message", Aliases: []string{"m"}, Required: true, Usage: "what the agent should read"}),
		Action: func(c *cli.Context) error {
			o, err := readServiceOptions(f, c)
			if err != nil {
				return err
			}
			ref, err := refArg(c, "reply")
			if err != nil {
				return err
			}
			var res api.ReplyResult
			printed, err := o.call(c.Context, "POST", api.SessionPath(ref, "reply"), nil, api.ReplyRequest{Message: c.String("message")}, &res)
			if err != nil || printed {
				return err
			}
			state := "delivered"
			if !res.Verified {
				state = "pasted (the pane did not confirm it)"
			}
			fmt.Fprintf(f.IO.Out, "%s: reply from %s %s to %s\n", res.Ref, res.Actor, state, res.Session)
			return nil
		},
	}
}

func newSessionsTranscriptCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name: "transcript", Usage: "print the session pane's scrollback (and the harness's own transcript)", ArgsUsage: "REF",
		Description: `Prints the tmux pane's text, scrollback included. With --harness, prints the tail of
the harness's own transcript file instead (Claude Code keeps one per conversation).

Examples:
   loopctl sessions transcript github:octo/repo#42 | less
   loopctl sessions transcript github:octo/repo#42 --harness --format json`,
		Flags: append(sessionRefFlags(), &cli.BoolFlag{Name: "harness", Usage: "print the harness's own transcript instead of the pane"}),
		Action: func(c *cli.Context) error {
			o, err := readServiceOptions(f, c)
			if err != nil {
				return err
			}
			ref, err := refArg(c, "transcript")
			if err != nil {
				return err
			}
			var t api.Transcript
			printed, err := o.call(c.Context, "GET", api.SessionPath(ref, "transcript"), nil, nil, &t)
			if err != nil || printed {
				return err
			}
			if c.Bool("harness") {
				if t.Harness == nil {
					return failWith(exitRefused, "loopctl sessions transcript: %s's harness keeps no transcript loopd can read; drop --harness for the pane", t.Ref)
				}
				if t.Harness.Truncated {
					fmt.Fprintf(f.IO.ErrOut, "(the tail of %s)\n", t.Harness.Path)
				}
				_, err := fmt.Fprint(f.IO.Out, t.Harness.Content)
				return err
			}
			if t.PaneError != "" {
				return failWith(exitRefused, "loopctl sessions transcript: %s", t.PaneError)
			}
			_, err = fmt.Fprint(f.IO.Out, t.Pane)
			return err
		},
	}
}
