package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
	"github.com/theloop-dev/theloop/sessions"
)

// routing.spawnOnUnmatched values.
const (
	SpawnNever   = "never"
	SpawnAlways  = "always"
	SpawnLabeled = "labeled"
)

// routing.interaction.mode values (seed 004).
const (
	InteractionWorkItem = "work-item"
	InteractionCLI      = "cli"
)

// Defaults (reference daemon-spec §12.2).
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
	// Secret is the webhook HMAC secret. Empty refuses to run unless
	// InsecureAcceptUnsigned.
	Secret []byte
	// InsecureAcceptUnsigned accepts unsigned webhooks (the only way to run
	// without a secret; ARCHITECTURE decision 10).
	InsecureAcceptUnsigned bool
	// Events is the receiver's event filter (nil: ingress's default set).
	Events []string
	// Repos bounds the repositories accepted ("owner/repo", "owner/*";
	// empty: every delivery is dropped — the receiver fails closed).
	Repos []string

	// QueueURL is an external NATS server; "" embeds one under StateRoot.
	QueueURL string
	// Parallelism bounds dispatches running at once
	// (routing.maxConcurrentDispatches).
	Parallelism int
	// MaxDeliver is the attempts per event before it is dead-lettered.
	MaxDeliver int

	// AuthorizedUsers is routing.authorizedUsers (empty denies every named
	// actor).
	AuthorizedUsers []string
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

	// DefaultHarness names the harness adapter (claude).
	DefaultHarness string
	// HarnessArgs are routing.harnessArgs.claude.
	HarnessArgs []string
	// ClaudeEnv prepares Claude Code's trust and plugin settings (nil: from
	// the environment, with the-loop's defaults; a zero ConfigDir disables).
	ClaudeEnv *sessions.ClaudeEnvironment
	// WorkspaceRoot enables one git worktree per work item
	// (routing.workspace.root); "" runs sessions in SpawnWorkdir.
	WorkspaceRoot string
	// SpawnWorkdir is the cwd of sessions when there is no workspace.
	SpawnWorkdir string
	// KeepCheckoutOnClose keeps the worktree when a session closes.
	KeepCheckoutOnClose bool
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
	// Tmux configures the tmux runner (socket, timeouts).
	Tmux sessions.TmuxConfig
	// SandboxOff is routing.sandbox: off — agents run without Landlock
	// (the environment is still allowlisted); every spawn warns and the
	// status says the gates are not defended. The zero value confines.
	SandboxOff bool
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
		ReconcileInterval:   5 * time.Minute,
		Integrations:        integrations.DefaultConfig(),
		DrainTimeout:        30 * time.Second,
	}
}

