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
	"github.com/theloop-dev/theloop/internal/run"
	"github.com/theloop-dev/theloop/loop"
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
		&cli.StringFlag{Name: "repo", Usage: "repository root (default: the current directory)"},
		&cli.StringFlag{Name: "graph", Usage: "load this graph file instead of the shipped loop (graph authors, conformance)", TakesFile: true},
		&cli.StringFlag{Name: "config", Usage: "the operator's cli-config.yaml (default: $THE_LOOP_CLI_CONFIG, ./.the-loop/cli-config.yaml, ~/.the-loop/cli-config.yaml)", TakesFile: true},
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

func (f *Factory) repoRoot(rf repoFlags) (string, error) {
	if rf.Repo != "" {
		return rf.Repo, nil
	}
	return f.Getwd()
}

func (f *Factory) cliConfig(path string) (loop.CLIConfig, error) {
	return loop.LoadCLIConfig(loop.CLIConfigSource{
		Path:      path,
		LookupEnv: func(k string) (string, bool) { v := f.Getenv(k); return v, v != "" },
		HomeDir:   f.HomeDir,
	})
}

// openCheck opens a runtime for pure evaluation: no CLI config, no
// integrations, no event log, no subprocess.
func (f *Factory) openCheck(rf repoFlags, workItem string) (*graph.Runtime, error) {
	root, err := f.repoRoot(rf)
	if err != nil {
		return nil, err
	}
	g, err := rf.graph()
	if err != nil {
		return nil, err
	}
	verifier, err := f.verifier(context.Background(), f.withTrustEnv(rf.Trust, root), false)
	if err != nil {
		return nil, err
	}
	return loop.Open(root, loop.Options{Graph: g, WorkItem: workItem, PR: rf.PR, PRRepo: rf.PRRepo, Clock: f.Clock, DecisionVerifier: verifier})
}

// graph compiles --graph FILE against theloop's hooks (nil without --graph).
func (rf repoFlags) graph() (*graph.Graph, error) {
	if rf.GraphFile == "" {
		return nil, nil
	}
	f, err := os.Open(rf.GraphFile)
	if err != nil {
		return nil, fmt.Errorf("--graph: %w", err)
	}
	defer f.Close()
	// Bounded before anything is parsed: graphfile refuses what is larger.
	src, err := io.ReadAll(io.LimitReader(f, graphfile.MaxGraphBytes+1))
	if err != nil {
		return nil, fmt.Errorf("--graph: %w", err)
	}
	return graphfile.Load(rf.GraphFile, src, loop.ShippedHooks())
}

// live is a runtime for a verb that may change state: it records events,
// reaches the configured integrations, and can run test commands.
type live struct {
	rt       *graph.Runtime
	cfg      loop.CLIConfig
	warnings []string
	close    func()
}

func (f *Factory) openLive(rf repoFlags, workItem string) (*live, error) {
	root, err := f.repoRoot(rf)
	if err != nil {
		return nil, err
	}
	cfg, err := f.cliConfig(rf.Config)
	if err != nil {
		return nil, err
	}
	l := &live{cfg: cfg, close: func() {}, warnings: append([]string{}, cfg.Warnings...)}
	verifier, err := f.verifier(context.Background(), f.withTrustEnv(rf.Trust, root), true)
	if err != nil {
		return nil, err
	}
	signer, warning := f.operatorSigner(cfg)
	if warning != "" {
		l.warnings = append(l.warnings, warning)
	}
	var sink graph.Sink
	if cfg.EventLogEnabled && cfg.EventLogPath != "" {
		el, err := loop.OpenEventLog(cfg.EventLogPath, "cli", loop.EventLogOptions{Clock: f.Clock, Warnings: f.IO.ErrOut})
		if err != nil {
			l.warnings = append(l.warnings, "the event log is unavailable: "+err.Error())
		} else {
			sink = el
			l.close = func() { el.Close() }
		}
	}
	var integ graph.Integrations
	if f.Integrations != nil {
		i, warns, err := f.Integrations(&cfg, sink)
		if err != nil {
			l.close()
			return nil, err
		}
		integ = i
		l.warnings = append(l.warnings, warns...)
	}
	repo, err := loop.OpenRepo(root, cfg.GraphSpecDir)
	if err != nil {
		l.close()
		return nil, err
	}
	g, err := rf.graph()
	if err != nil {
		l.close()
		return nil, err
	}
	rt, err := repo.Runtime(loop.Options{
		Graph: g, WorkItem: workItem, PR: rf.PR, PRRepo: rf.PRRepo,
		AuthorizedUsers: cfg.AuthorizedUsers, ExecuteKeyword: cfg.ExecuteKeyword, SessionPerPr: cfg.SessionPerPr,
		Integrations: integ, Commands: loop.Commands{Runner: run.Exec{}, Root: repo.Root},
		Sink: sink, Clock: f.Clock, DecisionVerifier: verifier, DecisionSigner: signer,
		Warn: func(w string) { l.warnings = append(l.warnings, w) },
	})
	if err != nil {
		l.close()
		return nil, err
	}
	if v, ok := integ.(interface{ Verify(*graph.Graph) error }); ok {
		verr := v.Verify(rt.Graph())
		if err := verifyIntegrations(verr, cfg.Integrations != nil); err != nil {
			l.close()
			return nil, err
		}
		l.warnings = append(l.warnings, verifyWarnings(verr)...)
	}
	l.rt = rt
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

// buildIntegrations is the real Factory.Integrations.
func buildIntegrations(cfg *loop.CLIConfig, sink graph.Sink) (graph.Integrations, []string, error) {
	ic := integrations.DefaultConfig()
	if cfg.Integrations != nil {
		var err error
		if ic, err = integrations.DecodeConfig(cfg.Integrations); err != nil {
			return nil, nil, err
		}
	}
	set, err := integrations.New(ic, integrations.Deps{Env: os.LookupEnv, Runner: run.Exec{}, Sink: sink})
	if err != nil {
		return nil, nil, err
	}
	if cfg.Integrations != nil {
		return set, nil, nil
	}
	// Nothing configured: GitHub is tried the default way (a token, else
	// gh). When neither is there, the ticket's side effects are skipped
	// with one warning rather than failing every hook.
	off := map[string]string{}
	var warns []string
	for _, p := range set.Providers() {
		if p.Unavailable != "" {
			off[p.Name] = p.Unavailable
			warns = append(warns, fmt.Sprintf("integrations: %s is unavailable (%s); ticket side effects are skipped — configure integrations in the CLI config to make this an error", p.Name, p.Unavailable))
		}
	}
	if len(off) == 0 {
		return set, nil, nil
	}
	return optionalProviders{set: set, off: off}, warns, nil
}

// optionalProviders answers calls to unavailable providers as not
// configured, so hooks skip them instead of recording a failure each time.
type optionalProviders struct {
	set *integrations.Set
	off map[string]string
}

func (o optionalProviders) Call(ctx context.Context, op graph.Operation, args map[string]any) (map[string]any, error) {
	if why, ok := o.off[op.Provider()]; ok {
		return nil, fmt.Errorf("%s unavailable (%s): %w", op.Provider(), why, graph.ErrUnsupportedOperation)
	}
	return o.set.Call(ctx, op, args)
}

func (f *Factory) warn(ws []string) {
	for _, w := range ws {
		fmt.Fprintln(f.IO.ErrOut, "warning:", w)
	}
}
