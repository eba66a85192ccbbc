package loop

import (
	"io"
	"path/filepath"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/run"
)

// LiveOptions are what OpenLive needs beyond the repository root. The
// callbacks keep OpenLive free of what lives above package loop (the
// integrations, a binary's flags and exit codes); each is optional.
type LiveOptions struct {
	// Config is where the operator's CLI config comes from; OpenLive sets
	// its WorkDir to the repository root.
	Config CLIConfigSource
	// WorkItem is the work item the runtime serves. It must have a spec
	// directory unless Create is set, in which case only its id is
	// validated (an explicit start: `graph run --create`).
	WorkItem string
	Create   bool
	// PR and PRRepo address a pull request's inner loop (Options.PR).
	PR     int
	PRRepo string
	// Clock stamps events (default: the system clock).
	Clock graph.Clock
	// Graph returns the graph to load instead of the repository's (nil
	// result or nil func: the repository's). It is called after the work
	// item is checked.
	Graph func() (*graph.Graph, error)
	// Verifier returns the decision verifier (nil: decisions unverified).
	// It is called after Graph, before anything is written.
	Verifier func() (graph.DecisionVerifier, error)
	// Signer returns the operator's signing key for the loaded config and a
	// warning when decisions will be recorded unsigned (nil: unsigned).
	Signer func(cfg CLIConfig) (graph.DecisionSigner, string)
	// Integrations builds the configured integrations over the event-log
	// sink, with warnings (nil: none).
	Integrations func(cfg *CLIConfig, sink graph.Sink) (graph.Integrations, []string, error)
	// VerifyIntegrations judges what the integrations' Verify(graph) said
	// about the loaded graph: a fatal error, or warnings (nil: not
	// verified).
	VerifyIntegrations func(cfg CLIConfig, verr error) ([]string, error)
	// EventLogWarnings receives the event log's own warnings.
	EventLogWarnings io.Writer
	// Warn receives every warning as it arises; when nil they are kept in
	// LiveRuntime.Warnings.
	Warn func(string)
	// Managed, when set, is the loopd-managed session this process runs
	// in (ManagedSessionFromEnv): the integrations are then the session's
	// outbox (a Recorder, LiveRuntime.Outbox) and Integrations and
	// VerifyIntegrations are not called — the session holds no credential,
	// and loopd performs the ticket's effects.
	Managed *ManagedSession
	// Source names the verb in the intents it records ("graph complete").
	Source string
	// Scrub cleans the event log's lines and graph-state.json of
	// credentials (CredentialScrub; nil: nothing is cleaned).
	Scrub func(any) any
}

// LiveRuntime is a runtime for a verb that may change state: it records
// events, reaches the configured integrations, and can run test commands.
type LiveRuntime struct {
	Runtime *graph.Runtime
	// Config is the CLI config it was opened with.
	Config CLIConfig
	// Warnings holds the warnings so far when LiveOptions.Warn is nil.
	Warnings []string
	// Outbox records the ticket's effects in a loopd-managed session (nil
	// outside one).
	Outbox *Recorder
	close  func() error
}

// Close closes the event log. It is safe on a nil LiveRuntime.
func (l *LiveRuntime) Close() error {
	if l == nil || l.close == nil {
		return nil
	}
	return l.close()
}

// LiveInputError is OpenLive refusing its input before anything is
// written: the CLI config (What is "config") or the work item (What is
// "work item"; Err wraps ErrInvalidID or ErrNoSuchWorkItem).
type LiveInputError struct {
	What string
	Err  error
}

func (e *LiveInputError) Error() string { return e.Err.Error() }
func (e *LiveInputError) Unwrap() error { return e.Err }

// ResolveCLIConfig is LoadCLIConfig with relative state and event-log
// paths taken relative to root (the repository), never to the working
// directory. root "" leaves them as they are.
func ResolveCLIConfig(src CLIConfigSource, root string) (CLIConfig, error) {
	cfg, err := LoadCLIConfig(src)
	if err != nil {
		return cfg, err
	}
	if root != "" {
		if cfg.EventLogPath != "" && !filepath.IsAbs(cfg.EventLogPath) {
			cfg.EventLogPath = filepath.Join(root, cfg.EventLogPath)
		}
		if cfg.StateRoot != "" && !filepath.IsAbs(cfg.StateRoot) {
			cfg.StateRoot = filepath.Join(root, cfg.StateRoot)
		}
	}
	return cfg, nil
}

