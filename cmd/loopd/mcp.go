package main

import (
	"io"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/internal/buildinfo"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/loop/daemon/mcpserver"
	"github.com/theloop-dev/theloop/run"
)

// mcpCommand is `loopd mcp`: theloop's MCP server on stdio, for harnesses
// that spawn their servers. It runs in-process with the CLI's runtime and
// the operator's CLI config (no daemon needed): the same tools as a running
// loopd's /mcp. It was `loopctl mcp`; it lives in loopd so that loopctl —
// run on every claim and every CI check — does not link the MCP SDK.
func mcpCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve theloop's MCP tools (check, graph_show, graph_status, graph_complete, events, ask) on stdio",
		Description: `Register it with a harness, e.g. in .mcp.json:

   {"mcpServers": {"theloop": {"command": "loopd", "args": ["mcp"]}}}

It reads the operator's CLI config (--config, THE_LOOP_CLI_CONFIG, the
repository's .the-loop/cli-config.yaml, ~/.config) as loopctl does, and
inside a loopd session its ticket effects go through the session's outbox.
force and skip are deliberately not tools. (This was "loopctl mcp".)`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "the operator's cli-config.yaml", TakesFile: true},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return &exitError{code: exitRefused, msg: "mcp takes no arguments (got " + c.Args().First() + ")"}
			}
			return runMCP(c, e)
		},
	}
}

func runMCP(c *cli.Context, e *env) error {
	root := ""
	if wd, err := e.Getwd(); err == nil {
		root, _ = loop.FindRoot(wd)
	}
	clock := e.clock()
	cfg, err := loop.ResolveCLIConfig(loop.CLIConfigSource{
		Path: c.String("config"),
		// An empty variable is an unset one, as for loopctl.
		LookupEnv: func(k string) (string, bool) { v := e.Getenv(k); return v, v != "" },
		HomeDir:   e.HomeDir,
		WorkDir:   root,
	}, root)
	if err != nil {
		return &exitError{code: exitRefused, msg: "mcp: " + err.Error()}
	}
	var sink graph.Sink
	if cfg.EventLogEnabled && cfg.EventLogPath != "" {
		if el, err := loop.OpenEventLog(cfg.EventLogPath, "mcp", loop.EventLogOptions{Clock: clock, Warnings: e.Stderr}); err == nil {
			sink = el
			defer el.Close()
		}
	}
	managed, err := loop.ManagedSessionFromEnv(e.Getenv)
	if err != nil {
		return &exitError{code: exitFailed, msg: "mcp: " + err.Error()}
	}
	var integ, askInteg graph.Integrations
	if managed != nil {
		// In loopd's session the tools' requests (graph_complete's claims,
		// ask's questions) go through the session's outbox: no credential
		// here, and loopd derives the ticket's effects.
		integ, askInteg = loop.NewRecorder(*managed, "mcp", clock), loop.NewAskRecorder(*managed, "mcp", clock)
	} else {
		build := e.Integrations
		if build == nil {
			build = func(raw map[string]any, sink graph.Sink) (graph.Integrations, []string, error) {
				return integrations.Optional(raw, integrations.Deps{Env: os.LookupEnv, Runner: run.Exec{}, Sink: sink})
			}
		}
		i, warns, err := build(cfg.Integrations, sink)
		if err != nil {
			return &exitError{code: exitRefused, msg: "mcp: " + err.Error()}
		}
		for _, w := range warns {
			io.WriteString(e.Stderr, "warning: "+w+"\n")
		}
		integ, askInteg = i, i
	}
	logPath := ""
	if cfg.EventLogEnabled {
		logPath = cfg.EventLogPath
	}
	s, err := mcpserver.New(mcpserver.Config{
		Graphs: &apiserver.Graphs{SpecDir: cfg.GraphSpecDir, AuthorizedUsers: cfg.AuthorizedUsers, ExecuteKeyword: cfg.ExecuteKeyword,
			SessionPerPr: cfg.SessionPerPr, Integrations: integ, Sink: sink, Clock: clock},
		EventLogPath: logPath, Integrations: askInteg, Sink: sink, Clock: clock, Version: buildinfo.Version(version),
	})
	if err != nil {
		return err
	}
	err = s.Run(c.Context, &mcp.IOTransport{Reader: io.NopCloser(e.stdin()), Writer: nopWriteCloser{e.Stdout}})
	if err != nil && c.Context.Err() == nil && err != io.EOF {
		return err
	}
	return nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
