package loop

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/workitem"
)

// SettingSource says where the value loopd uses for a key came from.
type SettingSource string

// Setting sources, as `loopctl config show` prints them.
const (
	// SourceFile: the operator's cli-config.yaml.
	SourceFile SettingSource = "file"
	// SourceEnv: an environment variable (THE_LOOP_STATE_ROOT).
	SourceEnv SettingSource = "env"
	// SourceDefault: the catalogue's default (ConfigKey.Default).
	SourceDefault SettingSource = "default"
	// SourceDerived: computed from other keys (eventLog.path from the state
	// root, repositories with the polling sources' repos, a relative path
	// made absolute).
	SourceDerived SettingSource = "derived"
)

// ShownSetting is one key's value as loopd uses it, and where it came from.
type ShownSetting struct {
	Key    string        `json:"key"`
	Value  any           `json:"value"`
	Source SettingSource `json:"source"`
}

// PollingSource is one polling.sources item.
type PollingSource struct {
	Provider             string   `json:"provider"`
	Label                string   `json:"label"`
	Repos                []string `json:"repos"`
	Issues, PullRequests bool     `json:"-"`
}

// Settings is the operator's cli-config.yaml read once into one typed
// structure (docs/decisions.md §20). Every catalogued key has exactly
// one reader (settingReaders), which fills one field here with the file's
// value or the catalogue's default; Resolve then applies the environment
// and derives what depends on other keys. loopd's assembly, the webhook
// receiver's and poller's configuration (built by the daemon, never by
// ingress reading the file), the dashboard and `loopctl config show` all
// take their values from a resolved Settings — so what show prints is what
// loopd uses. Sections are owned by one consumer each: Webhook, Polling
// and the routing bound by the ingress assembly; Routing, Queue, Service by
// the daemon; EventLog and Integrations by the shared library.
type Settings struct {
	// File is the file read ("" when none: defaults).
	File string

	StateRoot    string
	Repositories []string

	Webhook struct {
		Enabled         bool
		Host            string
		Port            int
		Path, SecretEnv string
		Events          []string
	}
	Polling struct {
		Enabled    bool
		Interval   time.Duration
		MaxRetries int
		Sources    []PollingSource
	}
	Routing struct {
		Enabled          bool
		DefaultHarness   string
		SpawnOnUnmatched string
		AutoExecuteLabel string
		AuthorizedUsers  []string
		// Authorized is routing.authorized (logins, team:ORG/SLUG,
		// permission:write|maintain|admin, codeowners).
		Authorized []string
		// AuthorizedCache is routing.authorizedCacheSeconds.
		AuthorizedCache         time.Duration
		SpawnWorkdir            string
		MaxConcurrentDispatches int
		DedupCacheSize          int
		DispatchTimeout         time.Duration
		PromptTemplate          string
		SpawnPromptTemplate     string
		ControlEnabled          bool
		RequireStartCommand     bool
		Keywords                map[string]string
		InteractionMode         string
		GraphEnabled            bool
		GraphSpecDir            string
		WorkspaceRoot           string
		KeepCheckoutOnClose     bool
		CloneURL                string
		Tmux                    struct {
			KeepSessionOnClose bool
			RemainOnExit       bool
			SocketPath         string
			ResumeOnRespawn    bool
			KillHarnessOnClose bool
			HarnessKillGrace   time.Duration
			ResumeProbe        time.Duration
			SessionPerPr       string
			// Liveness is routing.tmux.liveness: the watch that respawns
			// a session whose harness died.
			Liveness struct {
				Enabled     bool
				Interval    time.Duration
				MaxRespawns int
				Window      time.Duration
				Backoff     time.Duration
			}
		}
		// Sandbox is routing.sandbox's mode: "namespace" (the default, also
		// spelled "on": every session in a world of its own, bubblewrap
		// with Landlock inside), "landlock" (Landlock over a shared world,
		// degraded) or "off".
		Sandbox string
		// SandboxNetwork is routing.sandbox.network: "proxy" (the default:
		// a network namespace of its own, model APIs through loopd's egress
		// proxy) or "host" (degraded).
		SandboxNetwork string
		// SandboxAllowHosts is routing.sandbox.allowHosts: hosts (host,
		// host:port, *.suffix) every world may reach besides its harness's
		// API hosts.
		SandboxAllowHosts []string
		// AgentEnv is routing.agentEnv: further variables agent sessions
		// keep (the daemon refuses a secret's name).
		AgentEnv    []string
		HarnessArgs struct{ Claude, Cursor, Codex, Gemini []string }
		// HarnessByRepository is routing.harnessByRepository: a
		// repository's harness (owner/repo lower-cased → name).
		HarnessByRepository map[string]string
		// HarnessTrust: whether loopd writes workspace trust into the
		// user's Claude Code config, for which directories, and when it
		// pre-accepts the bypass-permissions disclaimer.
		HarnessTrust struct {
			Enabled             bool
			Scope, AcceptBypass string
		}
		// HarnessPluginsEnabled installs and enables theloop's plugin.
		HarnessPluginsEnabled bool
		Reactions             struct {
			Enabled                   bool
			Started, Completed, Error string
		}
		AnnounceEnabled bool
		// WebTerminal is routing.webTerminal.mode: off, view or reply.
		WebTerminal string
	}
	Queue struct {
		URL      string
		Replicas int
		// Credentials and TLS for an external server (queue.url): paths
		// and the name of a variable, never a secret itself.
		CredsFile, NKeySeedFile, User, PasswordFile, PasswordEnv string
		TLSCAFile, TLSCertFile, TLSKeyFile                       string
		Insecure                                                 bool
	}
	Service struct {
		Enabled              bool
		Listen, TokenEnv     string
		Node                 string
		MaxSessions          int
		LeaseTTL             time.Duration
		MCPEnabled           bool
		StreamEnabled        bool
		StreamMaxSubscribers int
		StreamKeepAlive      time.Duration
		GateStuckAfter       time.Duration
	}
	EventLog struct {
		Enabled bool
		Path    string
	}
	// Usage is usage.* and routing.budget (settings_usage.go).
	Usage UsageSettings
	// JiraWebhook is webhooks.jiraWebhook (jira.go).
	JiraWebhook JiraWebhookSettings
	// Channels is channels.*: the chat channels people reach sessions
	// through.
	Channels struct {
		Slack SlackSettings
	}
	// Integrations is the raw integrations block (nil when absent), which
	// integrations.DecodeConfig checks.
	Integrations map[string]any
	// Notifications is notifications with collaborators: which of loopd's
	// own events notify whom, and through what (notifications.go).
	Notifications DaemonNotifications
	// collaborators and notifications are the raw blocks, read together
	// once both readers ran.
	collaborators, notifications any
	Version                      string

	// Warnings are problems that do not stop loopd.
	Warnings []string

	shown map[string]ShownSetting
}

