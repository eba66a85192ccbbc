package agent

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop"
)

// Live is the Claimer a real agent has: every call opens the checkout's
// runtime afresh, from the operator's CLI config, with the configured
// integrations, the event log and a command runner — the same library
// call `loopctl graph complete` makes in its own process (loop.OpenLive),
// so a claim runs the node's real exit chain and its side
// effects reach the ticket: directly, or — in a session loopd spawned —
// through loopd's outbox.
type Live struct {
	// Dir is the checkout.
	Dir string
	// ConfigPath is the CLI config file; it must exist (the scripted agent
	// never falls back to a config in the user's home).
	ConfigPath string
	// LookupEnv reads credentials named by the config (default: none).
	LookupEnv func(string) (string, bool)
	// Warn receives warnings (default: discarded).
	Warn io.Writer
}

func (l *Live) open(id string) (*graph.Runtime, func(), error) {
	env := l.LookupEnv
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	warn := l.Warn
	if warn == nil {
		warn = io.Discard
	}
	if l.ConfigPath == "" {
		return nil, nil, fmt.Errorf("the scripted agent needs --config: the demo's cli-config.yaml")
	}
	// In a session loopd spawned the claims' ticket effects go through
	// loopd's outbox, as `loopctl graph complete`'s do.
	managed, err := loop.ManagedSessionFromEnv(func(k string) string { v, _ := env(k); return v })
	if err != nil {
		return nil, nil, err
	}
	lr, err := loop.OpenLive(l.Dir, loop.LiveOptions{
		Config: loop.CLIConfigSource{Path: l.ConfigPath, LookupEnv: env,
			HomeDir: func() (string, error) { return "", fmt.Errorf("no home") }},
		// The claimed item exists; its id is only validated, as before.
		WorkItem: id, Create: true,
		Integrations: func(cfg *loop.CLIConfig, sink graph.Sink) (graph.Integrations, []string, error) {
			ic, err := integrations.DecodeConfig(cfg.Integrations)
			if err != nil {
				return nil, nil, err
			}
			set, err := integrations.New(ic, integrations.Deps{Env: env, Sink: sink})
			return set, nil, err
		},
		EventLogWarnings: warn,
		Warn:             func(w string) { fmt.Fprintln(warn, "warning:", w) },
		Managed:          managed,
		Source:           "graph complete",
	})
	if err != nil {
		return nil, nil, err
	}
	return lr.Runtime, func() { lr.Close() }, nil
}

// SpecDir is the checkout's spec directory (workflow.specDir, or the CLI
// config's override).
func (l *Live) SpecDir() (string, error) {
	override := ""
	if l.ConfigPath != "" {
		cfg, err := loop.LoadCLIConfig(loop.CLIConfigSource{Path: l.ConfigPath, LookupEnv: l.LookupEnv,
			HomeDir: func() (string, error) { return "", fmt.Errorf("no home") }, WorkDir: l.Dir})
		if err != nil {
			return "", err
		}
		override = cfg.GraphSpecDir
	}
	repo, err := loop.OpenRepo(l.Dir, override)
	if err != nil {
		return "", err
	}
	return repo.SpecDir, nil
}

// Current implements Claimer.
func (l *Live) Current(ctx context.Context, id string) (Position, error) {
	rt, done, err := l.open(id)
	if err != nil {
		return Position{}, err
	}
	defer done()
	rep, err := rt.Status(ctx, id, false)
	if err != nil {
		return Position{}, err
	}
	pos := Position{Node: rep.CurrentNode}
	if n, ok := rt.Graph().Node(rep.CurrentNode); ok {
		pos.Human, pos.Terminal = n.IsHuman(), n.Terminal
	}
	return pos, nil
}

// Complete implements Claimer: `loopctl graph complete <id>`.
func (l *Live) Complete(ctx context.Context, id string) (*graph.Claim, error) {
	rt, done, err := l.open(id)
	if err != nil {
		return nil, err
	}
	defer done()
	c, err := rt.Complete(ctx, id, "", "cli") // loopctl graph complete's default actor
	if errors.Is(err, graph.ErrBusy) {
		// As loopctl graph complete answers a held lock: a busy claim, tried
		// again on the next round.
		return &graph.Claim{Status: "busy", Reason: "busy", Messages: []string{"another theloop process holds the graph-state lock; try again"}}, nil
	}
	return c, err
}

var _ Claimer = (*Live)(nil)
