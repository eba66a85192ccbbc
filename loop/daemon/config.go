package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
	"github.com/theloop-dev/theloop/loop/daemon/slackchan"
	"github.com/theloop-dev/theloop/sessions"
)

// routing.spawnOnUnmatched values.
const (
	SpawnNever   = "never"
	SpawnAlways  = "always"
	SpawnLabeled = "labeled"
)

// routing.webTerminal.mode values.
const (
	WebTerminalOff   = "off"
	WebTerminalView  = "view"
	WebTerminalReply = "reply"
)

// routing.interaction.mode values (docs/daemon.md §10).
const (
	InteractionWorkItem = "work-item"
	InteractionCLI      = "cli"
)

// Defaults (docs/daemon.md §12.2).
const (
	DefaultListen           = "127.0.0.1:8787"
	DefaultWebhookPath      = "/gh-webhook"
	DefaultSecretEnv        = "THE_LOOP_GH_WEBHOOK_SECRET"
	DefaultAutoExecuteLabel = "the-loop: auto-execute"
	DefaultParallelism      = 4
	DefaultMaxDeliver       = 5
)

// Reactions are the emoji put on a triggering comment or work item
// (routing.reactions; "" skips one).
type Reactions struct {
	Enabled                   bool
	Started, Completed, Error string
}

// HarnessTrust is routing.harnessTrust.
type HarnessTrust struct {
	// Enabled writes trust for the session's directory; false leaves the
	// user's Claude Code config alone.
	Enabled bool
	// Scope is sessions.TrustWorkspaceRoot or sessions.TrustDirectory.
	Scope string
	// AcceptBypass is sessions.BypassAuto, BypassAlways or BypassNever.
	AcceptBypass string
}