// ConfigFromCLI maps the operator's CLI config onto a Config. getenv reads
// the webhook secret from THE_LOOP_GH_WEBHOOK_SECRET or the variable
// webhooks.ghWebhook.secretEnv names — never from a file. The state root is
// loop.OperatorStateRoot's (THE_LOOP_STATE_ROOT, else state.root, a
// relative one under the home directory); other relative paths are
// resolved against workDir.
func ConfigFromCLI(c loop.CLIConfig, getenv func(string) string, workDir string) (Config, []string, error) {
	cfg := DefaultConfig()
	var warns []string
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		if strings.HasPrefix(p, "~/") {
			if h, err := os.UserHomeDir(); err == nil {
				return filepath.Join(h, p[2:])
			}
		}
		return filepath.Join(workDir, p)
	}
	root, err := loop.OperatorStateRoot(c.StateRoot, getenv, os.UserHomeDir)
	if err != nil {
		return Config{}, nil, err
	}
	cfg.StateRoot = root
	cfg.AuthorizedUsers = c.AuthorizedUsers
	if c.Keywords != nil {
		cfg.Keywords = c.Keywords
	}
	cfg.ExecuteKeyword = c.ExecuteKeyword
	cfg.SessionPerPr = c.SessionPerPr
	cfg.GraphSpecDir = c.GraphSpecDir
	if c.EventLogEnabled {
		// Under the state root (resolved by New, after --state-root), never
		// the working directory: a loopd started in a checkout must not
		// write its log into it.
		cfg.EventLogPath = loop.DaemonEventLog
		if c.EventLogPathSet {
			cfg.EventLogPath = c.EventLogPath
		}
	}
	r := rawMap(c.Raw)
	wh := r.m("webhooks").m("ghWebhook")
	host, port := wh.str("host", "127.0.0.1"), wh.int("port", 8787)
	cfg.Listen = fmt.Sprintf("%s:%d", host, port)
	cfg.WebhookPath = wh.str("path", DefaultWebhookPath)
	cfg.Events = wh.strs("events")
	secretEnv := wh.str("secretEnv", DefaultSecretEnv)
	if s := getenv(secretEnv); s != "" {
		cfg.Secret = []byte(s)
	} else if s := getenv(DefaultSecretEnv); s != "" {
		cfg.Secret = []byte(s)
	}
	cfg.QueueURL = r.m("queue").str("url", "")
	cfg.Service = serviceFromCLI(r.m("service"), getenv)
	cfg.Cluster = ClusterConfig{
		Node: r.m("service").str("node", ""), MaxSessions: r.m("service").int("maxSessions", 0),
		LeaseTTL:      time.Duration(r.m("service").int("leaseTTLSeconds", 15)) * time.Second,
		QueueReplicas: r.m("queue").int("replicas", 1),
	}
	if cfg.Cluster.Node != "" && cfg.QueueURL == "" {
		return cfg, warns, fmt.Errorf("service.node %q shares the work with other loopd, which needs queue.url naming their NATS cluster: %w", cfg.Cluster.Node, loop.ErrInvalidConfig)
	}

	rt := r.m("routing")
	cfg.SpawnOnUnmatched = rt.str("spawnOnUnmatched", SpawnNever)
	switch cfg.SpawnOnUnmatched {
	case SpawnNever, SpawnAlways, SpawnLabeled:
	default:
		return cfg, warns, fmt.Errorf("routing.spawnOnUnmatched: %q is not one of never, always, labeled: %w", cfg.SpawnOnUnmatched, loop.ErrInvalidConfig)
	}
	cfg.AutoExecuteLabel = rt.str("autoExecuteLabel", DefaultAutoExecuteLabel)
	ctl := rt.m("control")
	cfg.ControlEnabled = ctl.bool("enabled", true)
	cfg.RequireStartCommand = ctl.bool("requireStartCommand", true)
	cfg.Parallelism = rt.int("maxConcurrentDispatches", DefaultParallelism)
	cfg.DefaultHarness = rt.str("defaultHarness", "claude")
	cfg.HarnessArgs = rt.m("harnessArgs").strs("claude")
	cfg.SpawnWorkdir = abs(rt.str("spawnWorkdir", "."))
	ws := rt.m("workspace")
	cfg.WorkspaceRoot = abs(ws.str("root", ""))
	cfg.KeepCheckoutOnClose = ws.bool("keepCheckoutOnClose", false)
	tm := rt.m("tmux")
	cfg.KeepSessionOnClose = tm.bool("keepSessionOnClose", true)
	cfg.KillHarnessOnClose = tm.bool("killHarnessOnClose", true)
	if g := tm.float("harnessKillGraceSeconds", 5); g > 0 {
		cfg.HarnessKillGrace = time.Duration(g * float64(time.Second))
	} else {
		return cfg, warns, fmt.Errorf("routing.tmux.harnessKillGraceSeconds: %v must be greater than 0: %w", g, loop.ErrInvalidConfig)
	}
	cfg.ResumeOnRespawn = tm.bool("resumeOnRespawn", true)
	switch v := rt["sandbox"].(type) {
	case nil:
	case bool: // YAML 1.1 readers turn a bare off into false
		cfg.SandboxOff = !v
	case string:
		switch v {
		case "on":
		case "off":
			cfg.SandboxOff = true
		default:
			return cfg, warns, fmt.Errorf("routing.sandbox: %q is not on or off: %w", v, loop.ErrInvalidConfig)
		}
	default:
		return cfg, warns, fmt.Errorf("routing.sandbox: %v is not on or off: %w", v, loop.ErrInvalidConfig)
	}
	cfg.AgentEnv = rt.strs("agentEnv")
	cfg.Tmux.RemainOnExit = tm.bool("remainOnExit", true)
	// Under systemd's PrivateTmp the default server's socket is in a /tmp
	// only the service sees; a socket path the operator can reach makes the
	// posted attach command (tmux -S PATH attach …) work from outside.
	if sp := tm.str("socketPath", ""); sp != "" {
		if !filepath.IsAbs(sp) {
			return cfg, warns, fmt.Errorf("routing.tmux.socketPath: %q must be an absolute path (e.g. /var/lib/loopd/tmux.sock): %w", sp, loop.ErrInvalidConfig)
		}
		cfg.Tmux.SocketPath = sp
	}
	mode, w := ResolveInteractionMode(rt.m("interaction").str("mode", InteractionWorkItem))
	cfg.InteractionMode = mode
	if w != "" {
		warns = append(warns, w)
	}
	cfg.GraphEnabled = rt.m("graph").bool("enabled", true)
	re := rt.m("reactions")
	cfg.Reactions = Reactions{Enabled: re.bool("enabled", true), Started: re.str("started", "eyes"), Completed: re.str("completed", "hooray"), Error: re.str("error", "confused")}
	cfg.AnnounceEnabled = rt.m("announce").bool("enabled", true)
	for _, t := range []struct {
		key string
		dst *string
	}{{"promptTemplate", &cfg.PromptTemplate}, {"spawnPromptTemplate", &cfg.SpawnPromptTemplate}} {
		p := rt.str(t.key, "")
		if p == "" {
			continue
		}
		b, err := os.ReadFile(abs(p))
		if err != nil {
			// The reference falls back to the built-in template.
			warns = append(warns, fmt.Sprintf("routing.%s: %v; using the built-in template", t.key, err))
			continue
		}
		*t.dst = string(b)
	}
	if pi := r.m("polling").int("intervalSeconds", 300); pi > 0 {
		cfg.ReconcileInterval = time.Duration(pi) * time.Second
	}
	// The receiver's and the poller's view of the same file (the repository
	// bound, events, keywords, polling sources) is package ingress's.
	ic, pc, err := ingress.ConfigFromCLI(c, func(k string) (string, bool) { v := getenv(k); return v, v != "" }, false)
	if err != nil {
		return cfg, warns, err
	}
	cfg.Repos = ic.Repositories
	if len(ic.Events) > 0 {
		cfg.Events = ic.Events
	}
	cfg.AutoExecuteLabel = ic.AutoExecuteLabel
	cfg.Poll = pc
	cfg.Poll.StateRoot = cfg.StateRoot
	if c.Integrations != nil {
		ic, err := integrations.DecodeConfig(c.Integrations)
		if err != nil {
			return cfg, warns, err
		}
		cfg.Integrations = ic
	}
	cfg.SecretEnvNames = secretNames(cfg, secretEnv, r.m("service").str("tokenEnv", api.DefaultTokenEnv))
	if err := sandbox.CheckAgentEnv(cfg.AgentEnv, cfg.SecretEnvNames); err != nil {
		return cfg, warns, fmt.Errorf("%w: %w", err, loop.ErrInvalidConfig)
	}
	return cfg, warns, nil
}