// Shown lists every catalogued key loopd has a value for, in catalogue
// order, with the value it uses and its source.
func (s *Settings) Shown() []ShownSetting {
	var out []ShownSetting
	for _, k := range configKeys {
		if v, ok := s.shown[k.Path]; ok {
			out = append(out, v)
		}
	}
	return out
}

// ShownValue is Shown's row for one key.
func (s *Settings) ShownValue(key string) (ShownSetting, bool) {
	v, ok := s.shown[key]
	return v, ok
}

func (s *Settings) record(key string, v any, src SettingSource) {
	if s.shown == nil {
		s.shown = map[string]ShownSetting{}
	}
	s.shown[key] = ShownSetting{Key: key, Value: v, Source: src}
}

// settingsReader reads one key at a time from the decoded file, falling
// back to the catalogue's default, and records what it used.
type settingsReader struct {
	keyReader
	name string
	idx  map[string]ConfigKey
	s    *Settings
	// errs are problems with their own sentinel (ErrUnsafePath).
	errs []error
}

func (r *settingsReader) def(path string) any {
	k, ok := r.idx[path]
	if !ok {
		panic("loop: setting reader for uncatalogued key " + path)
	}
	return k.Default
}

// strAny is str without the catalogue's enum check.
func (r *settingsReader) strAny(path string) string { return r.string(path, false) }

func (r *settingsReader) str(path string) string { return r.string(path, true) }

func (r *settingsReader) string(path string, enum bool) string {
	if v, ok := r.keyReader.str(path); ok {
		v = strings.TrimSpace(v)
		if k := r.idx[path]; enum && len(k.Enum) > 0 && !slices.Contains(k.Enum, v) {
			r.add(fmt.Sprintf("%s: %q is not one of %s", path, v, strings.Join(k.Enum, ", ")))
		}
		r.s.record(path, v, SourceFile)
		return v
	}
	d, _ := r.def(path).(string)
	r.s.record(path, d, SourceDefault)
	return d
}

// httpPath reads a path loopd serves HTTP on, which must start with /.
func (r *settingsReader) httpPath(path string) string {
	p := r.str(path)
	if !strings.HasPrefix(p, "/") {
		r.add(fmt.Sprintf("%s: %q must start with /", path, p))
	}
	return p
}

func (r *settingsReader) boolean(path string) bool {
	if v, ok := r.keyReader.boolean(path); ok {
		r.s.record(path, v, SourceFile)
		return v
	}
	d, _ := r.def(path).(bool)
	r.s.record(path, d, SourceDefault)
	return d
}

// number reads a number; whole demands an integer.
func (r *settingsReader) number(path string, whole bool) float64 {
	if v, ok := r.get(path); ok {
		var f float64
		isNum := true
		switch n := v.(type) {
		case int:
			f = float64(n)
		case int64:
			f = float64(n)
		case uint64:
			f = float64(min(n, 1<<53))
		case float64:
			f = n
		default:
			isNum = false
		}
		if !isNum || (whole && f != float64(int64(f))) {
			want := "a number"
			if whole {
				want = "a whole number"
			}
			r.problem(path, want, v)
		} else {
			r.s.record(path, v, SourceFile)
			return f
		}
	}
	var d float64
	switch n := r.def(path).(type) {
	case int:
		d = float64(n)
	case float64:
		d = n
	}
	r.s.record(path, r.def(path), SourceDefault)
	return d
}

func (r *settingsReader) integer(path string) int { return int(r.number(path, true)) }

func (r *settingsReader) seconds(path string) time.Duration {
	return time.Duration(r.number(path, r.idx[path].Type == "int") * float64(time.Second))
}