// Config is loopd's configuration. Start from DefaultConfig (or
// ConfigFromCLI) and set StateRoot.
type Config struct {
	// StateRoot is theloop's state root (absolute): queue store, session
	// registry, control records, event log, lock.
	StateRoot string

	// Listen is the webhook receiver's host:port ("127.0.0.1:0" picks a
	// port; see Daemon.Addr).
	Listen string
	// WebhookPath is the POST path (default /gh-webhook).
	WebhookPath string
	// WebhookHookID is the GitHub webhook whose failed deliveries the
	// reconcile pass has redelivered (0: the served repositories' hooks
	// whose URL path is WebhookPath; redeliver.go).
	WebhookHookID int64
	// Secret is the webhook HMAC secret. Empty refuses to run unless
	// InsecureAcceptUnsigned.
	Secret []byte
	// InsecureAcceptUnsigned accepts unsigned webhooks (the only way to run
	// without a secret; docs/decisions.md §10).
	InsecureAcceptUnsigned bool
	// Events is the receiver's event filter (nil: ingress's default set).
	Events []string
	// Repos bounds the repositories accepted ("owner/repo", "owner/*";
	// empty: every delivery is dropped — the receiver fails closed).
	Repos []string

	// QueueURL is an external NATS server; "" embeds one under StateRoot.
	QueueURL string
	// QueueAuth, QueueTLS and QueueInsecure reach it (queue.*; the
	// password read from queue.passwordFile or queue.passwordEnv).
	QueueAuth     queue.Auth
	QueueTLS      queue.TLS
	QueueInsecure bool
	// Parallelism bounds dispatches running at once
	// (routing.maxConcurrentDispatches).
	Parallelism int
	// MaxDeliver is the attempts per event before it is dead-lettered.
	MaxDeliver int

	// AuthorizedUsers is routing.authorizedUsers (empty denies every named
	// actor).
	AuthorizedUsers []string
	// Authorized is routing.authorized: logins, team:ORG/SLUG,
	// permission:write|maintain|admin and codeowners, answered by GitHub
	// (ingress.Authority).
	Authorized []string
	// AuthorityTTL is routing.authorizedCacheSeconds: how long GitHub's
	// answers about teams, roles and CODEOWNERS are believed.
	AuthorityTTL time.Duration
	// Keywords are the control keywords by command (routing.control.keywords).
	Keywords map[string]string
	// ControlEnabled is routing.control.enabled.
	ControlEnabled bool
	// RequireStartCommand is routing.control.requireStartCommand: the
	// auto-execute label arms but does not start.
	RequireStartCommand bool
	// SpawnOnUnmatched is never, always or labeled.
	SpawnOnUnmatched string
	// AutoExecuteLabel is the arming label.
	AutoExecuteLabel string

	// DefaultHarness names the harness adapter (claude, cursor, codex,
	// gemini); a work item's label "the-loop: harness-<name>" picks another.
	DefaultHarness string
	// HarnessArgs are routing.harnessArgs.claude.
	HarnessArgs []string
	// CursorArgs, CodexArgs and GeminiArgs are routing.harnessArgs.cursor,
	// .codex and .gemini.
	CursorArgs, CodexArgs, GeminiArgs []string
	// HarnessByRepository is routing.harnessByRepository (owner/repo
	// lower-cased → harness).
	HarnessByRepository map[string]string
	// ClaudeEnv prepares Claude Code's trust and plugin settings (nil: from
	// the environment, with the-loop's defaults; a zero ConfigDir disables).
	ClaudeEnv *sessions.ClaudeEnvironment
	// GeminiTrustedFolders is the Gemini CLI's trusted-folders file in
	// which each Gemini session's checkout is marked trusted before the CLI
	// starts, so that a project-scope gate loads ("": the user's, when
	// ClaudeEnv is nil and routing.harnessTrust is on; else none). Not a key.
	GeminiTrustedFolders string
	// WorkspaceRoot enables one git worktree per work item
	// (routing.workspace.root); "" runs sessions in SpawnWorkdir.
	WorkspaceRoot string
	// SpawnWorkdir is the cwd of sessions when there is no workspace.
	SpawnWorkdir string
	// KeepCheckoutOnClose keeps the worktree when a session closes.
	KeepCheckoutOnClose bool
	// CloneURL is routing.workspace.cloneUrl: a template with {host},
	// {owner} and {repo} to clone from, trusted as the operator's; empty:
	// the payload's clone_url when it passes checkedCloneURL.
	CloneURL string
	// KeepSessionOnClose keeps the tmux session when the work item closes
	// (routing.tmux.keepSessionOnClose, default true: the transcript stays
	// for a post-mortem); false kills it.
	KeepSessionOnClose bool
	// KillHarnessOnClose, with KeepSessionOnClose, terminates the harness
	// inside the kept session (routing.tmux.killHarnessOnClose, default
	// true): SIGTERM, then SIGKILL after HarnessKillGrace. False keeps the
	// harness running too.
	KillHarnessOnClose bool
	// HarnessKillGrace is routing.tmux.harnessKillGraceSeconds (default 5 s).
	HarnessKillGrace time.Duration
	// ResumeOnRespawn reopens a dead session's conversation first.
	ResumeOnRespawn bool
	// Liveness is the watch that respawns a session whose harness died
	// (liveness.go; docs/daemon.md §6.8).
	Liveness LivenessConfig
	// Usage is usage.* and routing.budget (usagewatch.go; docs/usage.md).
	Usage UsageConfig
	// ResumeProbe is how long a resumed harness must stay alive to count
	// as resumed (routing.tmux.resumeProbeSeconds; 0: sessions' default).
	ResumeProbe time.Duration
	// HarnessTrust is routing.harnessTrust: whether (and how widely) loopd
	// writes workspace trust into the user's Claude Code config. Applies
	// when ClaudeEnv is nil.
	HarnessTrust HarnessTrust
	// HarnessPlugins is routing.harnessPlugins.enabled: install and enable
	// theloop's plugin in the user's Claude Code config (when ClaudeEnv is
	// nil).
	HarnessPlugins bool
	// DispatchTimeout bounds the handling of one event
	// (routing.dispatchTimeoutSeconds; 0: none). A dispatch past it is
	// cancelled and the event redelivered.
	DispatchTimeout time.Duration
	// DedupSize bounds the receiver's in-memory delivery-id cache
	// (routing.dedupCacheSize; 0: ingress's default).
	DedupSize int
	// Tmux configures the tmux runner (socket, timeouts).
	Tmux sessions.TmuxConfig
	// SandboxOff is routing.sandbox: off — agents run without Landlock
	// (the environment is still allowlisted); every spawn warns and the
	// status says the gates are not defended. The zero value confines.
	SandboxOff bool
	// SandboxLandlock is routing.sandbox: landlock — agents run under
	// Landlock over loopd's own world, without the namespace sandbox
	// (degraded: said on every spawn, in status and on the dashboard). The
	// zero value builds a world per session (docs/decisions.md §22).
	SandboxLandlock bool
	// SandboxHostNetwork is routing.sandbox.network: host (degraded).
	SandboxHostNetwork bool
	// SandboxAllowHosts is routing.sandbox.allowHosts.
	SandboxAllowHosts []string
	// AgentEnv is routing.agentEnv: further variables agent sessions keep.
	AgentEnv []string
	// SecretEnvNames are the variables this configuration points loopd and
	// its integrations at for credentials (beside sandbox.SecretEnv): no
	// agent gets them, and the programs loopd runs for itself (tmux, git)
	// start without them.
	SecretEnvNames []string
	// SandboxWritable are further directories agents may write (an
	// embedder's harness state; tests' stand-in harness logs). Not a key.
	SandboxWritable []string
	// Launcher is the sandbox launcher executable ("" = this process's
	// executable, which must call sandbox.MaybeRunLauncher first thing).
	Launcher string

	// InteractionMode is routing.interaction.mode (work-item | cli).
	InteractionMode string
	// PromptTemplate and SpawnPromptTemplate are template texts ("" = the
	// built-in ones).
	PromptTemplate, SpawnPromptTemplate string

	// GraphEnabled couples dispatch to the process graph
	// (routing.graph.enabled).
	GraphEnabled bool
	// GraphSpecDir overrides the repository's workflow.specDir.
	GraphSpecDir   string
	ExecuteKeyword string
	SessionPerPr   string

	Reactions       Reactions
	AnnounceEnabled bool
	// WebTerminal is routing.webTerminal.mode: "off" (no live pane on the
	// dashboard), "view" (read-only, the default) or "reply" (and a reply
	// box for an operator who is an authorized user).
	WebTerminal string

	// ReconcileInterval is how often the reconcile pass runs (0: only at
	// start; negative: never).
	ReconcileInterval time.Duration
	// Poll configures the ingress poller whose reconcile pass loopd runs
	// (polling.sources: label discovery and new comments for those
	// repositories; closure of every live session's work item in any case).
	Poll ingress.PollerConfig

	// Integrations configures outbound GitHub/Slack/Jira (used when
	// Deps.Integrations is nil).
	Integrations integrations.Config
	// EventLogPath is the JSONL event log ("" = none). A relative path is
	// taken under StateRoot (loop.DaemonEventLog, the default, is
	// <state root>/logs/events.jsonl): it never depends on the working
	// directory. New makes it absolute.
	EventLogPath string
	// DrainTimeout bounds the wait for running dispatches at shutdown.
	DrainTimeout time.Duration
	// Dashboard configures the web dashboard (zero: none).
	Dashboard DashboardConfig

	// Notifications is cli-config.yaml's notifications with its
	// collaborators: loopd's own events told to people (notify.go).
	Notifications loop.DaemonNotifications

	// Slack is channels.slack: the Slack channel (slack.go; nil: off). Its
	// secrets are read from the environment by ConfigFromSettings.
	Slack *slackchan.Config

	// Jira is webhooks.jiraWebhook: the Jira webhook endpoint and poll
	// (jira.go; nil: off). Its secret is read from a file or the
	// environment by ConfigFromSettings.
	Jira *JiraIntake

	// Service is the control plane (service.*; service.go).
	Service ServiceConfig
	// Cluster shares the work items among several loopd (service.node,
	// service.maxSessions, service.leaseTTLSeconds, queue.replicas;
	// cluster.go).
	Cluster ClusterConfig
}

