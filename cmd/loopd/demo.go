package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/loop/demo"
	demoagent "github.com/theloop-dev/theloop/loop/demo/agent"
)

// demoCommand is `loopd demo [--yes] [--keep]`, with the hidden
// `loopd demo agent`: the scripted agent the demo runs in tmux as `claude`.
//
// The agent is this same binary, re-executed (os.Executable) with the verb
// `demo agent`: it needs no other program installed and no build step, and
// its claims call the runtime `loopctl graph complete` calls (package
// loop/demo/agent's Live), so what the demo shows is what an agent with
// loopctl gets.
func demoCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "walk GitHub issue #1 through the-loop with the real daemon, tmux and git — against a local GitHub stand-in",
		Description: `demo runs the real loopd (embedded JetStream queue, signed webhooks, real tmux,
real git worktrees) against an in-process stand-in for GitHub, with a scripted
agent in place of Claude Code. It opens issue #1, labels it, and walks it
through pdlc-work-item-loop, printing every webhook, every paste into the
agent's session, every comment theloop posts and every transition. At each
approval gate it asks you to approve as the human, dana (--yes answers for
you), and it prints the tmux command to watch the agent work.

With --serve, the daemon, the stand-in and the dashboard stay up after the walk
until Ctrl-C; the dashboard's operator is dana, so its gate buttons post her
comment through the stand-in and the real webhook and authorization path.

Example:
   loopd demo --yes --serve

It never touches a repository or account of yours: everything lives in a
temporary directory (removed at the end unless --keep) and a private tmux
server (killed at the end). It needs tmux and git.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "approve every gate without asking"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the demo's directory (repository, worktree, state, event log) and print its path"},
			&cli.BoolFlag{Name: "serve", Usage: "after the walk, keep the daemon and its dashboard up until Ctrl-C (the gate buttons comment as dana)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return &exitError{code: exitRefused, msg: fmt.Sprintf("demo takes no arguments (got %q)", c.Args().First())}
			}
			return runDemo(e, c.Bool("yes"), c.Bool("keep"), c.Bool("serve"))
		},
		Subcommands: []*cli.Command{demoAgentCommand()},
	}
}

func runDemo(e *env, yes, keep, serve bool) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: cannot find this binary to run the scripted agent: %w", err)
	}
	// The stand-in's token goes to the daemon's integrations only: the
	// agent runs sandboxed without it (its claims go through loopd's outbox).
	token := demo.RandomSecret()
	ctx, cancel := e.Context()
	defer cancel()
	_, err = demo.Run(ctx, demo.Options{
		Yes: yes, Keep: keep, Serve: serve, In: os.Stdin, Out: e.Stdout,
		AgentArgv: []string{exe, "demo", "agent"}, Token: token, Path: e.Getenv("PATH"),
	})
	switch {
	case errors.Is(err, demo.ErrNotApproved):
		return nil
	case errors.Is(err, demo.ErrMissingTool):
		return &exitError{code: exitRefused, msg: err.Error()}
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return &exitError{code: exitFailed, msg: "demo interrupted; everything it started was stopped and removed"}
	}
	return err
}

// demoAgentCommand is the scripted agent's entry point. tmux runs it with
// the harness arguments Claude Code would get (--session-id, --resume),
// which it accepts and ignores.
func demoAgentCommand() *cli.Command {
	return &cli.Command{
		Name:   "agent",
		Hidden: true,
		Usage:  "the scripted agent loopd demo runs in tmux in place of claude",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Required: true, Usage: "the demo's CLI config (the agent's claims read it)"},
			&cli.StringFlag{Name: "attack", Usage: "the brief of the agent's attempt to approve its own work (what an attacker could find; no secret)"},
			&cli.IntFlag{Name: "demo-pid", Usage: "the demo's process: when it is gone, the agent ends its tmux server"},
			&cli.StringFlag{Name: "session-id", Hidden: true},
			&cli.StringFlag{Name: "resume", Hidden: true},
		},
		Action: func(c *cli.Context) error {
			return demoagent.Run(c.Context, demoagent.Options{ConfigPath: c.String("config"), AttackBrief: c.String("attack"), DemoPID: c.Int("demo-pid")})
		},
	}
}
