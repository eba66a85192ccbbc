package main

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/loop/api/login"
)

type dashboardOptions struct {
	Factory   *Factory
	Config    string
	StateRoot string
	Open      bool
	// Browser opens a URL (default: xdg-open, or open on macOS).
	Browser func(url string) error
}

func newDashboardCmd(f *Factory, runF func(*dashboardOptions) error) *cli.Command {
	return &cli.Command{
		Name:  "dashboard",
		Usage: "print a one-time login URL for the running loopd's dashboard (--open opens it)",
		Description: `The dashboard is served by loopd on the loopback interface. loopd writes
<state root>/dashboard.json (mode 0600) with the dashboard's address and a
random login key; this command reads it and mints a login URL that is valid
once, for 5 minutes. Opening it sets an HttpOnly, SameSite=Strict session
cookie. Whoever can read the state root can log in; nobody else can. It is
refused inside a loopd agent session (THE_LOOP_SESSION_ID or
THE_LOOP_WORK_ITEM set): the dashboard is the operator's.

Example:
   loopctl dashboard --open`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "the operator's cli-config.yaml (for state.root)", TakesFile: true},
			&cli.StringFlag{Name: "state-root", Usage: "theloop's state root (default: state.root of the config, .the-loop)"},
			&cli.BoolFlag{Name: "open", Usage: "open the URL in the default browser"},
		},
		Action: func(c *cli.Context) error {
			opts := &dashboardOptions{Factory: f, Config: c.String("config"), StateRoot: c.String("state-root"), Open: c.Bool("open"), Browser: openBrowser}
			if runF != nil {
				return runF(opts)
			}
			return runDashboard(opts)
		},
	}
}

// The variables loopd sets in every agent session it spawns (sessions'
// manager; docs/daemon.md §7.2).
const (
	sessionIDEnv = "THE_LOOP_SESSION_ID"
	workItemEnv  = "THE_LOOP_WORK_ITEM"
)

func runDashboard(opts *dashboardOptions) error {
	f := opts.Factory
	// A login URL is the operator's: it lets its holder post gate comments
	// as the operator. Inside an agent session it is refused. This is a
	// courtesy that says why; the barrier is the sandbox, which keeps the
	// login file out of the agent's reach.
	for _, name := range []string{sessionIDEnv, workItemEnv} {
		if v := f.Getenv(name); v != "" {
			return failWith(exitRefused, "loopctl dashboard: refused inside an agent session (%s=%s is set): a dashboard login is minted only by the operator, in a shell outside any loopd session", name, v)
		}
	}
	root, err := f.stateRoot(opts.StateRoot, opts.Config)
	if err != nil {
		return failWith(exitRefused, "loopctl dashboard: %v", err)
	}
	u, err := login.URL(root, f.Clock.Now())
	if err != nil {
		if errors.Is(err, login.ErrNoDashboard) {
			return failWith(exitFailed, "loopctl dashboard: %v", err)
		}
		return failWith(exitRefused, "loopctl dashboard: %v", err)
	}
	fmt.Fprintln(f.IO.Out, u)
	if opts.Open && opts.Browser != nil {
		if err := opts.Browser(u); err != nil {
			fmt.Fprintf(f.IO.ErrOut, "loopctl dashboard: could not open a browser (%v); open the URL above yourself\n", err)
		}
	}
	return nil
}

// openBrowser hands the URL to the desktop's opener (argv, no shell).
func openBrowser(u string) error {
	name := "xdg-open"
	if runtime.GOOS == "darwin" {
		name = "open"
	}
	cmd := exec.Command(name, u)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