// OpenLive opens the repository at root for a work item the way an agent's
// CLI does (`loopctl graph complete`): the operator's CLI config, the event
// log (as source "cli"; unavailable is a warning), the integrations, the
// decision verifier and signer, and a command runner. Every refusal comes
// before the first write (the event log's directory), so a typo leaves the
// repository as it was. The caller closes the result.
func OpenLive(root string, opts LiveOptions) (*LiveRuntime, error) {
	src := opts.Config
	src.WorkDir = root
	cfg, err := ResolveCLIConfig(src, root)
	if err != nil {
		return nil, &LiveInputError{What: "config", Err: err}
	}
	repo, err := OpenRepo(root, cfg.GraphSpecDir)
	if err != nil {
		return nil, err
	}
	if opts.Create {
		err = ValidateWorkItemID(opts.WorkItem)
	} else {
		err = repo.RequireWorkItem(opts.WorkItem)
	}
	if err != nil {
		return nil, &LiveInputError{What: "work item", Err: err}
	}
	var g *graph.Graph
	if opts.Graph != nil {
		if g, err = opts.Graph(); err != nil {
			return nil, err
		}
	}
	l := &LiveRuntime{Config: cfg, close: func() error { return nil }}
	warn := opts.Warn
	if warn == nil {
		warn = func(w string) { l.Warnings = append(l.Warnings, w) }
	}
	for _, w := range cfg.Warnings {
		warn(w)
	}
	var verifier graph.DecisionVerifier
	if opts.Verifier != nil {
		if verifier, err = opts.Verifier(); err != nil {
			return nil, err
		}
	}
	var signer graph.DecisionSigner
	if opts.Signer != nil {
		var w string
		if signer, w = opts.Signer(cfg); w != "" {
			warn(w)
		}
	}
	var sink graph.Sink
	if cfg.EventLogEnabled && cfg.EventLogPath != "" {
		el, err := OpenEventLog(cfg.EventLogPath, "cli", EventLogOptions{Clock: opts.Clock, Warnings: opts.EventLogWarnings, Scrub: opts.Scrub})
		if err != nil {
			warn("the event log is unavailable: " + err.Error())
		} else {
			sink, l.close = el, el.Close
		}
	}
	var integ graph.Integrations
	if opts.Managed != nil {
		l.Outbox = NewRecorder(*opts.Managed, opts.Source, opts.Clock)
		integ = l.Outbox
	} else if opts.Integrations != nil {
		i, warns, err := opts.Integrations(&cfg, sink)
		if err != nil {
			l.Close()
			return nil, err
		}
		integ = i
		for _, w := range warns {
			warn(w)
		}
	}
	rt, err := repo.Runtime(Options{
		Graph: g, WorkItem: opts.WorkItem, PR: opts.PR, PRRepo: opts.PRRepo,
		AuthorizedUsers: cfg.AuthorizedUsers, ExecuteKeyword: cfg.ExecuteKeyword, SessionPerPr: cfg.SessionPerPr,
		Integrations: integ, Commands: Commands{Runner: liveRunner, Root: repo.Root},
		// The CLI runs in the agent's sandbox (or the operator's shell):
		// the one place the repository's test command may run.
		RepoCommands: Commands{Runner: liveRunner, Root: repo.Root},
		Sink:         sink, Clock: opts.Clock, DecisionVerifier: verifier, DecisionSigner: signer,
		Warn: warn, Scrub: opts.Scrub,
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	if v, ok := integ.(interface{ Verify(*graph.Graph) error }); ok && opts.VerifyIntegrations != nil {
		warns, err := opts.VerifyIntegrations(cfg, v.Verify(rt.Graph()))
		if err != nil {
			l.Close()
			return nil, err
		}
		for _, w := range warns {
			warn(w)
		}
	}
	l.Runtime = rt
	return l, nil
}

// liveRunner runs the commands of a live walk (loopctl in the agent's
// session, or in CI): the caller's own environment, as a command run by
// hand in that shell would have — a repository's tests need its toolchain's
// variables. loopd never walks live (it has no RepoCommands).
var liveRunner = run.Exec{Environ: run.InheritEnv}