// DefaultConfig returns the reference defaults; StateRoot is left empty.
func DefaultConfig() Config {
	return Config{
		Listen:              DefaultListen,
		WebhookPath:         DefaultWebhookPath,
		Parallelism:         DefaultParallelism,
		MaxDeliver:          DefaultMaxDeliver,
		Keywords:            loop.DefaultControlKeywords(),
		ControlEnabled:      true,
		RequireStartCommand: true,
		SpawnOnUnmatched:    SpawnNever,
		AutoExecuteLabel:    DefaultAutoExecuteLabel,
		DefaultHarness:      "claude",
		SpawnWorkdir:        ".",
		ResumeOnRespawn:     true,
		Liveness:            DefaultLivenessConfig(),
		Usage:               UsageConfig{Poll: DefaultUsagePoll, Budget: loop.BudgetSettings{WarnAt: 0.8}},
		HarnessTrust:        HarnessTrust{Enabled: true, Scope: sessions.TrustWorkspaceRoot, AcceptBypass: sessions.BypassAuto},
		HarnessPlugins:      true,
		KeepSessionOnClose:  true,
		KillHarnessOnClose:  true,
		HarnessKillGrace:    sessions.DefaultHarnessKillGrace,
		Tmux:                sessions.DefaultTmuxConfig(),
		InteractionMode:     InteractionWorkItem,
		GraphEnabled:        true,
		ExecuteKeyword:      "the-loop execute",
		SessionPerPr:        loop.SessionPerPrCrossRepository,
		Reactions:           Reactions{Enabled: true, Started: "eyes", Completed: "hooray", Error: "confused"},
		AnnounceEnabled:     true,
		WebTerminal:         WebTerminalView,
		ReconcileInterval:   5 * time.Minute,
		Integrations:        integrations.DefaultConfig(),
		DrainTimeout:        30 * time.Second,
	}
}

