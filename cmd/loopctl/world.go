package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/run"
)

// repoFlags are the flags every verb that opens a repository shares.
type repoFlags struct {
	Repo      string
	GraphFile string
	Config    string
	PR        int
	PRRepo    string
	// Trust holds --trust-key/--trust-base on verbs that take them.
	Trust loop.TrustSource
}

func repoFlagDefs(withPR bool) []cli.Flag {
	fl := []cli.Flag{
		&cli.StringFlag{Name: "repo", Usage: "repository root (default: found from the current directory upwards, as git does)"},
		&cli.StringFlag{Name: "graph", Usage: "load this graph file instead of the shipped loop (graph authors, conformance)", TakesFile: true},
		&cli.StringFlag{Name: "config", Usage: "the operator's cli-config.yaml (default: $THE_LOOP_CLI_CONFIG, the repository's .the-loop/cli-config.yaml, ~/.the-loop/cli-config.yaml)", TakesFile: true},
	}
	if withPR {
		fl = append(fl,
			&cli.IntFlag{Name: "pr", Usage: "address the pull request's inner loop (pdlc-pr-loop)"},
			&cli.StringFlag{Name: "pr-repo", Usage: "the repository the pull request lives in, owner/repo (default: the work item's)"},
		)
	}
	return fl
}

func readRepoFlags(c *cli.Context) repoFlags {
	rf := repoFlags{Repo: c.String("repo"), GraphFile: c.String("graph"), Config: c.String("config")}
	if c.IsSet("pr") {
		rf.PR = c.Int("pr")
	}
	if c.IsSet("pr-repo") {
		rf.PRRepo = c.String("pr-repo")
	}
	rf.Trust = loop.TrustSource{Keys: c.StringSlice("trust-key"), Base: c.String("trust-base")}
	return rf
}

// repoRoot is the repository a verb works on: --repo, else the root found
// by walking up from the working directory (loop.FindRoot). Outside any
// repository it refuses (exit 1) with the fix, so that nothing is ever
// created relative to an arbitrary working directory.
func (f *Factory) repoRoot(rf repoFlags) (string, error) {
	cwd := ""
	if rf.Repo == "" {
		var err error
		if cwd, err = f.Getwd(); err != nil {
			return "", err
		}
	}
	root, err := loop.ResolveRoot(rf.Repo, cwd)
	switch {
	case err != nil && rf.Repo != "":
		return "", failWith(exitRefused, "loopctl: %v", err) // a bad --repo is bad usage
	case err != nil:
		return "", failWith(exitFailed, "loopctl: %v", err)
	}
	return root, nil
}

// openRepo opens the repository and, when id is not empty, requires the
// work item to exist (loop.ErrNoSuchWorkItem, exit 1, naming the nearest
// known ids).
func (f *Factory) openRepo(rf repoFlags, specDir, id string) (*loop.Repo, error) {
	root, err := f.repoRoot(rf)
	if err != nil {
		return nil, err
	}
	repo, err := loop.OpenRepo(root, specDir)
	if err != nil {
		return nil, err
	}
	if id != "" {
		if err := repo.RequireWorkItem(id); err != nil {
			return nil, workItemError(err)
		}
	}
	return repo, nil
}

// workItemError maps a refused work item to its exit code: an invalid id is
// bad usage (2), an unknown one is not found (1).
func workItemError(err error) error {
	switch {
	case errors.Is(err, loop.ErrInvalidID):
		return failWith(exitRefused, "loopctl: %v", err)
	case errors.Is(err, loop.ErrNoSuchWorkItem):
		return failWith(exitFailed, "loopctl: %v", err)
	}
	return err
}

// rootHere is the repository holding the working directory, or "" outside
// one: for verbs that also work outside a repository (ask) but take
// relative state and event-log paths from it when there is one.
func (f *Factory) rootHere() string {
	wd, err := f.Getwd()
	if err != nil {
		return ""
	}
	root, _ := loop.FindRoot(wd)
	return root
}

