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
	InteractionWorkItem = loop.InteractionWorkItem
	InteractionCLI      = loop.InteractionCLI
)

// The receiver's address when webhooks.ghWebhook.host and port are both
// unset (an embedder's zero Config).
const (
	defaultListenHost = "127.0.0.1"
	defaultListenPort = 8787
)

// Defaults (docs/daemon.md §12.2).
const (
	DefaultListen           = "127.0.0.1:8787" // defaultListenHost:defaultListenPort
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

// Config is loopd's configuration: the operator's settings as they were
// read (loop.Settings, embedded: each key's value is held here once, not
// copied into a field of its own) and what is not a key of the file — the
// secrets read from the environment, what an embedder or a test sets, and
// the parts' configurations assembled from the settings in one place
// (ConfigFromSettings). Start from DefaultConfig (or ConfigFromCLI) and set
// StateRoot.
type Config struct {
	// Settings are the keys' values (StateRoot, Repositories, Webhook,
	// Routing, Queue, Service, EventLog, Notifications, …). StateRoot is
	// absolute by the time New runs: queue store, session registry,
	// control records, event log, lock. Derived values are methods
	// (Listen, SandboxOff, ExecuteKeyword, …).
	loop.Settings

	// Secret is the webhook HMAC secret (read from the variable
	// webhooks.ghWebhook.secretEnv names). Empty refuses to run unless
	// InsecureAcceptUnsigned.
	Secret []byte
	// InsecureAcceptUnsigned accepts unsigned webhooks (the only way to run
	// without a secret; docs/decisions.md §10). Not a key: a flag.
	InsecureAcceptUnsigned bool

	// QueueAuth reaches queue.url: queue.credsFile, nkeySeedFile and user,
	// with the password read from queue.passwordFile or queue.passwordEnv.
	QueueAuth queue.Auth
	// MaxDeliver is the attempts per event before it is dead-lettered.
	MaxDeliver int

	// ClaudeEnv prepares Claude Code's trust and plugin settings (nil: from
	// the environment, with the-loop's defaults; a zero ConfigDir disables).
	ClaudeEnv *sessions.ClaudeEnvironment
	// GeminiTrustedFolders is the Gemini CLI's trusted-folders file in
	// which each Gemini session's checkout is marked trusted before the CLI
	// starts, so that a project-scope gate loads ("": the user's, when
	// ClaudeEnv is nil and routing.harnessTrust is on; else none). Not a key.
	GeminiTrustedFolders string
	// Liveness is the watch that respawns a session whose harness died
	// (routing.tmux.liveness with the escalation label and the bound on
	// respawns in flight; liveness.go; docs/daemon.md §6.8).
	Liveness LivenessConfig
	// Usage is usage.* and routing.budget as the watch uses them
	// (usagewatch.go; docs/usage.md).
	Usage UsageConfig
	// Tmux configures the tmux runner (socket, timeouts;
	// routing.tmux.remainOnExit and socketPath).
	Tmux sessions.TmuxConfig
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

	// PromptTemplate and SpawnPromptTemplate are the texts of the files
	// routing.promptTemplate and routing.spawnPromptTemplate name ("" =
	// the built-in ones).
	PromptTemplate, SpawnPromptTemplate string

	// ReconcileInterval is how often the reconcile pass runs (0: only at
	// start; negative: never): polling.intervalSeconds, or 0 when
	// polling.enabled is false.
	ReconcileInterval time.Duration

	// Integrations configures outbound GitHub/Slack/Jira (used when
	// Deps.Integrations is nil): the integrations block decoded and checked
	// (the raw block is Settings.Integrations).
	Integrations integrations.Config
	// DrainTimeout bounds the wait for running dispatches at shutdown.
	DrainTimeout time.Duration
	// Dashboard configures the web dashboard (zero: none).
	Dashboard DashboardConfig

	// Slack is channels.slack: the Slack channel (slack.go; nil: off). Its
	// secrets are read from the environment by ConfigFromSettings.
	Slack *slackchan.Config

	// Jira is webhooks.jiraWebhook: the Jira webhook endpoint and poll
	// (jira.go; nil: off). Its secret is read from a file or the
	// environment by ConfigFromSettings.
	Jira *JiraIntake

	// Service is the control plane (service.* with the token read from the
	// variable service.tokenEnv names; service.go). Settings.Service holds
	// the keys as read.
	Service ServiceConfig
}

// PollerConfig configures the ingress poller whose reconcile pass loopd
// runs (polling.*: label discovery and new comments for the sources'
// repositories; closure of every live session's work item in any case).
func (c Config) PollerConfig() ingress.PollerConfig {
	pc := ingress.PollerConfig{StateRoot: c.StateRoot, Interval: c.Polling.Interval, MaxRetries: c.Polling.MaxRetries}
	for _, src := range c.Polling.Sources {
		pc.Sources = append(pc.Sources, ingress.PollSource{Repos: src.Repos, Label: src.Label, SkipIssues: !src.Issues, SkipPullRequests: !src.PullRequests})
	}
	return pc
}

// Cluster shares the work items among several loopd (service.node,
// service.maxSessions, service.leaseTTLSeconds, queue.replicas;
// cluster.go).
func (c Config) Cluster() ClusterConfig {
	sv := c.Settings.Service
	return ClusterConfig{Node: sv.Node, MaxSessions: sv.MaxSessions, LeaseTTL: sv.LeaseTTL, QueueReplicas: c.Queue.Replicas}
}

// Listen is the webhook receiver's host:port
// (webhooks.ghWebhook.host/port; port 0 picks one, see Daemon.Addr).
func (c Config) Listen() string { return fmt.Sprintf("%s:%d", c.Webhook.Host, c.Webhook.Port) }

// SandboxOff is routing.sandbox: off — agents run without Landlock (the
// environment is still allowlisted); every spawn warns and the status says
// the gates are not defended.
func (c Config) SandboxOff() bool { return c.Routing.Sandbox == "off" }

// SandboxLandlock is routing.sandbox: landlock — agents run under Landlock
// over loopd's own world, without the namespace sandbox (degraded: said on
// every spawn, in status and on the dashboard). The default builds a world
// per session (docs/decisions.md §22).
func (c Config) SandboxLandlock() bool { return c.Routing.Sandbox == "landlock" }

// SandboxHostNetwork is routing.sandbox.network: host (degraded).
func (c Config) SandboxHostNetwork() bool { return c.Routing.SandboxNetwork == "host" }

// ExecuteKeyword is routing.control.keywords.execute.
func (c Config) ExecuteKeyword() string { return c.Routing.Keywords["execute"] }

// QueueTLS is queue.tlsCaFile, tlsCertFile and tlsKeyFile.
func (c Config) QueueTLS() queue.TLS {
	q := c.Queue
	return queue.TLS{CAFile: q.TLSCAFile, CertFile: q.TLSCertFile, KeyFile: q.TLSKeyFile}
}

// WebhookHookID is integrations.github.webhook.hookId: the GitHub webhook
// whose failed deliveries the reconcile pass has redelivered (0: the served
// repositories' hooks whose URL path is webhooks.ghWebhook.path;
// redeliver.go).
func (c Config) WebhookHookID() int64 {
	if c.Integrations.GitHub == nil {
		return 0
	}
	return c.Integrations.GitHub.Webhook.HookID
}

// DefaultConfig returns the reference defaults: the catalogue's
// (loop.DefaultCLIConfig), except where a library caller's zero has always
// meant the part's own default (no dispatch timeout, the dedup cache's and
// resume probe's own sizes, no notifications, no event log); StateRoot is
// left empty.
func DefaultConfig() Config {
	st := loop.DefaultCLIConfig().Settings
	st.StateRoot = ""
	st.EventLog.Path = ""
	st.Routing.AuthorizedUsers, st.Routing.Authorized, st.Routing.HarnessByRepository = nil, nil, nil
	st.Routing.AuthorizedCache, st.Routing.DispatchTimeout, st.Routing.DedupCacheSize, st.Routing.Tmux.ResumeProbe = 0, 0, 0, 0
	st.Notifications = loop.DaemonNotifications{}
	st.Service.LeaseTTL, st.Queue.Replicas = 0, 0     // the lease's and the queue's own
	st.Polling.Interval, st.Polling.MaxRetries = 0, 0 // the poller's own
	return Config{
		Settings:          st,
		MaxDeliver:        DefaultMaxDeliver,
		Liveness:          DefaultLivenessConfig(),
		Usage:             UsageConfig{Poll: DefaultUsagePoll, Budget: loop.BudgetSettings{WarnAt: 0.8}},
		Tmux:              sessions.DefaultTmuxConfig(),
		ReconcileInterval: 5 * time.Minute,
		Integrations:      integrations.DefaultConfig(),
		DrainTimeout:      30 * time.Second,
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

// ConfigFromSettings holds resolved settings in loopd's Config and
// assembles, once, what is not a key's value as read: the secrets, the
// template texts, the parts' configurations. It adds no default of its own:
// every value comes from st (so `config show`, which prints st, shows what
// loopd uses). getenv reads the webhook secret from the variable
// webhooks.ghWebhook.secretEnv names (falling back to
// THE_LOOP_GH_WEBHOOK_SECRET) and the service token — never from a file.
func ConfigFromSettings(st loop.Settings, getenv func(string) string) (Config, []string, error) {
	cfg := DefaultConfig()
	cfg.Settings = st
	if !st.EventLog.Enabled {
		cfg.EventLog.Path = "" // eventLog.enabled: false: none
	}
	var warns []string // st.Warnings reach the operator with the CLI config's
	if s := getenv(st.Webhook.SecretEnv); s != "" {
		cfg.Secret = []byte(s)
	} else if s := getenv(DefaultSecretEnv); s != "" {
		cfg.Secret = []byte(s)
	}
	if err := queueCredentials(&cfg, st, getenv); err != nil {
		return cfg, warns, err
	}
	sv := st.Service
	cfg.Service = ServiceConfig{
		Disabled: !sv.Enabled, MCPDisabled: !sv.MCPEnabled, Listen: sv.Listen, Token: getenv(sv.TokenEnv),
		StreamDisabled: !sv.StreamEnabled, StreamMaxSubscribers: sv.StreamMaxSubscribers, StreamKeepAlive: sv.StreamKeepAlive,
		GateStuckAfter: sv.GateStuckAfter,
	}
	if sv.Node != "" && st.Queue.URL == "" {
		return cfg, warns, fmt.Errorf("service.node %q shares the work with other loopd, which needs queue.url naming their NATS cluster: %w", sv.Node, loop.ErrInvalidConfig)
	}
	tm := st.Routing.Tmux
	cfg.Liveness = LivenessConfig{Off: !tm.Liveness.Enabled, Interval: tm.Liveness.Interval, MaxRespawns: tm.Liveness.MaxRespawns,
		Window: tm.Liveness.Window, Backoff: tm.Liveness.Backoff, Label: DefaultLivenessConfig().Label,
		MaxInFlight: sv.MaxSessions} // liveness.go: respawns in flight bounded by the node's capacity
	cfg.Usage = usageConfigFromSettings(st.Usage)
	cfg.Tmux.RemainOnExit = tm.RemainOnExit
	cfg.Tmux.SocketPath = tm.SocketPath
	warns = append(warns, cfg.readTemplates()...)
	// polling.enabled: false keeps the pass at start, which catches what
	// was missed while loopd was down (GitHub does not redeliver).
	cfg.ReconcileInterval = st.Polling.Interval
	if !st.Polling.Enabled {
		cfg.ReconcileInterval = 0
	}
	if st.Integrations != nil {
		ic, err := integrations.DecodeConfig(st.Integrations)
		if err != nil {
			return cfg, warns, err
		}
		cfg.Integrations = ic
	}
	sc, err := slackConfig(st.Channels.Slack, st.StateRoot, getenv)
	if err != nil {
		return cfg, warns, err
	}
	cfg.Slack = sc
	if cfg.Jira, err = jiraIntake(st.JiraWebhook, getenv); err != nil { // jira.go
		return cfg, warns, err
	}
	cfg.SecretEnvNames = secretNames(cfg, st.Webhook.SecretEnv, sv.TokenEnv)
	cfg.SecretEnvNames = append(cfg.SecretEnvNames, st.JiraWebhook.SecretEnv)
	// channels.slack's variables are credentials whether or not the
	// channel is on: no agent gets them.
	cfg.SecretEnvNames = append(cfg.SecretEnvNames, st.Channels.Slack.BotTokenEnv, st.Channels.Slack.AppTokenEnv, st.Channels.Slack.SigningSecretEnv)
	if err := sandbox.CheckAgentEnv(cfg.Routing.AgentEnv, cfg.SecretEnvNames); err != nil {
		return cfg, warns, fmt.Errorf("%w: %w", err, loop.ErrInvalidConfig)
	}
	return cfg, warns, nil
}

// readTemplates reads the texts of routing.promptTemplate and
// routing.spawnPromptTemplate; one that cannot be read is the built-in
// template, with a warning (as the reference does).
func (c *Config) readTemplates() (warns []string) {
	for _, t := range []struct {
		key, path string
		dst       *string
	}{{"promptTemplate", c.Routing.PromptTemplate, &c.PromptTemplate}, {"spawnPromptTemplate", c.Routing.SpawnPromptTemplate, &c.SpawnPromptTemplate}} {
		if t.path == "" {
			continue
		}
		b, err := os.ReadFile(t.path)
		if err != nil {
			warns = append(warns, fmt.Sprintf("routing.%s: %v; using the built-in template", t.key, err))
			continue
		}
		*t.dst = string(b)
	}
	return warns
}

// Validate reports the first setting that cannot work, naming it and the fix.
func (c Config) Validate() error {
	switch {
	case c.StateRoot == "" || !filepath.IsAbs(c.StateRoot):
		return fmt.Errorf("daemon: the state root must be an absolute path (got %q); pass --state-root or set state.root", c.StateRoot)
	case len(c.Secret) == 0 && !c.InsecureAcceptUnsigned:
		return ErrNoSecret
	case len(c.Secret) == 0 && c.InsecureAcceptUnsigned && !loopbackAddr(c.Listen()):
		return fmt.Errorf("daemon: --insecure-accept-unsigned accepts forged webhooks from anyone who reaches the port, so it only listens on a loopback address, and webhooks.ghWebhook.host/port is %q: set webhooks.ghWebhook.host to 127.0.0.1 (or ::1, localhost), or export THE_LOOP_GH_WEBHOOK_SECRET and drop the flag", c.Listen())
	}
	if err := ingress.CheckSecret(c.Secret); err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if c.Slack != nil && c.Slack.Mode == slackchan.ModeEvents && c.Slack.EventsPath == c.Webhook.Path {
		return fmt.Errorf("daemon: channels.slack.eventsPath %q is webhooks.ghWebhook.path too; give Slack its own path (default %s)", c.Slack.EventsPath, slackchan.DefaultEventsPath)
	}
	switch c.Routing.SpawnOnUnmatched {
	case SpawnNever, SpawnAlways, SpawnLabeled:
	default:
		return fmt.Errorf("daemon: routing.spawnOnUnmatched %q is not one of never, always, labeled", c.Routing.SpawnOnUnmatched)
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

// IngressConfig is the webhook receiver's configuration as loopd builds it
// from its own (ingress never reads the operator's file).
func IngressConfig(cfg Config) ingress.Config {
	c := ingress.DefaultConfig()
	c.Path = cfg.Webhook.Path
	c.Secret = cfg.Secret
	c.InsecureAcceptUnsigned = cfg.InsecureAcceptUnsigned
	if len(cfg.Webhook.Events) > 0 {
		c.Events = cfg.Webhook.Events
	}
	c.Repositories = cfg.Repositories
	c.AuthorizedUsers = cfg.Routing.AuthorizedUsers
	c.Authorized = cfg.Routing.Authorized
	c.SelfLogins = cfg.Integrations.SelfLogins()
	c.AutoExecuteLabel = cfg.Routing.AutoExecuteLabel
	if cfg.Routing.DedupCacheSize > 0 {
		c.DedupSize = cfg.Routing.DedupCacheSize
	}
	c.Control.Disabled = !cfg.Routing.ControlEnabled
	if cfg.Routing.Keywords != nil {
		kw := map[ingress.Command]string{}
		for k, v := range cfg.Routing.Keywords {
			kw[ingress.Command(k)] = v
		}
		c.Control.Keywords = kw
	}
	return c
}

// EventLogFile is EventLogPath made absolute under StateRoot ("" = none).
func (c Config) EventLogFile() string {
	if c.EventLog.Path == "" || filepath.IsAbs(c.EventLog.Path) {
		return c.EventLog.Path
	}
	return filepath.Join(c.StateRoot, filepath.FromSlash(c.EventLog.Path))
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

// queueCredentials maps queue.* credentials into cfg.QueueAuth, reading the
// password from its file or variable (never from the configuration file).
func queueCredentials(cfg *Config, st loop.Settings, getenv func(string) string) error {
	qs := st.Queue
	cfg.QueueAuth = queue.Auth{CredsFile: qs.CredsFile, NKeySeedFile: qs.NKeySeedFile, User: qs.User}
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
	qc := queue.Config{URL: cfg.Queue.URL, Auth: cfg.QueueAuth, TLS: cfg.QueueTLS(), Insecure: cfg.Queue.Insecure}
	if err := qc.CheckRemote(); err != nil {
		return fmt.Errorf("%w: %w", err, loop.ErrInvalidConfig)
	}
	return nil
}
