package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// Dashboard defaults for `loopd run`.
const (
	defaultDashboardListen = "127.0.0.1:8788"
	// operatorTokenEnv holds the operator's own GitHub token, for the
	// dashboard's gate comments; without it they go through the operator's
	// `gh` login (the cli transport).
	operatorTokenEnv = "THE_LOOP_DASHBOARD_GH_TOKEN"
	operatorEnv      = "THE_LOOP_DASHBOARD_OPERATOR"
)

func dashboardFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "dashboard", Value: defaultDashboardListen, Usage: "the dashboard's loopback host:port (\"off\" serves none); `loopctl dashboard` prints a login URL"},
		&cli.StringFlag{Name: "dashboard-operator", Usage: "your GitHub login: the dashboard's gate buttons comment as you (default $" + operatorEnv + "; none: no buttons)"},
	}
}

// setUpDashboard maps the dashboard flags onto cfg and builds the
// operator's integrations: the CLI config's GitHub settings with the
// operator's token ($THE_LOOP_DASHBOARD_GH_TOKEN) or, without one, the
// operator's own gh login. The daemon's bot token is never used for them.
func setUpDashboard(e *env, c *cli.Context, cfg *daemon.Config) (graph.Integrations, error) {
	listen := c.String("dashboard")
	if listen == "off" || listen == "" {
		return nil, nil
	}
	cfg.Dashboard.Listen = listen
	op := c.String("dashboard-operator")
	if op == "" {
		op = e.Getenv(operatorEnv)
	}
	if op == "" {
		return nil, nil
	}
	cfg.Dashboard.Operator = op
	gh := integrations.GitHubConfig{}
	if cfg.Integrations.GitHub != nil {
		gh = *cfg.Integrations.GitHub
	}
	if e.Getenv(operatorTokenEnv) != "" {
		gh.Transport = integrations.TransportAPI
		gh.API.TokenEnv = []string{operatorTokenEnv}
		gh.API.TokenCommand = nil
	} else {
		gh.Transport = integrations.TransportCLI
	}
	set, err := integrations.New(integrations.Config{GitHub: &gh}, integrations.Deps{Env: integrations.Env(e.LookupEnv)})
	if err != nil {
		return nil, fmt.Errorf("the dashboard operator's GitHub access (--dashboard-operator %s): %w", op, err)
	}
	return set, nil
}