// cliConfig loads the operator's CLI config. ./.the-loop/cli-config.yaml is
// looked up in root (the repository), and relative state and event-log
// paths are taken relative to root, never to the working directory.
func (f *Factory) cliConfig(path, root string) (loop.CLIConfig, error) {
	cfg, err := loop.ResolveCLIConfig(f.cliConfigSource(path, root), root)
	if err != nil {
		return cfg, failWith(exitRefused, "loopctl: %v", err)
	}
	return cfg, nil
}

// lookupEnv is Getenv as a lookup (an empty variable is unset).
func (f *Factory) lookupEnv(k string) (string, bool) { v := f.Getenv(k); return v, v != "" }

// cliConfigSource is where --config PATH, the environment and the home
// directory put the CLI config, looked up from root.
func (f *Factory) cliConfigSource(path, root string) loop.CLIConfigSource {
	return loop.CLIConfigSource{
		Path:      path,
		LookupEnv: f.lookupEnv,
		HomeDir:   f.HomeDir,
		WorkDir:   root,
	}
}

// openCheck opens a runtime for pure evaluation: no CLI config, no
// integrations, no event log, no subprocess.
func (f *Factory) openCheck(rf repoFlags, workItem string) (*graph.Runtime, error) {
	repo, err := f.openRepo(rf, "", workItem)
	if err != nil {
		return nil, err
	}
	g, err := f.graphFlag(rf)
	if err != nil {
		return nil, err
	}
	verifier, err := f.verifier(context.Background(), f.withTrustEnv(rf.Trust, repo.Root), false)
	if err != nil {
		return nil, err
	}
	return repo.Runtime(loop.Options{Graph: g, WorkItem: workItem, PR: rf.PR, PRRepo: rf.PRRepo, Clock: f.Clock, DecisionVerifier: verifier})
}

// graphFlag compiles --graph and prints its compile warnings (unreachable
// nodes, no reachable terminal node) on stderr.
func (f *Factory) graphFlag(rf repoFlags) (*graph.Graph, error) {
	g, err := rf.graph()
	if err != nil {
		return nil, err
	}
	if g != nil {
		for _, w := range g.Warnings() {
			fmt.Fprintln(f.IO.ErrOut, "warning:", w)
		}
	}
	return g, nil
}

// graph compiles --graph FILE against theloop's hooks (nil without --graph).
func (rf repoFlags) graph() (*graph.Graph, error) {
	return loadGraphFile(rf.GraphFile)
}

// shippedGraph is loop.ShippedGraph with an unknown --loop as bad usage.
func shippedGraph(name string) (*graph.Graph, error) {
	g, err := loop.ShippedGraph(name)
	if err != nil {
		return nil, failWith(exitRefused, "loopctl: --loop: %v", err)
	}
	return g, nil
}

func loadGraphFile(file string) (*graph.Graph, error) {
	if file == "" {
		return nil, nil
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, failWith(exitRefused, "loopctl: --graph: %v", err)
	}
	defer f.Close()
	// Bounded before anything is parsed: graphfile refuses what is larger.
	src, err := io.ReadAll(io.LimitReader(f, graphfile.MaxGraphBytes+1))
	if err != nil {
		return nil, failWith(exitRefused, "loopctl: --graph: %v", err)
	}
	g, err := graphfile.Load(file, src, loop.ShippedHooks())
	if err != nil {
		return nil, failWith(exitRefused, "loopctl: --graph: %v", err)
	}
	return g, nil
}

// live is a runtime for a verb that may change state: it records events,
// reaches the configured integrations, and can run test commands.
type live struct {
	rt       *graph.Runtime
	cfg      loop.CLIConfig
	warnings []string
	// outbox is set in a loopd-managed session: what the verb's hooks
	// asked loopd to do on the ticket.
	outbox *loop.Recorder
	close  func()
}

func (f *Factory) openLive(rf repoFlags, workItem, verb string) (*live, error) {
	return f.openLiveWith(rf, workItem, false, verb)
}