func (r *settingsReader) strs(path string) []string {
	if v, ok := r.keyReader.strings(path); ok {
		var out []string
		for _, e := range v {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
		r.s.record(path, out, SourceFile)
		return out
	}
	r.s.record(path, r.def(path), SourceDefault)
	return nil
}

func (r *settingsReader) free(path string) any {
	v, ok := r.get(path)
	if ok {
		r.s.record(path, v, SourceFile)
	}
	return v
}

// settingReader reads one catalogued key into Settings. A list key's
// reader reads its items' keys too; an object key needs a reader only when
// its members are open (routing.control.keywords).
type settingReader struct {
	path string
	read func(r *settingsReader, s *Settings)
}

// settingReaders is the one place each catalogued key is read (caddy-style
// registration: settingReaderIndex panics on a duplicate). The catalogue
// test walks this table and configKeys against each other.
var settingReaders = []settingReader{
	{"version", func(r *settingsReader, s *Settings) {
		if v, ok := r.get("version"); ok {
			s.Version = scalarString(v)
			s.record("version", s.Version, SourceFile)
		}
	}},
	{"state.root", func(r *settingsReader, s *Settings) {
		s.StateRoot = r.str("state.root")
		if s.StateRoot == "" {
			r.add("state.root: is empty; remove the key to use .the-loop or name a directory")
		}
	}},
	{"repositories", func(r *settingsReader, s *Settings) { s.Repositories = r.strs("repositories") }},

	{"webhooks.ghWebhook.enabled", func(r *settingsReader, s *Settings) {
		s.Webhook.Enabled = r.boolean("webhooks.ghWebhook.enabled")
		if !s.Webhook.Enabled {
			r.add("webhooks.ghWebhook.enabled: false is not supported — loopd always serves the receiver (the reconcile pass alone misses nothing but is slow); keep it private with webhooks.ghWebhook.host: 127.0.0.1, or remove the key")
		}
	}},
	{"webhooks.ghWebhook.host", func(r *settingsReader, s *Settings) { s.Webhook.Host = r.str("webhooks.ghWebhook.host") }},
	{"webhooks.ghWebhook.port", func(r *settingsReader, s *Settings) { s.Webhook.Port = r.integer("webhooks.ghWebhook.port") }},
	{"webhooks.ghWebhook.path", func(r *settingsReader, s *Settings) {
		s.Webhook.Path = r.httpPath("webhooks.ghWebhook.path")
	}},
	{"webhooks.ghWebhook.secretEnv", func(r *settingsReader, s *Settings) {
		s.Webhook.SecretEnv = r.str("webhooks.ghWebhook.secretEnv")
	}},
	{"webhooks.ghWebhook.events", func(r *settingsReader, s *Settings) { s.Webhook.Events = r.strs("webhooks.ghWebhook.events") }},
	{"webhooks.jiraWebhook.path", func(r *settingsReader, s *Settings) {
		s.JiraWebhook.Path = r.httpPath("webhooks.jiraWebhook.path")
	}},
	{"webhooks.jiraWebhook.secretEnv", func(r *settingsReader, s *Settings) {
		s.JiraWebhook.SecretEnv = r.str("webhooks.jiraWebhook.secretEnv")
	}},
	{"webhooks.jiraWebhook.secretFile", func(r *settingsReader, s *Settings) {
		s.JiraWebhook.SecretFile = r.str("webhooks.jiraWebhook.secretFile")
	}},
	{"webhooks.jiraWebhook.projects", readJiraProjects},
	{"webhooks.jiraWebhook.pollSeconds", func(r *settingsReader, s *Settings) {
		s.JiraWebhook.Poll = r.seconds("webhooks.jiraWebhook.pollSeconds")
		if s.JiraWebhook.Poll < 0 {
			r.add("webhooks.jiraWebhook.pollSeconds: must be 0 (never) or more")
		}
	}},

	{"polling.enabled", func(r *settingsReader, s *Settings) { s.Polling.Enabled = r.boolean("polling.enabled") }},
	{"polling.intervalSeconds", func(r *settingsReader, s *Settings) {
		s.Polling.Interval = r.seconds("polling.intervalSeconds")
		if s.Polling.Interval <= 0 {
			r.add("polling.intervalSeconds: must be greater than 0 (set polling.enabled: false to reconcile only at start)")
		}
	}},
	{"polling.maxRetries", func(r *settingsReader, s *Settings) {
		s.Polling.MaxRetries = r.integer("polling.maxRetries")
		if s.Polling.MaxRetries <= 0 {
			r.add("polling.maxRetries: must be greater than 0")
		}
	}},
	{"polling.sources", readPollingSources},

	{"routing.enabled", func(r *settingsReader, s *Settings) {
		s.Routing.Enabled = r.boolean("routing.enabled")
		if !s.Routing.Enabled {
			r.add("routing.enabled: false is not supported — routing is what loopd is for; to stop new sessions set routing.spawnOnUnmatched: never and routing.control.enabled: false")
		}
	}},
	{"routing.sandbox", readSandbox},
	{"routing.agentEnv", func(r *settingsReader, s *Settings) { s.Routing.AgentEnv = r.strs("routing.agentEnv") }},
	{"routing.defaultHarness", readDefaultHarness},
	{"routing.spawnOnUnmatched", func(r *settingsReader, s *Settings) { s.Routing.SpawnOnUnmatched = r.str("routing.spawnOnUnmatched") }},
	{"routing.autoExecuteLabel", func(r *settingsReader, s *Settings) { s.Routing.AutoExecuteLabel = r.str("routing.autoExecuteLabel") }},
	{"routing.authorizedUsers", func(r *settingsReader, s *Settings) {
		s.Routing.AuthorizedUsers = r.strs("routing.authorizedUsers")
		if s.Routing.AuthorizedUsers == nil {
			s.Routing.AuthorizedUsers = []string{}
		}
	}},
	{"routing.authorized", func(r *settingsReader, s *Settings) {
		// Each entry's shape is checked by the daemon's authority
		// (ingress.ParseAuthorized, which names the entry).
		s.Routing.Authorized = r.strs("routing.authorized")
		if s.Routing.Authorized == nil {
			s.Routing.Authorized = []string{}
		}
	}},
	{"routing.authorizedCacheSeconds", func(r *settingsReader, s *Settings) {
		s.Routing.AuthorizedCache = r.seconds("routing.authorizedCacheSeconds")
		if s.Routing.AuthorizedCache <= 0 {
			r.add("routing.authorizedCacheSeconds: must be greater than 0")
		}
	}},
	{"routing.spawnWorkdir", func(r *settingsReader, s *Settings) { s.Routing.SpawnWorkdir = r.str("routing.spawnWorkdir") }},
	{"routing.maxConcurrentDispatches", func(r *settingsReader, s *Settings) {
		s.Routing.MaxConcurrentDispatches = r.integer("routing.maxConcurrentDispatches")
		if s.Routing.MaxConcurrentDispatches <= 0 {
			r.add("routing.maxConcurrentDispatches: must be greater than 0")
		}
	}},
	{"routing.dedupCacheSize", func(r *settingsReader, s *Settings) {
		s.Routing.DedupCacheSize = r.integer("routing.dedupCacheSize")
		if s.Routing.DedupCacheSize <= 0 {
			r.add("routing.dedupCacheSize: must be greater than 0")
		}
	}},
	{"routing.dispatchTimeoutSeconds", func(r *settingsReader, s *Settings) {
		s.Routing.DispatchTimeout = r.seconds("routing.dispatchTimeoutSeconds")
		if s.Routing.DispatchTimeout <= 0 {
			r.add("routing.dispatchTimeoutSeconds: must be greater than 0")
		}
	}},
	{"routing.promptTemplate", func(r *settingsReader, s *Settings) { s.Routing.PromptTemplate = r.str("routing.promptTemplate") }},
	{"routing.spawnPromptTemplate", func(r *settingsReader, s *Settings) {
		s.Routing.SpawnPromptTemplate = r.str("routing.spawnPromptTemplate")
	}},
	{"routing.control.enabled", func(r *settingsReader, s *Settings) { s.Routing.ControlEnabled = r.boolean("routing.control.enabled") }},
	{"routing.control.requireStartCommand", func(r *settingsReader, s *Settings) {
		s.Routing.RequireStartCommand = r.boolean("routing.control.requireStartCommand")
	}},
	{"routing.control.keywords", readKeywords},
	{"routing.interaction.mode", func(r *settingsReader, s *Settings) {
		// Seed 004: an unknown mode is work-item with a warning (never
		// cli), so the enum is not enforced here; the daemon resolves it.
		v := r.strAny("routing.interaction.mode")
		m, w := ResolveInteractionMode(v)
		if w != "" {
			s.Warnings = append(s.Warnings, r.name+": "+w)
		}
		s.Routing.InteractionMode = m
		if src := s.shown["routing.interaction.mode"].Source; m != v {
			s.record("routing.interaction.mode", m, src)
		}
	}},
	{"routing.graph.enabled", func(r *settingsReader, s *Settings) { s.Routing.GraphEnabled = r.boolean("routing.graph.enabled") }},
	{"routing.graph.repoHooks", func(r *settingsReader, s *Settings) {
		if r.boolean("routing.graph.repoHooks") {
			r.add("routing.graph.repoHooks: true is refused — theloop never runs code from a watched repository; remove the key")
		}
	}},
	{"routing.graph.specDir", func(r *settingsReader, s *Settings) {
		dir := r.str("routing.graph.specDir")
		if dir == "" {
			return
		}
		clean, err := cleanRelativeDir(r.name+": routing.graph.specDir", dir)
		if err != nil {
			r.errs = append(r.errs, err)
			return
		}
		s.Routing.GraphSpecDir = clean
	}},
	{"routing.workspace.root", func(r *settingsReader, s *Settings) { s.Routing.WorkspaceRoot = r.str("routing.workspace.root") }},
	{"routing.workspace.cloneUrl", func(r *settingsReader, s *Settings) { s.Routing.CloneURL = r.str("routing.workspace.cloneUrl") }},
	{"routing.workspace.keepCheckoutOnClose", func(r *settingsReader, s *Settings) {
		s.Routing.KeepCheckoutOnClose = r.boolean("routing.workspace.keepCheckoutOnClose")
	}},
	{"routing.tmux.keepSessionOnClose", func(r *settingsReader, s *Settings) {
		s.Routing.Tmux.KeepSessionOnClose = r.boolean("routing.tmux.keepSessionOnClose")
	}},
	{"routing.tmux.remainOnExit", func(r *settingsReader, s *Settings) {
		s.Routing.Tmux.RemainOnExit = r.boolean("routing.tmux.remainOnExit")
	}},
	{"routing.tmux.socketPath", func(r *settingsReader, s *Settings) {
		// Under systemd's PrivateTmp the default server's socket is in a
		// /tmp only the service sees; a socket path the operator can reach
		// makes the posted attach command (tmux -S PATH attach …) work.
		sp := r.str("routing.tmux.socketPath")
		if sp != "" && !filepath.IsAbs(sp) {
			r.add(fmt.Sprintf("routing.tmux.socketPath: %q must be an absolute path (e.g. /var/lib/loopd/tmux.sock)", sp))
		}
		s.Routing.Tmux.SocketPath = sp
	}},
	{"routing.tmux.resumeOnRespawn", func(r *settingsReader, s *Settings) {
		s.Routing.Tmux.ResumeOnRespawn = r.boolean("routing.tmux.resumeOnRespawn")
	}},
	{"routing.tmux.killHarnessOnClose", func(r *settingsReader, s *Settings) {
		s.Routing.Tmux.KillHarnessOnClose = r.boolean("routing.tmux.killHarnessOnClose")
	}},
	{"routing.tmux.harnessKillGraceSeconds", func(r *settingsReader, s *Settings) {
		s.Routing.Tmux.HarnessKillGrace = r.seconds("routing.tmux.harnessKillGraceSeconds")
		if s.Routing.Tmux.HarnessKillGrace <= 0 {
			r.add(fmt.Sprintf("routing.tmux.harnessKillGraceSeconds: %v must be greater than 0", s.Routing.Tmux.HarnessKillGrace.Seconds()))
		}
	}},
	{"routing.tmux.resumeProbeSeconds", func(r *settingsReader, s *Settings) {
		s.Routing.Tmux.ResumeProbe = r.seconds("routing.tmux.resumeProbeSeconds")
		if s.Routing.Tmux.ResumeProbe <= 0 {
			r.add("routing.tmux.resumeProbeSeconds: must be greater than 0")
		}
	}},
	{"routing.tmux.liveness.enabled", func(r *settingsReader, s *Settings) {
		s.Routing.Tmux.Liveness.Enabled = r.boolean("routing.tmux.liveness.enabled")
	}},
	{"routing.tmux.liveness.intervalSeconds", func(r *settingsReader, s *Settings) {
		s.Routing.Tmux.Liveness.Interval = r.seconds("routing.tmux.liveness.intervalSeconds")
		if s.Routing.Tmux.Liveness.Interval <= 0 {
			r.add("routing.tmux.liveness.intervalSeconds: must be greater than 0 (set routing.tmux.liveness.enabled: false to turn the watch off)")
		}
	}},
	{"routing.tmux.liveness.maxRespawns", func(r *settingsReader, s *Settings) {
		s.Routing.Tmux.Liveness.MaxRespawns = r.integer("routing.tmux.liveness.maxRespawns")
		if s.Routing.Tmux.Liveness.MaxRespawns <= 0 {
			r.add("routing.tmux.liveness.maxRespawns: must be at least 1 (set routing.tmux.liveness.enabled: false to turn the watch off)")
		}
	}},
	{"routing.tmux.liveness.windowSeconds", func(r *settingsReader, s *Settings) {
		s.Routing.Tmux.Liveness.Window = r.seconds("routing.tmux.liveness.windowSeconds")
		if s.Routing.Tmux.Liveness.Window <= 0 {
			r.add("routing.tmux.liveness.windowSeconds: must be greater than 0")
		}
	}},
	{"routing.tmux.liveness.backoffSeconds", func(r *settingsReader, s *Settings) {
		s.Routing.Tmux.Liveness.Backoff = r.seconds("routing.tmux.liveness.backoffSeconds")
		if s.Routing.Tmux.Liveness.Backoff < 0 {
			r.add("routing.tmux.liveness.backoffSeconds: must not be negative")
		}
	}},
	{"routing.tmux.sessionPerPr", func(r *settingsReader, s *Settings) {
		s.Routing.Tmux.SessionPerPr = SessionPerPrCrossRepository
		v, found, _ := lookup(r.m, "routing.tmux.sessionPerPr")
		if !found {
			s.record("routing.tmux.sessionPerPr", s.Routing.Tmux.SessionPerPr, SourceDefault)
			return
		}
		mode, warning := ResolveSessionPerPr(v)
		s.Routing.Tmux.SessionPerPr = mode
		if warning != "" {
			s.Warnings = append(s.Warnings, r.name+": "+warning)
		}
		s.record("routing.tmux.sessionPerPr", mode, SourceFile)
	}},
	{"routing.harnessArgs.claude", func(r *settingsReader, s *Settings) {
		s.Routing.HarnessArgs.Claude = r.strs("routing.harnessArgs.claude")
	}},
	{"routing.harnessArgs.cursor", func(r *settingsReader, s *Settings) {
		s.Routing.HarnessArgs.Cursor = r.strs("routing.harnessArgs.cursor")
	}},
	{"routing.harnessByRepository", readHarnessByRepository},
	{"routing.harnessArgs.codex", func(r *settingsReader, s *Settings) {
		s.Routing.HarnessArgs.Codex = r.strs("routing.harnessArgs.codex")
	}},
	{"routing.harnessArgs.gemini", func(r *settingsReader, s *Settings) {
		s.Routing.HarnessArgs.Gemini = r.strs("routing.harnessArgs.gemini")
	}},
	{"routing.budget.warnAt", readBudgetWarnAt},
	{"routing.budget.item.tokens", func(r *settingsReader, s *Settings) {
		s.Usage.Budget.ItemTokens = r.budgetTokens("routing.budget.item.tokens")
	}},
	{"routing.budget.item.cost", func(r *settingsReader, s *Settings) {
		s.Usage.Budget.ItemCost = r.budgetCost("routing.budget.item.cost")
	}},
	{"routing.budget.repositoryDaily.tokens", func(r *settingsReader, s *Settings) {
		s.Usage.Budget.DayTokens = r.budgetTokens("routing.budget.repositoryDaily.tokens")
	}},
	{"routing.budget.repositoryDaily.cost", func(r *settingsReader, s *Settings) {
		s.Usage.Budget.DayCost = r.budgetCost("routing.budget.repositoryDaily.cost")
	}},
	{"usage.rates", readUsageRates},
	{"usage.pollSeconds", func(r *settingsReader, s *Settings) {
		s.Usage.Poll = r.seconds("usage.pollSeconds")
		if s.Usage.Poll <= 0 {
			r.add("usage.pollSeconds: must be greater than 0")
		}
	}},
	{"routing.harnessTrust.enabled", func(r *settingsReader, s *Settings) {
		s.Routing.HarnessTrust.Enabled = r.boolean("routing.harnessTrust.enabled")
	}},
	{"routing.harnessTrust.scope", func(r *settingsReader, s *Settings) {
		s.Routing.HarnessTrust.Scope = r.str("routing.harnessTrust.scope")
	}},
	{"routing.harnessTrust.acceptBypassPermissions", func(r *settingsReader, s *Settings) {
		s.Routing.HarnessTrust.AcceptBypass = r.str("routing.harnessTrust.acceptBypassPermissions")
	}},
	{"routing.harnessPlugins.enabled", func(r *settingsReader, s *Settings) {
		s.Routing.HarnessPluginsEnabled = r.boolean("routing.harnessPlugins.enabled")
	}},
	{"routing.reactions.enabled", func(r *settingsReader, s *Settings) {
		s.Routing.Reactions.Enabled = r.boolean("routing.reactions.enabled")
	}},
	{"routing.reactions.started", func(r *settingsReader, s *Settings) { s.Routing.Reactions.Started = r.str("routing.reactions.started") }},
	{"routing.reactions.completed", func(r *settingsReader, s *Settings) {
		s.Routing.Reactions.Completed = r.str("routing.reactions.completed")
	}},
	{"routing.reactions.error", func(r *settingsReader, s *Settings) { s.Routing.Reactions.Error = r.str("routing.reactions.error") }},
	{"routing.announce.enabled", func(r *settingsReader, s *Settings) {
		s.Routing.AnnounceEnabled = r.boolean("routing.announce.enabled")
	}},
	{"routing.webTerminal.mode", func(r *settingsReader, s *Settings) { s.Routing.WebTerminal = r.str("routing.webTerminal.mode") }},

	{"queue.url", func(r *settingsReader, s *Settings) { s.Queue.URL = r.str("queue.url") }},
	{"queue.replicas", func(r *settingsReader, s *Settings) { s.Queue.Replicas = r.integer("queue.replicas") }},
	{"queue.credsFile", func(r *settingsReader, s *Settings) { s.Queue.CredsFile = r.str("queue.credsFile") }},
	{"queue.nkeySeedFile", func(r *settingsReader, s *Settings) { s.Queue.NKeySeedFile = r.str("queue.nkeySeedFile") }},
	{"queue.user", func(r *settingsReader, s *Settings) { s.Queue.User = r.str("queue.user") }},
	{"queue.passwordFile", func(r *settingsReader, s *Settings) { s.Queue.PasswordFile = r.str("queue.passwordFile") }},
	{"queue.passwordEnv", func(r *settingsReader, s *Settings) { s.Queue.PasswordEnv = r.str("queue.passwordEnv") }},
	{"queue.tls.caFile", func(r *settingsReader, s *Settings) { s.Queue.TLSCAFile = r.str("queue.tls.caFile") }},
	{"queue.tls.certFile", func(r *settingsReader, s *Settings) { s.Queue.TLSCertFile = r.str("queue.tls.certFile") }},
	{"queue.tls.keyFile", func(r *settingsReader, s *Settings) { s.Queue.TLSKeyFile = r.str("queue.tls.keyFile") }},
	{"queue.insecure", func(r *settingsReader, s *Settings) { s.Queue.Insecure = r.boolean("queue.insecure") }},

	{"service.enabled", func(r *settingsReader, s *Settings) { s.Service.Enabled = r.boolean("service.enabled") }},
	{"service.leaseTTLSeconds", func(r *settingsReader, s *Settings) { s.Service.LeaseTTL = r.seconds("service.leaseTTLSeconds") }},
	{"service.listen", func(r *settingsReader, s *Settings) { s.Service.Listen = r.str("service.listen") }},
	{"service.maxSessions", func(r *settingsReader, s *Settings) { s.Service.MaxSessions = r.integer("service.maxSessions") }},
	{"service.tokenEnv", func(r *settingsReader, s *Settings) { s.Service.TokenEnv = r.str("service.tokenEnv") }},
	{"service.mcp.enabled", func(r *settingsReader, s *Settings) { s.Service.MCPEnabled = r.boolean("service.mcp.enabled") }},
	{"service.node", func(r *settingsReader, s *Settings) { s.Service.Node = r.str("service.node") }},
	{"service.stream.enabled", func(r *settingsReader, s *Settings) { s.Service.StreamEnabled = r.boolean("service.stream.enabled") }},
	{"service.stream.maxSubscribers", func(r *settingsReader, s *Settings) {
		s.Service.StreamMaxSubscribers = r.integer("service.stream.maxSubscribers")
	}},
	{"service.stream.keepAliveSeconds", func(r *settingsReader, s *Settings) {
		s.Service.StreamKeepAlive = r.seconds("service.stream.keepAliveSeconds")
	}},
	{"service.metrics.gateStuckAfterSeconds", func(r *settingsReader, s *Settings) {
		s.Service.GateStuckAfter = r.seconds("service.metrics.gateStuckAfterSeconds")
	}},

	{"eventLog.enabled", func(r *settingsReader, s *Settings) { s.EventLog.Enabled = r.boolean("eventLog.enabled") }},
	{"eventLog.path", func(r *settingsReader, s *Settings) { s.EventLog.Path = r.str("eventLog.path") }},

	{"channels.slack.enabled", func(r *settingsReader, s *Settings) { s.Channels.Slack.Enabled = r.boolean("channels.slack.enabled") }},
	{"channels.slack.mode", func(r *settingsReader, s *Settings) { s.Channels.Slack.Mode = r.str("channels.slack.mode") }},
	{"channels.slack.channel", func(r *settingsReader, s *Settings) { s.Channels.Slack.Channel = r.str("channels.slack.channel") }},
	{"channels.slack.botTokenEnv", func(r *settingsReader, s *Settings) {
		s.Channels.Slack.BotTokenEnv = r.str("channels.slack.botTokenEnv")
	}},
	{"channels.slack.appTokenEnv", func(r *settingsReader, s *Settings) {
		s.Channels.Slack.AppTokenEnv = r.str("channels.slack.appTokenEnv")
	}},
	{"channels.slack.signingSecretEnv", func(r *settingsReader, s *Settings) {
		s.Channels.Slack.SigningSecretEnv = r.str("channels.slack.signingSecretEnv")
	}},
	{"channels.slack.eventsPath", func(r *settingsReader, s *Settings) {
		s.Channels.Slack.EventsPath = r.httpPath("channels.slack.eventsPath")
	}},
	{"channels.slack.users", readSlackUsers},

	{"integrations", func(r *settingsReader, s *Settings) {
		if m, ok := r.mapping("integrations"); ok {
			s.Integrations = m
			s.record("integrations", m, SourceFile)
		}
	}},
	{"collaborators", func(r *settingsReader, s *Settings) { s.collaborators = r.free("collaborators") }},
	{"notifications", func(r *settingsReader, s *Settings) { s.notifications = r.free("notifications") }},
}

// Harnesses are the agent CLIs loopd can run a session in (the harness
// registry's, read when a file is).
func Harnesses() []string { return harness.Names() }

// readDefaultHarness checks routing.defaultHarness against the registry
// when the file is read (the catalogue's enum is the registry at start).
func readDefaultHarness(r *settingsReader, s *Settings) {
	const key = "routing.defaultHarness"
	v := r.strAny(key)
	if _, set := r.get(key); set && !harness.Known(v) {
		r.add(fmt.Sprintf("%s: %q is not one of %s", key, v, strings.Join(Harnesses(), ", ")))
	}
	s.Routing.DefaultHarness = v
}

func readHarnessByRepository(r *settingsReader, s *Settings) {
	const key = "routing.harnessByRepository"
	out := map[string]string{}
	s.Routing.HarnessByRepository = out
	v, ok := r.get(key)
	if !ok {
		s.record(key, map[string]string{}, SourceDefault)
		return
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		r.problem(key, "a mapping of owner/repo to a harness", v)
		return
	}
	for _, repo := range slices.Sorted(maps.Keys(m)) {
		name, _ := m[repo].(string)
		owner, rest, cut := strings.Cut(repo, "/")
		switch {
		case !cut || owner == "" || rest == "" || strings.Contains(rest, "/"):
			r.add(fmt.Sprintf("%s: %q is not owner/repo", key, repo))
		case !harness.Known(name):
			r.add(fmt.Sprintf("%s.%s: %v is not a harness (%s)", key, repo, m[repo], strings.Join(Harnesses(), ", ")))
		default:
			out[strings.ToLower(repo)] = name
		}
	}
	s.record(key, maps.Clone(out), SourceFile)
}

// JiraWebhookSettings is webhooks.jiraWebhook (docs/daemon.md §2.6).
type JiraWebhookSettings struct {
	Path, SecretEnv, SecretFile string
	// Projects maps Jira project keys to repositories (owner/repo).
	Projects map[string]string
	// Poll is pollSeconds (0: never).
	Poll time.Duration
}

// stringMap reads the mapping at key (what describes it in the problem
// reported when it is not one); false when it is absent (recorded as the
// empty default) or not a mapping.
func (r *settingsReader) stringMap(s *Settings, key, what string) (map[string]any, bool) {
	v, ok := r.get(key)
	if !ok || v == nil {
		s.record(key, map[string]string{}, SourceDefault)
		return nil, false
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		r.problem(key, what, v)
		return nil, false
	}
	return m, true
}

func readJiraProjects(r *settingsReader, s *Settings) {
	const key = "webhooks.jiraWebhook.projects"
	out := map[string]string{}
	s.JiraWebhook.Projects = out
	m, ok := r.stringMap(s, key, "a mapping of Jira project key to repository (PROJ: owner/repo)")
	if !ok {
		return
	}
	for _, project := range slices.Sorted(maps.Keys(m)) {
		repo, isStr := m[project].(string)
		if !isStr {
			r.add(fmt.Sprintf("%s.%s: %v is not a repository (owner/repo)", key, clipConfigText(project, 30), m[project]))
			continue
		}
		out[project] = strings.TrimSpace(repo)
	}
	if _, err := workitem.NewJiraProjects(out); err != nil {
		r.add(fmt.Sprintf("%s: %v", key, err))
	}
	s.record(key, maps.Clone(out), SourceFile)
}

// SlackSettings is channels.slack (docs/daemon.md §11.5).
type SlackSettings struct {
	Enabled                                    bool
	Mode, Channel                              string
	BotTokenEnv, AppTokenEnv, SigningSecretEnv string
	EventsPath                                 string
	// Users maps Slack user ids to GitHub logins.
	Users map[string]string
}

func readSlackUsers(r *settingsReader, s *Settings) {
	const key = "channels.slack.users"
	out := map[string]string{}
	s.Channels.Slack.Users = out
	m, ok := r.stringMap(s, key, "a mapping of Slack user id to GitHub login")
	if !ok {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(m)) {
		login, isStr := m[id].(string)
		login = strings.TrimSpace(login)
		switch {
		case !slackUserID(id):
			r.add(fmt.Sprintf("%s: %q is not a Slack user id (U… or W…: the member's profile → Copy member ID)", key, clipConfigText(id, 30)))
		case !isStr || login == "":
			r.add(fmt.Sprintf("%s.%s: %v is not a GitHub login", key, id, m[id]))
		default:
			out[id] = login
		}
	}
	s.record(key, maps.Clone(out), SourceFile)
}

// slackUserID reports whether s looks like a Slack member id.
func slackUserID(s string) bool {
	if len(s) < 3 || len(s) > 21 || (s[0] != 'U' && s[0] != 'W') {
		return false
	}
	for _, c := range s[1:] {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

func readKeywords(r *settingsReader, s *Settings) {
	s.Routing.Keywords = DefaultControlKeywords()
	src := SourceDefault
	if kws, ok := r.mapping("routing.control.keywords"); ok {
		for _, cmd := range slices.Sorted(maps.Keys(kws)) {
			if _, isCmd := s.Routing.Keywords[cmd]; !isCmd {
				r.add(fmt.Sprintf("routing.control.keywords.%s is not a control command (%s)", cmd, strings.Join(ControlCommands(), ", ")))
				continue
			}
			if kws[cmd] == nil {
				continue
			}
			if kw, ok := r.keyReader.str("routing.control.keywords." + cmd); ok {
				s.Routing.Keywords[cmd] = strings.TrimSpace(kw)
				src = SourceFile
			}
		}
	}
	s.record("routing.control.keywords", maps.Clone(s.Routing.Keywords), src)
}

func readPollingSources(r *settingsReader, s *Settings) {
	v, ok := r.get("polling.sources")
	if !ok {
		s.record("polling.sources", []PollingSource{}, SourceDefault)
		return
	}
	items, isList := v.([]any)
	if !isList {
		r.problem("polling.sources", "a list", v)
		return
	}
	for i, it := range items {
		key := fmt.Sprintf("polling.sources[%d]", i)
		m, isMap := it.(map[string]any)
		if !isMap {
			r.problem(key, "a mapping", it)
			continue
		}
		sub := &keyReader{m: m}
		src := PollingSource{Provider: "github", Issues: true, PullRequests: true}
		if p, ok := sub.str("provider"); ok && p != "github" {
			r.add(fmt.Sprintf("%s.provider must be github (the only polling provider), not %q", key, clipConfigText(p, 30)))
		}
		if l, ok := sub.str("label"); ok {
			src.Label = strings.TrimSpace(l)
		}
		if repos, ok := sub.strings("repos"); ok {
			for _, rp := range repos {
				if rp = strings.TrimSpace(rp); rp != "" {
					src.Repos = append(src.Repos, rp)
				}
			}
		}
		if b, ok := sub.boolean("monitor.issues"); ok {
			src.Issues = b
		}
		if b, ok := sub.boolean("monitor.pullRequests"); ok {
			src.PullRequests = b
		}
		for _, p := range sub.problems {
			r.add(key + "." + p)
		}
		s.Polling.Sources = append(s.Polling.Sources, src)
	}
	s.record("polling.sources", s.Polling.Sources, SourceFile)
}

func clipConfigText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

var settingReaderIndex = func() map[string]settingReader {
	m := make(map[string]settingReader, len(settingReaders))
	for _, r := range settingReaders {
		if r.path == "" || r.read == nil {
			panic("loop: a setting reader needs a key and a function")
		}
		if _, dup := m[r.path]; dup {
			panic("loop: two readers for the config key " + r.path)
		}
		m[r.path] = r
	}
	return m
}()

// readSettings runs every reader once over the decoded file (already
// checked against the catalogue). Problems are returned together.
func readSettings(name string, raw map[string]any) (Settings, []string, error) {
	s := Settings{File: name}
	r := &settingsReader{keyReader: keyReader{m: raw}, name: name, idx: keyIndex(), s: &s}
	for _, rd := range settingReaders {
		rd.read(r, &s)
	}
	n, warns, err := readDaemonNotifications(name, s.notifications, s.collaborators)
	if err != nil {
		r.errs = append(r.errs, err)
	}
	s.Notifications = n
	s.Warnings = append(s.Warnings, warns...)
	return s, r.problems, errors.Join(r.errs...)
}

// SettingsEnv is the environment Resolve reads: variables, the home
// directory (a relative state root is taken under it) and the working
// directory (other relative paths are resolved against it).
type SettingsEnv struct {
	Getenv  func(string) string
	HomeDir func() (string, error)
	WorkDir string
}

// Resolve returns the values loopd uses: the state root from
// THE_LOOP_STATE_ROOT or state.root (OperatorStateRoot), the event log's
// path under it unless eventLog.path is set, relative paths made absolute
// against env.WorkDir, and the repository bound widened by the polling
// sources' repos. It is the one function loopd's assembly and `loopctl
// config show` both call.
func (s Settings) Resolve(env SettingsEnv) (Settings, error) {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	if env.HomeDir == nil {
		env.HomeDir = os.UserHomeDir
	}
	out := s
	out.shown = maps.Clone(s.shown)
	out.Repositories = slices.Clone(s.Repositories)
	root, err := OperatorStateRoot(s.StateRoot, env.Getenv, env.HomeDir)
	if err != nil {
		return Settings{}, err
	}
	out.StateRoot = root
	switch {
	case env.Getenv(StateRootEnv) != "":
		out.record("state.root", root, SourceEnv)
	case root != s.StateRoot:
		out.record("state.root", root, SourceDerived)
	}
	abs := func(key string, p *string) {
		if *p == "" || filepath.IsAbs(*p) {
			return
		}
		if strings.HasPrefix(*p, "~/") {
			if h, err := env.HomeDir(); err == nil && h != "" {
				*p = filepath.Join(h, (*p)[2:])
			}
		} else {
			*p = filepath.Join(env.WorkDir, *p)
		}
		out.record(key, *p, SourceDerived)
	}
	switch p := out.EventLog.Path; {
	case s.shown["eventLog.path"].Source == SourceDefault || p == "":
		out.EventLog.Path = filepath.Join(root, "logs", "events.jsonl")
		out.record("eventLog.path", out.EventLog.Path, SourceDerived)
	case strings.HasPrefix(p, "~/") || filepath.IsAbs(p):
		abs("eventLog.path", &out.EventLog.Path)
	default:
		// A relative eventLog.path is taken under the state root, never the
		// working directory: a loopd started in a checkout must not write
		// its log into it (`loopctl events` finds it from the same root).
		out.EventLog.Path = filepath.Join(root, p)
		out.record("eventLog.path", out.EventLog.Path, SourceDerived)
	}
	abs("routing.spawnWorkdir", &out.Routing.SpawnWorkdir)
	abs("routing.workspace.root", &out.Routing.WorkspaceRoot)
	abs("routing.promptTemplate", &out.Routing.PromptTemplate)
	abs("routing.spawnPromptTemplate", &out.Routing.SpawnPromptTemplate)
	widened := false
	for _, src := range s.Polling.Sources {
		for _, r := range src.Repos {
			if !slices.ContainsFunc(out.Repositories, func(e string) bool { return strings.EqualFold(e, r) }) {
				out.Repositories = append(out.Repositories, r)
				widened = true
			}
		}
	}
	if widened {
		out.record("repositories", out.Repositories, SourceDerived)
	}
	return out, nil
}

// ResolveSettings is cfg.Settings resolved against env: the values loopd
// uses.
func ResolveSettings(cfg CLIConfig, env SettingsEnv) (Settings, error) {
	return cfg.Settings.Resolve(env)
}

// sandboxModes are routing.sandbox's modes ("on" is the namespace sandbox).
var sandboxModes = []string{"namespace", "on", "landlock", "off"}

// readSandbox reads routing.sandbox: a mode (namespace | landlock | off;
// on = namespace; a YAML 1.1 bare off = false), or a map of mode, network
// (proxy | host) and allowHosts.
func readSandbox(r *settingsReader, s *Settings) {
	s.Routing.Sandbox, s.Routing.SandboxNetwork = "namespace", "proxy"
	v, ok := r.get("routing.sandbox")
	if !ok {
		s.record("routing.sandbox", "namespace", SourceDefault)
		return
	}
	mode := func(key string, v any) {
		switch t := v.(type) {
		case bool:
			s.Routing.Sandbox = map[bool]string{true: "namespace", false: "off"}[t]
		case string:
			t = strings.TrimSpace(t)
			if !slices.Contains(sandboxModes, t) {
				r.add(fmt.Sprintf("%s: %q is not one of namespace, landlock, off", key, t))
				return
			}
			if t == "on" {
				t = "namespace"
			}
			s.Routing.Sandbox = t
		default:
			r.add(fmt.Sprintf("%s: %v is not one of namespace, landlock, off", key, v))
		}
	}
	switch t := v.(type) {
	case map[string]any:
		for k, sub := range t {
			switch k {
			case "mode":
				mode("routing.sandbox.mode", sub)
			case "network":
				n, _ := sub.(string)
				if n != "proxy" && n != "host" {
					r.add(fmt.Sprintf("routing.sandbox.network: %v is not proxy or host", sub))
					continue
				}
				s.Routing.SandboxNetwork = n
			case "allowHosts":
				list, ok := sub.([]any)
				if !ok {
					r.add("routing.sandbox.allowHosts: a list of hosts (host, host:port or *.suffix)")
					continue
				}
				for _, e := range list {
					h, ok := e.(string)
					if h = strings.TrimSpace(h); !ok || h == "" || strings.ContainsAny(h, "/ @") {
						r.add(fmt.Sprintf("routing.sandbox.allowHosts: %v is not a host, host:port or *.suffix", e))
						continue
					}
					s.Routing.SandboxAllowHosts = append(s.Routing.SandboxAllowHosts, h)
				}
			default:
				r.add(fmt.Sprintf("routing.sandbox.%s: unknown key (mode, network, allowHosts)", k))
			}
		}
	default:
		mode("routing.sandbox", v)
	}
	s.record("routing.sandbox", map[string]any{"mode": s.Routing.Sandbox, "network": s.Routing.SandboxNetwork, "allowHosts": s.Routing.SandboxAllowHosts}, SourceFile)
}
