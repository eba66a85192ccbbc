package main

import (
	"fmt"
	"path/filepath"

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
			o, ref, err := refVerb(f, c, verb)
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
			o, ref, err := refVerb(f, c, "reply")
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
			o, ref, err := refVerb(f, c, "transcript")
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

// printSessionResult is the table answer of reset, register and close.
func printSessionResult(f *Factory, res api.SessionResult) {
	fmt.Fprintf(f.IO.Out, "%s %s: %s", res.Ref, res.Verb, res.Effect)
	if res.Session != "" {
		fmt.Fprintf(f.IO.Out, " (tmux %s", res.Session)
		if res.Tmux != "" {
			fmt.Fprintf(f.IO.Out, ", %s", res.Tmux)
		}
		if res.HarnessSessionID != "" {
			fmt.Fprintf(f.IO.Out, ", conversation %s", res.HarnessSessionID)
		}
		fmt.Fprint(f.IO.Out, ")")
	}
	fmt.Fprintln(f.IO.Out)
	if res.PreviousSessionID != "" {
		fmt.Fprintf(f.IO.Out, "replaced conversation %s\n", res.PreviousSessionID)
	}
	for _, a := range res.Artifacts {
		fmt.Fprintf(f.IO.Out, "artifact: %s\n", a)
	}
	if res.AnnounceError != "" {
		fmt.Fprintf(f.IO.ErrOut, "warning: done, but not announced on the work item: %s\n", res.AnnounceError)
	}
}

func newSessionsResetCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name: "reset", Usage: "end the agent's conversation and start a fresh one at the same node, artifacts kept", ArgsUsage: "REF",
		Description: `loopd ends the work item's harness (its tmux session) and starts a new
conversation in the same checkout, told to read the work item's artifacts and
given the current node's assignment. The graph state, the checkout and the
artifacts are kept; the replaced conversation is listed in the session record's
fallbacks. Use it when an agent has lost its way or its context is spent.

Like start, it needs you to be an authorized user (the operator's GitHub login,
loopd --dashboard-operator, one of routing.authorizedUsers). It is recorded in
the event and audit logs and announced on the work item unless --no-comment.

Example:
   loopctl sessions reset github:octo/repo#42`,
		Flags: append(sessionRefFlags(), &cli.BoolFlag{Name: "no-comment", Usage: "do not announce the reset on the work item"}),
		Action: func(c *cli.Context) error {
			o, ref, err := refVerb(f, c, "reset")
			if err != nil {
				return err
			}
			var res api.SessionResult
			printed, err := o.call(c.Context, "POST", api.SessionPath(ref, "reset"), nil, api.ResetRequest{NoComment: c.Bool("no-comment")}, &res)
			if err != nil || printed {
				return err
			}
			printSessionResult(f, res)
			return nil
		},
	}
}

func newSessionsRegisterCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name: "register", Usage: "make a conversation you started yourself the work item's session", ArgsUsage: "REF",
		Description: `Records a harness conversation started outside loopd (say, claude in your own
terminal) as the work item's session. The next event resumes the conversation
(claude --resume) in loopd's tmux session for the item (loop-<slug>), in --cwd;
quit it in your terminal first, so one process holds it.

--cwd must be a checkout of the work item's repository. A conversation or a
checkout that another work item's live session holds is refused, --force or
not, and so is a tmux session already running under the item's name that no
live session of the item owns: one work item's agent can never be handed
another's events. --force only replaces this work item's own live session
(which is ended first).

Like start, it needs you to be an authorized user. It is recorded in the event
and audit logs and announced on the work item unless --no-comment.

Example:
   loopctl sessions register github:octo/repo#42 --harness-session-id 3f2b8c1e-5d4a-4b6f-9e7d-2a1c0b9f8e7d --cwd ~/src/repo`,
		Flags: append(sessionRefFlags(),
			&cli.StringFlag{Name: "harness", Usage: "the harness the conversation runs in (default: loopd's routing.defaultHarness)"},
			&cli.StringFlag{Name: "harness-session-id", Required: true, Usage: "the conversation's id (what the harness's --resume takes)"},
			&cli.StringFlag{Name: "cwd", Value: ".", Usage: "the checkout the conversation works in", TakesFile: true},
			&cli.BoolFlag{Name: "force", Usage: "replace the work item's own live session"},
			&cli.BoolFlag{Name: "no-comment", Usage: "do not announce the registration on the work item"}),
		Action: func(c *cli.Context) error {
			o, ref, err := refVerb(f, c, "register")
			if err != nil {
				return err
			}
			cwd := c.String("cwd")
			if !filepath.IsAbs(cwd) {
				wd, err := f.Getwd()
				if err != nil {
					return failWith(exitRefused, "loopctl sessions register: --cwd %s is relative and the working directory is unknown: %v", cwd, err)
				}
				cwd = filepath.Join(wd, cwd)
			}
			req := api.RegisterRequest{Harness: c.String("harness"), HarnessSessionID: c.String("harness-session-id"), Cwd: filepath.Clean(cwd),
				Force: c.Bool("force"), NoComment: c.Bool("no-comment")}
			var res api.SessionResult
			printed, err := o.call(c.Context, "POST", api.SessionPath(ref, "register"), nil, req, &res)
			if err != nil || printed {
				return err
			}
			printSessionResult(f, res)
			return nil
		},
	}
}

func newSessionsCloseCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name: "close", Usage: "end the work item's session, keeping its checkout and graph state", ArgsUsage: "REF",
		Description: `Ends the session (the harness and, unless kept, its tmux session) and marks the
record closed. The checkout, the artifacts and graph-state.json stay; unlike
stop, nothing is recorded that keeps the work item from being worked, so the
next event or ` + "`loopctl sessions start`" + ` brings a new session to the same node.
Unlike cleanup, the checkout is not removed.

--keep-tmux keeps the tmux session (its harness terminated) to read later;
--keep-tmux=false kills it; by default routing.tmux.keepSessionOnClose decides.
Recorded in the event and audit logs under your identity and announced on the
work item unless --no-comment.

Example:
   loopctl sessions close github:octo/repo#42 --keep-tmux`,
		Flags: append(sessionRefFlags(),
			&cli.BoolFlag{Name: "keep-tmux", Usage: "keep the tmux session with its last screen (false: kill it)"},
			&cli.BoolFlag{Name: "no-comment", Usage: "do not announce the close on the work item"}),
		Action: func(c *cli.Context) error {
			o, ref, err := refVerb(f, c, "close")
			if err != nil {
				return err
			}
			req := api.CloseRequest{NoComment: c.Bool("no-comment")}
			if c.IsSet("keep-tmux") {
				keep := c.Bool("keep-tmux")
				req.KeepTmux = &keep
			}
			var res api.SessionResult
			printed, err := o.call(c.Context, "POST", api.SessionPath(ref, "close"), nil, req, &res)
			if err != nil || printed {
				return err
			}
			printSessionResult(f, res)
			return nil
		},
	}
}