// ConfigFromCLI maps the operator's CLI config onto a Config: its
// settings resolved against the environment (loop.Settings.Resolve — the
// function `loopctl config show` calls too), then ConfigFromSettings.
// getenv reads THE_LOOP_STATE_ROOT and the secrets; relative paths are
// resolved against workDir.
func ConfigFromCLI(c loop.CLIConfig, getenv func(string) string, workDir string) (Config, []string, error) {
	st, err := loop.ResolveSettings(c, loop.SettingsEnv{Getenv: getenv, HomeDir: os.UserHomeDir, WorkDir: workDir})
	if err != nil {
		return Config{}, nil, err
	}
	return ConfigFromSettings(st, getenv)
}

// ConfigFromSettings maps resolved settings onto loopd's Config. It adds no
// default of its own: every value comes from st (so `config show`, which
// prints st, shows what loopd uses). getenv reads the webhook secret from
// the variable webhooks.ghWebhook.secretEnv names (falling back to
// THE_LOOP_GH_WEBHOOK_SECRET) and the service token — never from a file.
func ConfigFromSettings(st loop.Settings, getenv func(string) string) (Config, []string, error) {
	cfg := DefaultConfig()
	var warns []string // st.Warnings reach the operator with the CLI config's
	cfg.StateRoot = st.StateRoot
	cfg.Repos = st.Repositories
	cfg.AuthorizedUsers = st.Routing.AuthorizedUsers
	cfg.Authorized = st.Routing.Authorized
	cfg.AuthorityTTL = st.Routing.AuthorizedCache
	cfg.Keywords = st.Routing.Keywords
	cfg.ExecuteKeyword = st.Routing.Keywords["execute"]
	cfg.SessionPerPr = st.Routing.Tmux.SessionPerPr
	cfg.GraphSpecDir = st.Routing.GraphSpecDir
	cfg.EventLogPath = ""
	if st.EventLog.Enabled {
		cfg.EventLogPath = st.EventLog.Path
	}
	wh := st.Webhook
	cfg.Listen = fmt.Sprintf("%s:%d", wh.Host, wh.Port)
	cfg.WebhookPath = wh.Path
	cfg.Events = wh.Events
	if s := getenv(wh.SecretEnv); s != "" {
		cfg.Secret = []byte(s)
	} else if s := getenv(DefaultSecretEnv); s != "" {
		cfg.Secret = []byte(s)
	}
	cfg.QueueURL = st.Queue.URL
	if err := queueCredentials(&cfg, st, getenv); err != nil {
		return cfg, warns, err
	}
	sv := st.Service
	cfg.Service = ServiceConfig{
		Disabled: !sv.Enabled, MCPDisabled: !sv.MCPEnabled, Listen: sv.Listen, Token: getenv(sv.TokenEnv),
		StreamDisabled: !sv.StreamEnabled, StreamMaxSubscribers: sv.StreamMaxSubscribers, StreamKeepAlive: sv.StreamKeepAlive,
		GateStuckAfter: sv.GateStuckAfter,
	}
	cfg.Cluster = ClusterConfig{Node: sv.Node, MaxSessions: sv.MaxSessions, LeaseTTL: sv.LeaseTTL, QueueReplicas: st.Queue.Replicas}
	if cfg.Cluster.Node != "" && cfg.QueueURL == "" {
		return cfg, warns, fmt.Errorf("service.node %q shares the work with other loopd, which needs queue.url naming their NATS cluster: %w", cfg.Cluster.Node, loop.ErrInvalidConfig)
	}

	rt := st.Routing
	cfg.SpawnOnUnmatched = rt.SpawnOnUnmatched
	cfg.AutoExecuteLabel = rt.AutoExecuteLabel
	cfg.ControlEnabled = rt.ControlEnabled
	cfg.RequireStartCommand = rt.RequireStartCommand
	cfg.Parallelism = rt.MaxConcurrentDispatches
	cfg.DedupSize = rt.DedupCacheSize
	cfg.DispatchTimeout = rt.DispatchTimeout
	cfg.DefaultHarness = rt.DefaultHarness
	cfg.HarnessArgs = rt.HarnessArgs.Claude
	cfg.CursorArgs, cfg.CodexArgs, cfg.GeminiArgs = rt.HarnessArgs.Cursor, rt.HarnessArgs.Codex, rt.HarnessArgs.Gemini
	cfg.HarnessByRepository = rt.HarnessByRepository
	cfg.HarnessTrust = HarnessTrust{Enabled: rt.HarnessTrust.Enabled, Scope: rt.HarnessTrust.Scope, AcceptBypass: rt.HarnessTrust.AcceptBypass}
	cfg.HarnessPlugins = rt.HarnessPluginsEnabled
	cfg.SpawnWorkdir = rt.SpawnWorkdir
	cfg.WorkspaceRoot = rt.WorkspaceRoot
	cfg.KeepCheckoutOnClose = rt.KeepCheckoutOnClose
	cfg.CloneURL = rt.CloneURL
	tm := rt.Tmux
	cfg.KeepSessionOnClose = tm.KeepSessionOnClose
	cfg.KillHarnessOnClose = tm.KillHarnessOnClose
	cfg.HarnessKillGrace = tm.HarnessKillGrace
	cfg.ResumeOnRespawn = tm.ResumeOnRespawn
	cfg.ResumeProbe = tm.ResumeProbe
	cfg.Liveness = LivenessConfig{Off: !tm.Liveness.Enabled, Interval: tm.Liveness.Interval, MaxRespawns: tm.Liveness.MaxRespawns,
		Window: tm.Liveness.Window, Backoff: tm.Liveness.Backoff, Label: DefaultLivenessConfig().Label,
		MaxInFlight: sv.MaxSessions} // liveness.go: respawns in flight bounded by the node's capacity
	cfg.Usage = usageConfigFromSettings(st.Usage)
	cfg.SandboxOff = rt.Sandbox == "off"
	cfg.SandboxLandlock = rt.Sandbox == "landlock"
	cfg.SandboxHostNetwork = rt.SandboxNetwork == "host"
	cfg.SandboxAllowHosts = rt.SandboxAllowHosts
	cfg.AgentEnv = rt.AgentEnv
	cfg.Tmux.RemainOnExit = tm.RemainOnExit
	cfg.Tmux.SocketPath = tm.SocketPath
	mode, w := ResolveInteractionMode(rt.InteractionMode)
	cfg.InteractionMode = mode
	if w != "" {
		warns = append(warns, w)
	}
	cfg.GraphEnabled = rt.GraphEnabled
	cfg.Reactions = Reactions{Enabled: rt.Reactions.Enabled, Started: rt.Reactions.Started, Completed: rt.Reactions.Completed, Error: rt.Reactions.Error}
	cfg.AnnounceEnabled = rt.AnnounceEnabled
	cfg.WebTerminal = rt.WebTerminal
	for _, t := range []struct {
		key, path string
		dst       *string
	}{{"promptTemplate", rt.PromptTemplate, &cfg.PromptTemplate}, {"spawnPromptTemplate", rt.SpawnPromptTemplate, &cfg.SpawnPromptTemplate}} {
		if t.path == "" {
			continue
		}
		b, err := os.ReadFile(t.path)
		if err != nil {
			// The reference falls back to the built-in template.
			warns = append(warns, fmt.Sprintf("routing.%s: %v; using the built-in template", t.key, err))
			continue
		}
		*t.dst = string(b)
	}
	// polling.enabled: false keeps the pass at start, which catches what
	// was missed while loopd was down (GitHub does not redeliver).
	cfg.ReconcileInterval = st.Polling.Interval
	if !st.Polling.Enabled {
		cfg.ReconcileInterval = 0
	}
	cfg.Poll = ingress.PollerConfig{StateRoot: st.StateRoot, Interval: st.Polling.Interval, MaxRetries: st.Polling.MaxRetries}
	for _, src := range st.Polling.Sources {
		cfg.Poll.Sources = append(cfg.Poll.Sources, ingress.PollSource{Repos: src.Repos, Label: src.Label, SkipIssues: !src.Issues, SkipPullRequests: !src.PullRequests})
	}
	if st.Integrations != nil {
		ic, err := integrations.DecodeConfig(st.Integrations)
		if err != nil {
			return cfg, warns, err
		}
		cfg.Integrations = ic
		if ic.GitHub != nil {
			cfg.WebhookHookID = ic.GitHub.Webhook.HookID // redeliver.go
		}
	}
	sc, err := slackConfig(st.Channels.Slack, st.StateRoot, getenv)
	if err != nil {
		return cfg, warns, err
	}
	cfg.Slack = sc
	cfg.Notifications = st.Notifications
	if cfg.Jira, err = jiraIntake(st.JiraWebhook, getenv); err != nil { // jira.go
		return cfg, warns, err
	}
	cfg.SecretEnvNames = secretNames(cfg, wh.SecretEnv, sv.TokenEnv)
	cfg.SecretEnvNames = append(cfg.SecretEnvNames, st.JiraWebhook.SecretEnv)
	// channels.slack's variables are credentials whether or not the
	// channel is on: no agent gets them.
	cfg.SecretEnvNames = append(cfg.SecretEnvNames, st.Channels.Slack.BotTokenEnv, st.Channels.Slack.AppTokenEnv, st.Channels.Slack.SigningSecretEnv)
	if err := sandbox.CheckAgentEnv(cfg.AgentEnv, cfg.SecretEnvNames); err != nil {
		return cfg, warns, fmt.Errorf("%w: %w", err, loop.ErrInvalidConfig)
	}
	return cfg, warns, nil
}