// ResolveInteractionMode trims and lower-cases v; an unknown value is
// work-item with a warning, never cli (seed 004).
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
	}
	switch c.SpawnOnUnmatched {
	case SpawnNever, SpawnAlways, SpawnLabeled:
	default:
		return fmt.Errorf("daemon: routing.spawnOnUnmatched %q is not one of never, always, labeled", c.SpawnOnUnmatched)
	}
	return nil
}

// Errors callers branch on.
var (
	// ErrNoSecret: no webhook secret is configured and unsigned webhooks
	// were not explicitly accepted.
	ErrNoSecret = errors.New("no webhook secret: export THE_LOOP_GH_WEBHOOK_SECRET (or the variable webhooks.ghWebhook.secretEnv names) with the secret configured on the GitHub webhook, or pass --insecure-accept-unsigned to accept unsigned requests (never on a reachable address)")
	// ErrLocked: another loopd holds the state root.
	ErrLocked = errors.New("another loopd is running on this state root")
)

// rawMap reads a decoded YAML mapping with defaults.
type rawMap map[string]any

func (r rawMap) m(k string) rawMap {
	if v, ok := r[k].(map[string]any); ok {
		return v
	}
	return nil
}

func (r rawMap) str(k, def string) string {
	if v, ok := r[k].(string); ok {
		return v
	}
	return def
}

func (r rawMap) bool(k string, def bool) bool {
	if v, ok := r[k].(bool); ok {
		return v
	}
	return def
}

func (r rawMap) int(k string, def int) int {
	switch v := r[k].(type) {
	case int:
		return v
	case int64:
		return int(v)
	case uint64:
		return int(v)
	case float64:
		return int(v)
	}
	return def
}

func (r rawMap) float(k string, def float64) float64 {
	switch v := r[k].(type) {
	case float64:
		return v
	case int, int64, uint64:
		return float64(r.int(k, 0))
	}
	return def
}

func (r rawMap) strs(k string) []string {
	l, ok := r[k].([]any)
	if !ok {
		return nil
	}
	var out []string
	for _, v := range l {
		if s, ok := v.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// ingressConfig maps the daemon's configuration onto the receiver's.
func (d *Daemon) ingressConfig() ingress.Config {
	c := ingress.DefaultConfig()
	c.Path = d.cfg.WebhookPath
	c.Secret = d.cfg.Secret
	c.InsecureAcceptUnsigned = d.cfg.InsecureAcceptUnsigned
	if len(d.cfg.Events) > 0 {
		c.Events = d.cfg.Events
	}
	c.Repositories = d.cfg.Repos
	c.AuthorizedUsers = d.cfg.AuthorizedUsers
	c.AutoExecuteLabel = d.cfg.AutoExecuteLabel
	c.Control.Disabled = !d.cfg.ControlEnabled
	if d.cfg.Keywords != nil {
		kw := map[ingress.Command]string{}
		for k, v := range d.cfg.Keywords {
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
	}
	if ic.Slack != nil {
		names = append(names, ic.Slack.API.TokenEnv, ic.Slack.Webhook.URLEnv)
	}
	if ic.Jira != nil {
		names = append(names, ic.Jira.API.TokenEnv, ic.Jira.API.EmailEnv)
	}
	return names
}
