package main

import (
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/loop/mcpserver"
)

// newMCPCmd is `loopctl mcp`: theloop's MCP server on stdio, for harnesses
// that spawn their servers. It runs in-process with the CLI's runtime (no
// daemon needed): the same tools as loopd's /mcp.
func newMCPCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name:  "mcp",
		Usage: "serve theloop's MCP tools (check, graph_show, graph_status, graph_complete, events, ask) on stdio",
		Description: `Register it with a harness, e.g. in .mcp.json:

   {"mcpServers": {"theloop": {"command": "loopctl", "args": ["mcp"]}}}

force and skip are deliberately not tools.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "the operator's cli-config.yaml", TakesFile: true},
		},
		Action: func(c *cli.Context) error {
			root := f.rootHere()
			cfg, err := f.cliConfig(c.String("config"), root)
			if err != nil {
				return failWith(exitRefused, "loopctl mcp: %v", err)
			}
			var sink graph.Sink
			if cfg.EventLogEnabled && cfg.EventLogPath != "" {
				if el, err := loop.OpenEventLog(cfg.EventLogPath, "mcp", loop.EventLogOptions{Clock: f.Clock, Warnings: f.IO.ErrOut}); err == nil {
					sink = el
					defer el.Close()
				}
			}
			managed, err := loop.ManagedSessionFromEnv(f.Getenv)
			if err != nil {
				return failWith(exitFailed, "loopctl mcp: %v", err)
			}
			var integ graph.Integrations
			if managed != nil {
				// In loopd's session the tools' ticket effects (graph_complete,
				// ask) go through the session's outbox: no credential here.
				integ = loop.NewRecorder(*managed, "mcp", f.Clock)
			} else if f.Integrations != nil {
				i, warns, err := f.Integrations(&cfg, sink)
				if err != nil {
					return failWith(exitRefused, "loopctl mcp: %v", err)
				}
				f.warn(warns)
				integ = i
			}
			logPath := ""
			if cfg.EventLogEnabled {
				logPath = cfg.EventLogPath
			}
			s := mcpserver.New(mcpserver.Config{
				Graphs: &apiserver.Graphs{SpecDir: cfg.GraphSpecDir, AuthorizedUsers: cfg.AuthorizedUsers, ExecuteKeyword: cfg.ExecuteKeyword,
					SessionPerPr: cfg.SessionPerPr, Integrations: integ, Sink: sink, Clock: f.Clock},
				EventLogPath: logPath, Integrations: integ, Sink: sink, Clock: f.Clock, Version: versionString(),
			})
			err = s.Run(c.Context, &mcp.IOTransport{Reader: io.NopCloser(f.IO.In), Writer: nopWriteCloser{f.IO.Out}})
			if err != nil && c.Context.Err() == nil && err != io.EOF {
				return err
			}
			return nil
		},
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