// ResolveInteractionMode trims and lower-cases v; an unknown value is
// work-item with a warning, never cli (docs/daemon.md §10).
func ResolveInteractionMode(v string) (string, string) {
	m := strings.ToLower(strings.TrimSpace(v))
	switch m {
	case InteractionWorkItem, InteractionCLI:
		return m, ""
	case "":
		return InteractionWorkItem, ""
	}
	return InteractionWorkItem, fmt.Sprintf("routing.interaction.mode: unknown value %q; using work-item (the values are work-item and cli)", v)
}

// Validate reports the first setting that cannot work, naming it and the fix.
func (c Config) Validate() error {
	switch {
	case c.StateRoot == "" || !filepath.IsAbs(c.StateRoot):
		return fmt.Errorf("daemon: the state root must be an absolute path (got %q); pass --state-root or set state.root", c.StateRoot)
	case len(c.Secret) == 0 && !c.InsecureAcceptUnsigned:
		return ErrNoSecret
	case c.WebhookPath == "" || c.WebhookPath[0] != '/':
		return fmt.Errorf("daemon: webhooks.ghWebhook.path %q must start with /", c.WebhookPath)
	case len(c.Secret) == 0 && c.InsecureAcceptUnsigned && !loopbackAddr(c.Listen):
		return fmt.Errorf("daemon: --insecure-accept-unsigned accepts forged webhooks from anyone who reaches the port, so it only listens on a loopback address, and webhooks.ghWebhook.host/port is %q: set webhooks.ghWebhook.host to 127.0.0.1 (or ::1, localhost), or export THE_LOOP_GH_WEBHOOK_SECRET and drop the flag", c.Listen)
	}
	if err := ingress.CheckSecret(c.Secret); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if c.Slack != nil && c.Slack.Mode == slackchan.ModeEvents && c.Slack.EventsPath == c.WebhookPath {
		return fmt.Errorf("daemon: channels.slack.eventsPath %q is webhooks.ghWebhook.path too; give Slack its own path (default %s)", c.Slack.EventsPath, slackchan.DefaultEventsPath)
	}
	switch c.SpawnOnUnmatched {
	case SpawnNever, SpawnAlways, SpawnLabeled:
	default:
		return fmt.Errorf("daemon: routing.spawnOnUnmatched %q is not one of never, always, labeled", c.SpawnOnUnmatched)
	}
	return nil
}

