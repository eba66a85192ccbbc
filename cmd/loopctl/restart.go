package main

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/loop/api"
)

// restartOptions is `loopctl daemon restart`.
type restartOptions struct {
	Service     *serviceOptions
	WithUpgrade bool
	// Wait bounds the wait for the restarted loopd (0: do not wait).
	Wait time.Duration
	// Poll is the step of the wait.
	Poll time.Duration
}

func newDaemonRestartCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name:  "restart",
		Usage: "restart loopd gracefully (with --with-upgrade, upgrade theloop's plugin first)",
		Description: `loopd stops as on SIGTERM (no new webhooks, the queue drained, sessions left
running in tmux) and starts again in the same process from its executable on
disk, so a newly installed loopd takes over; systemd keeps its main PID. With
--with-upgrade the new loopd first re-installs theloop's plugin for every
harness it is installed for at your user scope (the Claude Code plugin, the
Codex plugin, the Gemini extension, Cursor's hook), as loopctl install would,
before it serves or spawns anything. The command waits until the restarted
loopd answers and prints what the upgrade changed.

Examples:
   loopctl daemon restart
   loopctl daemon restart --with-upgrade --template '{{range .pluginUpgrade}}{{.}}{{"\n"}}{{end}}'`,
		Flags: append(serviceFlags(),
			&cli.BoolFlag{Name: "with-upgrade", Usage: "upgrade theloop's plugin for the installed harnesses before serving again"},
			&cli.DurationFlag{Name: "wait", Value: 2 * time.Minute, Usage: "how long to wait for the restarted loopd to answer (0: do not wait)"}),
		Action: func(c *cli.Context) error {
			if err := noArgs(c, "daemon restart", ""); err != nil {
				return err
			}
			o, err := readServiceOptions(f, c)
			if err != nil {
				return err
			}
			return runDaemonRestart(c.Context, &restartOptions{Service: o, WithUpgrade: c.Bool("with-upgrade"), Wait: c.Duration("wait"), Poll: 200 * time.Millisecond})
		},
	}
}

func runDaemonRestart(ctx context.Context, opts *restartOptions) error {
	o := opts.Service
	cl, err := o.client()
	if err != nil {
		return err
	}
	var res api.RestartResult
	if err := cl.Do(ctx, "POST", api.RestartPath, nil, api.RestartRequest{WithUpgrade: opts.WithUpgrade}, &res); err != nil {
		return apiFailure(err)
	}
	w := o.Factory.IO.Out
	if opts.Wait <= 0 {
		if o.Format == "json" {
			return o.Output.write(w, res)
		}
		fmt.Fprintf(w, "loopd (pid %d) is restarting; check it with `loopctl daemon status`\n", res.PID)
		return nil
	}
	// The restarted loopd answers with a later start; until then the old one
	// may still answer, or nothing does.
	deadline := time.Now().Add(opts.Wait)
	var st api.Status
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st = api.Status{} // an answer leaves out empty fields: never keep the old one's
		err := cl.Do(cctx, "GET", "/status", nil, nil, &st)
		cancel()
		if err == nil && st.StartedAt.After(res.StartedAt) {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return failWith(exitFailed, "loopctl daemon restart: loopd did not answer as restarted within %s; look at its log (journalctl -u loopd) and `loopctl daemon status`", opts.Wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(opts.Poll):
		}
	}
	if o.Format == "json" {
		if err := o.Output.write(w, st); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "loopd %s restarted (pid %d)\n", st.Version, st.PID)
		for _, c := range st.PluginUpgrade {
			fmt.Fprintln(w, "plugin:", c)
		}
	}
	if st.PluginUpgradeError != "" {
		return failWith(exitFailed, "loopctl daemon restart: loopd restarted but upgrading the plugin failed: %s", st.PluginUpgradeError)
	}
	return nil
}