// openLiveWith is openLive; create lets a work item without a spec
// directory through (an explicit start: graph run --create). It is
// loop.OpenLive with the flags, the Factory's world, and loopctl's exit
// codes. In a loopd-managed session (loop.ManagedSessionFromEnv) the
// ticket's effects are recorded in the session's outbox for loopd to
// perform, with verb as their source, and no integration is built.
func (f *Factory) openLiveWith(rf repoFlags, workItem string, create bool, verb string) (*live, error) {
	root, err := f.repoRoot(rf)
	if err != nil {
		return nil, err
	}
	managed, err := loop.ManagedSessionFromEnv(f.Getenv)
	if err != nil {
		return nil, failWith(exitFailed, "loopctl: %v", err)
	}
	lr, err := loop.OpenLive(root, loop.LiveOptions{
		Config:   f.cliConfigSource(rf.Config, root),
		WorkItem: workItem, Create: create, PR: rf.PR, PRRepo: rf.PRRepo,
		Clock: f.Clock,
		Graph: func() (*graph.Graph, error) { return f.graphFlag(rf) },
		Verifier: func() (graph.DecisionVerifier, error) {
			return f.verifier(context.Background(), f.withTrustEnv(rf.Trust, root), true)
		},
		Signer:       func(cfg loop.CLIConfig) (graph.DecisionSigner, string) { return f.operatorSigner(cfg) },
		Integrations: f.Integrations,
		VerifyIntegrations: func(cfg loop.CLIConfig, verr error) ([]string, error) {
			if err := verifyIntegrations(verr, cfg.Integrations != nil); err != nil {
				return nil, err
			}
			return verifyWarnings(verr), nil
		},
		EventLogWarnings: f.IO.ErrOut,
		Managed:          managed,
		// What loopctl writes — its event log, graph-state.json — holds no
		// credential of this shell (docs/daemon.md §11.6).
		Scrub:  loop.CredentialScrub(f.lookupEnv),
		Source: verb,
	})
	var in *loop.LiveInputError
	switch {
	case errors.As(err, &in) && in.What == "config":
		return nil, failWith(exitRefused, "loopctl: %v", in.Err)
	case errors.As(err, &in):
		return nil, workItemError(in.Err)
	case err != nil:
		return nil, err
	}
	l := &live{rt: lr.Runtime, cfg: lr.Config, warnings: lr.Warnings, outbox: lr.Outbox, close: func() { lr.Close() }}
	return l, nil
}

// verifyIntegrations applies R6.9 to the CLI: a provider that is simply not
// configured is a deliberate absence (its hooks skip); any other problem
// fails the load when the operator configured integrations explicitly, and
// is a warning when they rely on the defaults.
func verifyIntegrations(err error, explicit bool) error {
	var ve *integrations.VerifyError
	if err == nil || !errors.As(err, &ve) {
		return err
	}
	var fatal []string
	for _, p := range ve.Problems {
		if errors.Is(p.Err, integrations.ErrProviderNotConfigured) {
			continue
		}
		fatal = append(fatal, p.String())
	}
	if len(fatal) == 0 || !explicit {
		return nil
	}
	return fmt.Errorf("the configured integrations cannot serve graph %s:\n  - %s", ve.Graph, strings.Join(fatal, "\n  - "))
}

func verifyWarnings(err error) []string {
	var ve *integrations.VerifyError
	if err == nil || !errors.As(err, &ve) {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range ve.Problems {
		if errors.Is(p.Err, integrations.ErrProviderNotConfigured) {
			continue
		}
		msg := fmt.Sprintf("integrations: %s unavailable (%s): side effects on the ticket are skipped", p.Provider, p.Reason)
		if !seen[msg] {
			seen[msg] = true
			out = append(out, msg)
		}
	}
	return out
}

// buildIntegrations is the real Factory.Integrations: the CLI config's
// integrations, optional when none are configured (integrations.Optional).
func buildIntegrations(cfg *loop.CLIConfig, sink graph.Sink) (graph.Integrations, []string, error) {
	return integrations.Optional(cfg.Integrations, integrations.Deps{Env: os.LookupEnv, Runner: run.Exec{}, Sink: sink})
}

func (f *Factory) warn(ws []string) {
	for _, w := range ws {
		fmt.Fprintln(f.IO.ErrOut, "warning:", w)
	}
}