// loopbackAddr reports whether host:port listens on loopback only. An
// empty host (every interface) or a name other than localhost is not.
func loopbackAddr(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Errors callers branch on.
var (
	// ErrNoSecret: no webhook secret is configured and unsigned webhooks
	// were not explicitly accepted.
	ErrNoSecret = errors.New("no webhook secret: export THE_LOOP_GH_WEBHOOK_SECRET (or the variable webhooks.ghWebhook.secretEnv names) with the secret configured on the GitHub webhook, or pass --insecure-accept-unsigned to accept unsigned requests (never on a reachable address)")
	// ErrLocked: another loopd holds the state root.
	ErrLocked = errors.New("another loopd is running on this state root")
)

// ingressConfig maps the daemon's configuration onto the receiver's.
func (d *Daemon) ingressConfig() ingress.Config { return IngressConfig(d.cfg) }

// IngressConfig is the webhook receiver's configuration as loopd builds it
// from its own (ingress never reads the operator's file).
func IngressConfig(cfg Config) ingress.Config {
	c := ingress.DefaultConfig()
	c.Path = cfg.WebhookPath
	c.Secret = cfg.Secret
	c.InsecureAcceptUnsigned = cfg.InsecureAcceptUnsigned
	if len(cfg.Events) > 0 {
		c.Events = cfg.Events
	}
	c.Repositories = cfg.Repos
	c.AuthorizedUsers = cfg.AuthorizedUsers
	c.Authorized = cfg.Authorized
	c.SelfLogins = cfg.Integrations.SelfLogins()
	c.AutoExecuteLabel = cfg.AutoExecuteLabel
	if cfg.DedupSize > 0 {
		c.DedupSize = cfg.DedupSize
	}
	c.Control.Disabled = !cfg.ControlEnabled
	if cfg.Keywords != nil {
		kw := map[ingress.Command]string{}
		for k, v := range cfg.Keywords {
			kw[ingress.Command(k)] = v
		}
		c.Control.Keywords = kw
	}
	return c
}

// EventLogFile is EventLogPath made absolute under StateRoot ("" = none).
func (c Config) EventLogFile() string {
	if c.EventLogPath == "" || filepath.IsAbs(c.EventLogPath) {
		return c.EventLogPath
	}
	return filepath.Join(c.StateRoot, filepath.FromSlash(c.EventLogPath))
}

// secretNames are the variables this configuration points loopd and its
// integrations at for credentials: none may be handed to an agent.
func secretNames(cfg Config, secretEnv, serviceTokenEnv string) []string {
	names := []string{DefaultSecretEnv, secretEnv, serviceTokenEnv}
	names = append(names, integrations.DefaultGitHubTokenEnv...)
	ic := cfg.Integrations
	if ic.GitHub != nil {
		names = append(names, ic.GitHub.API.TokenEnv...)
		if ic.GitHub.App != nil {
			names = append(names, integrations.DefaultGitHubAppKeyEnv, ic.GitHub.App.PrivateKeyEnv)
		}
	}
	if ic.Slack != nil {
		names = append(names, ic.Slack.API.TokenEnv, ic.Slack.Webhook.URLEnv)
	}
	if ic.Jira != nil {
		names = append(names, ic.Jira.API.TokenEnv, ic.Jira.API.EmailEnv)
	}
	return names
}

// queueCredentials maps queue.* credentials and TLS into cfg, reading the
// password from its file or variable (never from the configuration file).
func queueCredentials(cfg *Config, st loop.Settings, getenv func(string) string) error {
	qs := st.Queue
	cfg.QueueAuth = queue.Auth{CredsFile: qs.CredsFile, NKeySeedFile: qs.NKeySeedFile, User: qs.User}
	cfg.QueueTLS = queue.TLS{CAFile: qs.TLSCAFile, CertFile: qs.TLSCertFile, KeyFile: qs.TLSKeyFile}
	cfg.QueueInsecure = qs.Insecure
	switch {
	case qs.PasswordFile != "" && qs.PasswordEnv != "":
		return fmt.Errorf("queue.passwordFile and queue.passwordEnv: set one: %w", loop.ErrInvalidConfig)
	case qs.PasswordFile != "":
		b, err := os.ReadFile(qs.PasswordFile)
		if err != nil {
			return fmt.Errorf("queue.passwordFile: %w", err)
		}
		cfg.QueueAuth.Password = strings.TrimRight(string(b), "\r\n")
	case qs.PasswordEnv != "":
		cfg.QueueAuth.Password = getenv(qs.PasswordEnv)
		if cfg.QueueAuth.Password == "" {
			return fmt.Errorf("queue.passwordEnv: %s is not set: %w", qs.PasswordEnv, loop.ErrInvalidConfig)
		}
	}
	if (qs.PasswordFile != "" || qs.PasswordEnv != "") && qs.User == "" {
		return fmt.Errorf("queue.passwordFile/passwordEnv: a password needs queue.user: %w", loop.ErrInvalidConfig)
	}
	qc := queue.Config{URL: cfg.QueueURL, Auth: cfg.QueueAuth, TLS: cfg.QueueTLS, Insecure: cfg.QueueInsecure}
	if err := qc.CheckRemote(); err != nil {
		return fmt.Errorf("%w: %w", err, loop.ErrInvalidConfig)
	}
	return nil
}
