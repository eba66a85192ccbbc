package loop

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/theloop-dev/theloop/harness"
)

// ConfigKey is one key of the operator's CLI config (docs/daemon.md
// §12.2 plus theloop's own): the catalogue every check, the JSON Schema,
// `loopctl config show` and the reload policy are derived from.
type ConfigKey struct {
	// Path is dotted; a list of objects has its item keys under "path[]".
	Path string
	// Type is string, bool, int, number, strings (a list of strings),
	// object (a mapping of the keys under it), list (a list of objects
	// with item keys under Path+"[]"), or free (a mapping or list checked
	// by its own decoder, or carried without checks).
	Type string
	// Default is the value used when the key is absent (nil: none).
	Default any
	// Enum lists the allowed values of a string key.
	Enum []string
	// Doc says what the key does.
	Doc string
	// Reload marks soft policy a running loopd re-reads on SIGHUP.
	Reload bool
}

// configKeys is the catalogue. Keep it sorted by path within each block.
var configKeys = []ConfigKey{
	{Path: "version", Type: "string", Doc: "the config schema version (loopctl config migrate stamps " + CurrentCLIConfigVersion + ")"},
	{Path: "state", Type: "object", Doc: "where theloop keeps its state"},
	{Path: "state.root", Type: "string", Default: DefaultStateRoot, Doc: "root of the daemon's state (queue, sessions, control socket, signing key); a relative path is taken under your home directory (THE_LOOP_STATE_ROOT overrides it)"},
	{Path: "repositories", Type: "strings", Doc: "repositories loopd serves (owner/repo, owner/*), with the polling sources' repos; an event from any other is dropped (repository-not-bound)", Reload: true},

	{Path: "webhooks", Type: "object"},
	{Path: "webhooks.ghWebhook", Type: "object", Doc: "the GitHub webhook receiver"},
	{Path: "webhooks.ghWebhook.enabled", Type: "bool", Default: true, Doc: "loopd always serves the receiver (false is refused); bind host to 127.0.0.1 to keep it private"},
	{Path: "webhooks.ghWebhook.host", Type: "string", Default: "127.0.0.1", Doc: "bind address"},
	{Path: "webhooks.ghWebhook.port", Type: "int", Default: 8787, Doc: "bind port (0 picks one)"},
	{Path: "webhooks.ghWebhook.path", Type: "string", Default: "/gh-webhook", Doc: "POST path"},
	{Path: "webhooks.ghWebhook.secretEnv", Type: "string", Default: "THE_LOOP_GH_WEBHOOK_SECRET", Doc: "environment variable holding the HMAC secret"},
	{Path: "webhooks.ghWebhook.events", Type: "strings", Doc: "event filter (default: the reference's set)", Reload: true},
	{Path: "webhooks.jiraWebhook", Type: "object", Doc: "the Jira webhook endpoint (on the GitHub receiver's listener) and the poll of the served Jira projects; on when projects names one"},
	{Path: "webhooks.jiraWebhook.path", Type: "string", Default: "/jira-webhook", Doc: "POST path of Jira Cloud's admin webhook (comment created/updated events)"},
	{Path: "webhooks.jiraWebhook.secretEnv", Type: "string", Default: "THE_LOOP_JIRA_WEBHOOK_SECRET", Doc: "environment variable holding the webhook's secret (Jira signs X-Hub-Signature with it)"},
	{Path: "webhooks.jiraWebhook.secretFile", Type: "string", Default: "", Doc: "a file holding the webhook's secret, read instead of secretEnv"},
	{Path: "webhooks.jiraWebhook.projects", Type: "free", Doc: "Jira project key → the repository (owner/repo) its work items' sessions work in; one project per repository"},
	{Path: "webhooks.jiraWebhook.pollSeconds", Type: "int", Default: 60, Doc: "how often the served projects are searched for comments the webhook missed (0: never)"},

	{Path: "polling", Type: "object", Doc: "the poller / reconcile pass"},
	{Path: "polling.enabled", Type: "bool", Default: true, Doc: "run the reconcile pass every intervalSeconds (false: only once, at start)"},
	{Path: "polling.intervalSeconds", Type: "int", Default: 300, Doc: "interval of the reconcile pass (label discovery, new comments, closed items)"},
	{Path: "polling.maxRetries", Type: "int", Default: 3, Doc: "hand-off attempts of one discovered item before the poller stops offering it"},
	{Path: "polling.sources", Type: "list", Doc: "what to poll", Reload: true},
	{Path: "polling.sources[].provider", Type: "string", Default: "github", Enum: []string{"github"}},
	{Path: "polling.sources[].label", Type: "string", Default: ""},
	{Path: "polling.sources[].repos", Type: "strings"},
	{Path: "polling.sources[].monitor", Type: "object"},
	{Path: "polling.sources[].monitor.issues", Type: "bool", Default: true},
	{Path: "polling.sources[].monitor.pullRequests", Type: "bool", Default: true},

	{Path: "routing", Type: "object", Doc: "what the daemon does with routed events"},
	{Path: "routing.enabled", Type: "bool", Default: true, Doc: "loopd always routes (false is refused)"},
	{Path: "routing.sandbox", Type: "free", Default: "namespace", Doc: "namespace (default; also on): every agent session in a world of its own — a bubblewrap sandbox with its own clone, tmux server and network, Landlock inside; landlock: Landlock over the shared world (degraded); off: unconfined (gates not defended). Or a map: mode, network (proxy: model APIs through loopd's egress proxy, the default; host: the host's network, degraded), allowHosts (further hosts every session may reach)"},
	{Path: "routing.agentEnv", Type: "strings", Default: []any{}, Doc: "names of further environment variables an agent session keeps (secrets loopd or an integration reads are refused)"},
	{Path: "routing.defaultHarness", Type: "string", Default: harness.Default().Name, Enum: harness.Names(), Doc: "the agent CLI a session runs (" + harnessPrograms() + "); a label \"the-loop: harness-<name>\" on the work item picks another"},
	{Path: "routing.spawnOnUnmatched", Type: "string", Default: "never", Enum: []string{"never", "always", "labeled"}, Reload: true},
	{Path: "routing.autoExecuteLabel", Type: "string", Default: "the-loop: auto-execute", Reload: true},
	{Path: "routing.authorizedUsers", Type: "strings", Default: []any{}, Doc: "GitHub logins whose comments may pass gates and control sessions (empty denies all)", Reload: true},
	{Path: "routing.authorized", Type: "strings", Default: []any{}, Doc: "who else may pass gates and control sessions, as GitHub answers it: logins, team:ORG/SLUG, permission:write|maintain|admin (that role or above), codeowners (CODEOWNERS on the default branch owns the gated artifact); each signed decision records the rule"},
	{Path: "routing.authorizedCacheSeconds", Type: "int", Default: 60, Doc: "how long GitHub's answers about teams, roles and CODEOWNERS are believed: someone removed from a team loses the right within it"},
	{Path: "routing.spawnWorkdir", Type: "string", Default: "."},
	{Path: "routing.maxConcurrentDispatches", Type: "int", Default: 4},
	{Path: "routing.dedupCacheSize", Type: "int", Default: 65536, Doc: "delivery ids remembered in memory (the queue dedups durably too)"},
	{Path: "routing.dispatchTimeoutSeconds", Type: "int", Default: 1800, Doc: "bound on handling one event; a dispatch running longer is cancelled and retried"},
	{Path: "routing.promptTemplate", Type: "string", Doc: "event prompt template file", Reload: true},
	{Path: "routing.spawnPromptTemplate", Type: "string", Doc: "spawn prompt template file", Reload: true},
	{Path: "routing.control", Type: "object"},
	{Path: "routing.control.enabled", Type: "bool", Default: true, Reload: true},
	{Path: "routing.control.requireStartCommand", Type: "bool", Default: true, Reload: true},
	{Path: "routing.control.keywords", Type: "object", Reload: true},
	{Path: "routing.interaction", Type: "object"},
	{Path: "routing.interaction.mode", Type: "string", Default: "work-item", Enum: []string{"work-item", "cli"}, Reload: true},
	{Path: "routing.graph", Type: "object"},
	{Path: "routing.graph.enabled", Type: "bool", Default: true},
	{Path: "routing.graph.repoHooks", Type: "bool", Default: false, Doc: "ignored: theloop never runs a watched repository's code"},
	{Path: "routing.graph.specDir", Type: "string", Default: "", Doc: "override of the repository's workflow.specDir"},
	{Path: "routing.workspace", Type: "object"},
	{Path: "routing.workspace.root", Type: "string", Default: "", Doc: "enables one git worktree per work item"},
	{Path: "routing.workspace.keepCheckoutOnClose", Type: "bool", Default: false},
	{Path: "routing.workspace.cloneUrl", Type: "string", Default: "", Doc: "where to clone a repository from, with {host}, {owner} and {repo} (e.g. ssh://git@{host}/{owner}/{repo}.git or a local mirror file:///srv/git/{owner}/{repo}.git); empty: the payload's clone_url when it is https or ssh on the repository's own host, else https://{host}/{owner}/{repo}.git"},
	{Path: "routing.tmux", Type: "object"},
	{Path: "routing.tmux.keepSessionOnClose", Type: "bool", Default: true},
	{Path: "routing.tmux.remainOnExit", Type: "bool", Default: true},
	{Path: "routing.tmux.socketPath", Type: "string", Default: "", Doc: "the agents' tmux server socket (absolute; tmux -S), which the posted attach command names; empty: the user's default server (under systemd's PrivateTmp, one only the service sees)"},
	{Path: "routing.tmux.resumeOnRespawn", Type: "bool", Default: true},
	{Path: "routing.tmux.killHarnessOnClose", Type: "bool", Default: true},
	{Path: "routing.tmux.harnessKillGraceSeconds", Type: "number", Default: 5},
	{Path: "routing.tmux.resumeProbeSeconds", Type: "number", Default: 2, Doc: "how long a resumed harness must stay alive to count as resumed (else a fresh session starts)"},
	{Path: "routing.tmux.liveness", Type: "object"},
	{Path: "routing.tmux.liveness.enabled", Type: "bool", Default: true, Doc: "respawn an active session whose harness died, without waiting for an event"},
	{Path: "routing.tmux.liveness.intervalSeconds", Type: "number", Default: 2, Doc: "how often the sessions are probed"},
	{Path: "routing.tmux.liveness.maxRespawns", Type: "number", Default: 3, Doc: "respawns of one work item within windowSeconds before the watch gives up and escalates on the ticket"},
	{Path: "routing.tmux.liveness.windowSeconds", Type: "number", Default: 1800},
	{Path: "routing.tmux.liveness.backoffSeconds", Type: "number", Default: 5, Doc: "wait after a respawn before the next of the same item, doubled each time"},
	{Path: "routing.tmux.sessionPerPr", Type: "free", Default: SessionPerPrCrossRepository, Doc: "never, cross-repository or always (true ⇒ cross-repository, false ⇒ never)"},
	{Path: "routing.harnessArgs", Type: "object"},
	{Path: "routing.harnessArgs.claude", Type: "strings", Default: []any{}},
	{Path: "routing.harnessArgs.cursor", Type: "strings", Default: []any{}},
	{Path: "routing.harnessArgs.codex", Type: "strings", Default: []any{}},
	{Path: "routing.harnessArgs.gemini", Type: "strings", Default: []any{}},
	{Path: "routing.harnessByRepository", Type: "free", Doc: "owner/repo: harness (" + strings.Join(harness.Names(), ", ") + ") — that repository's sessions run it unless a \"the-loop: harness-<name>\" label picks another"},
	{Path: "routing.harnessTrust", Type: "object"},
	{Path: "routing.harnessTrust.enabled", Type: "bool", Default: true, Doc: "write the session directory's trust into the user's Claude Code config (false: never touch it; the harness then shows its trust dialog)"},
	{Path: "routing.harnessTrust.scope", Type: "string", Default: "workspace-root", Enum: []string{"workspace-root", "directory"}},
	{Path: "routing.harnessTrust.acceptBypassPermissions", Type: "string", Default: "auto", Enum: []string{"auto", "always", "never"}},
	{Path: "routing.harnessPlugins", Type: "object"},
	{Path: "routing.harnessPlugins.enabled", Type: "bool", Default: true, Doc: "install and enable theloop's plugin in the user's Claude Code config"},
	{Path: "routing.reactions", Type: "object"},
	{Path: "routing.reactions.enabled", Type: "bool", Default: true, Reload: true},
	{Path: "routing.reactions.started", Type: "string", Default: "eyes", Reload: true},
	{Path: "routing.reactions.completed", Type: "string", Default: "hooray", Reload: true},
	{Path: "routing.reactions.error", Type: "string", Default: "confused", Reload: true},
	{Path: "routing.announce", Type: "object"},
	{Path: "routing.announce.enabled", Type: "bool", Default: true, Reload: true},
	{Path: "routing.webTerminal", Type: "object", Doc: "the agent's pane on the dashboard"},
	{Path: "routing.webTerminal.mode", Type: "string", Default: "view", Enum: []string{"off", "view", "reply"}, Doc: "off: no live pane on the dashboard; view: the pane, read-only; reply: the pane and a reply box for an operator who is an authorized user"},

	{Path: "routing.budget", Type: "object", Doc: "caps on what agent sessions spend (docs/usage.md): at warnAt of a cap loopd comments once and lists the item under \"needs you\"; at the cap it pauses the session until an authorized `the-loop resume` or a raised budget", Reload: true},
	{Path: "routing.budget.warnAt", Type: "number", Default: 0.8, Doc: "the fraction of a cap that warns (0 < warnAt ≤ 1)", Reload: true},
	{Path: "routing.budget.item", Type: "object", Doc: "the cap on one work item (all its sessions)", Reload: true},
	{Path: "routing.budget.item.tokens", Type: "int", Default: 0, Doc: "tokens of every kind (0: no cap)", Reload: true},
	{Path: "routing.budget.item.cost", Type: "number", Default: 0, Doc: "estimated cost from usage.rates (0: no cap)", Reload: true},
	{Path: "routing.budget.repositoryDaily", Type: "object", Doc: "the cap on one repository's sessions per UTC day", Reload: true},
	{Path: "routing.budget.repositoryDaily.tokens", Type: "int", Default: 0, Doc: "tokens of every kind (0: no cap)", Reload: true},
	{Path: "routing.budget.repositoryDaily.cost", Type: "number", Default: 0, Doc: "estimated cost from usage.rates (0: no cap)", Reload: true},

	{Path: "usage", Type: "object", Doc: "token usage read from each harness's own record, and its estimated cost (docs/usage.md)"},
	{Path: "usage.rates", Type: "free", Doc: "the rate card: model (or a prefix of its name) → {input, output, cacheWrite, cacheRead} per million tokens; a model with no rate shows its tokens and cost \"—\"", Reload: true},
	{Path: "usage.pollSeconds", Type: "int", Default: 5, Doc: "how often loopd reads the sessions' records"},

	{Path: "queue", Type: "object", Doc: "the durable event queue (NATS JetStream)"},
	{Path: "queue.url", Type: "string", Default: "", Doc: "an external NATS server or cluster; empty embeds one under the state root"},
	{Path: "queue.replicas", Type: "int", Default: 1, Doc: "replication of the queue's streams and buckets on a NATS cluster (3 on a 3-server cluster)"},
	{Path: "queue.credsFile", Type: "string", Default: "", Doc: "a NATS .creds file (user JWT and nkey seed) for queue.url"},
	{Path: "queue.nkeySeedFile", Type: "string", Default: "", Doc: "a file holding a NATS user nkey seed, for queue.url"},
	{Path: "queue.user", Type: "string", Default: "", Doc: "a NATS user for queue.url; its password comes from queue.passwordFile or queue.passwordEnv"},
	{Path: "queue.passwordFile", Type: "string", Default: "", Doc: "a file holding queue.user's password"},
	{Path: "queue.passwordEnv", Type: "string", Default: "", Doc: "an environment variable holding queue.user's password"},
	{Path: "queue.tls", Type: "object", Doc: "TLS to queue.url"},
	{Path: "queue.tls.caFile", Type: "string", Default: "", Doc: "the CA that signed the NATS servers' certificates (default: the system's)"},
	{Path: "queue.tls.certFile", Type: "string", Default: "", Doc: "loopd's client certificate, for servers that verify clients"},
	{Path: "queue.tls.keyFile", Type: "string", Default: "", Doc: "the client certificate's key"},
	{Path: "queue.insecure", Type: "bool", Default: false, Doc: "allow a queue.url off this machine without credentials (anything that reaches it can publish events)"},

	{Path: "service", Type: "object", Doc: "the control plane: API, /metrics and /mcp"},
	{Path: "service.enabled", Type: "bool", Default: true, Doc: "serve the 0600 socket <state root>/loopd.sock"},
	{Path: "service.leaseTTLSeconds", Type: "int", Default: 15, Doc: "with service.node: how long a dead node's work items wait before another node takes them over"},
	{Path: "service.listen", Type: "string", Default: "", Doc: "also listen on this TCP host:port (requires the token)"},
	{Path: "service.maxSessions", Type: "int", Default: 0, Doc: "with service.node: the work items (live sessions) this node owns at once; a full node declines new ones (0: no cap)"},
	{Path: "service.tokenEnv", Type: "string", Default: "THE_LOOP_SERVICE_TOKEN", Doc: "environment variable holding the bearer token TCP clients must send"},
	{Path: "service.mcp", Type: "object"},
	{Path: "service.mcp.enabled", Type: "bool", Default: true, Doc: "mount /mcp"},
	{Path: "service.node", Type: "string", Default: "", Doc: "this loopd's name among several sharing queue.url's NATS cluster; set on every node to share the work items (empty: one dispatcher for the whole queue)"},
	{Path: "service.stream", Type: "object"},
	{Path: "service.stream.enabled", Type: "bool", Default: true},
	{Path: "service.stream.maxSubscribers", Type: "int", Default: 8},
	{Path: "service.stream.keepAliveSeconds", Type: "int", Default: 15},
	{Path: "service.metrics", Type: "object"},
	{Path: "service.metrics.gateStuckAfterSeconds", Type: "int", Default: 86400, Doc: "an item waiting at a gate longer than this counts in theloop_gate_stuck_items", Reload: true},

	{Path: "eventLog", Type: "object"},
	{Path: "eventLog.enabled", Type: "bool", Default: true},
	{Path: "eventLog.path", Type: "string", Doc: "default <state root>/logs/events.jsonl"},

	{Path: "channels", Type: "object", Doc: "chat channels through which people talk to sessions (docs/daemon.md §11.5)"},
	{Path: "channels.slack", Type: "object", Doc: "the Slack channel: a thread per work item, authorized replies reach the session, /the-loop start|pause|resume|stop"},
	{Path: "channels.slack.enabled", Type: "bool", Default: false, Doc: "serve the Slack channel (needs channel, the bot token and, by mode, the signing secret or the app token)"},
	{Path: "channels.slack.mode", Type: "string", Default: "events", Enum: []string{"events", "socket"}, Doc: "events: Slack POSTs signed requests to eventsPath on the webhook listener; socket: loopd dials Slack (Socket Mode) and listens on nothing"},
	{Path: "channels.slack.channel", Type: "string", Default: "", Doc: "the channel (id, or #name the bot is in) where each work item's thread opens when its session is spawned"},
	{Path: "channels.slack.botTokenEnv", Type: "string", Default: "THE_LOOP_SLACK_BOT_TOKEN", Doc: "environment variable holding the bot token (xoxb-…, chat:write)"},
	{Path: "channels.slack.appTokenEnv", Type: "string", Default: "THE_LOOP_SLACK_APP_TOKEN", Doc: "mode socket: environment variable holding the app-level token (xapp-…, connections:write)"},
	{Path: "channels.slack.signingSecretEnv", Type: "string", Default: "THE_LOOP_SLACK_SIGNING_SECRET", Doc: "mode events: environment variable holding the app's signing secret; unset, loopd refuses to start (fail closed)"},
	{Path: "channels.slack.eventsPath", Type: "string", Default: "/slack/events", Doc: "mode events: the path of the Events API and the slash command on the webhook listener"},
	{Path: "channels.slack.users", Type: "free", Doc: "Slack user id (U…) → GitHub login; only a mapped login on routing.authorizedUsers is heard, anyone else changes nothing"},

	{Path: "integrations", Type: "free", Doc: "outbound GitHub/Slack/Jira (checked by the integrations decoder)"},
	{Path: "collaborators", Type: "free", Doc: "the operator's people, told of loopd's own events: a list of {login, name, roles, slack, email}; notifications.events names their roles"},
	{Path: "notifications", Type: "free", Doc: "loopd's own events told to collaborators: enabled (default true), events (work-item-spawned, session-died, dispatch-failed, event-dropped-unauthorized → roles), channels (slack, ticket; default [slack])"},
}

// CLIConfigKeys returns the catalogue of the CLI config's keys.
func CLIConfigKeys() []ConfigKey { return slices.Clone(configKeys) }

func keyIndex() map[string]ConfigKey {
	m := make(map[string]ConfigKey, len(configKeys))
	for _, k := range configKeys {
		m[k.Path] = k
	}
	return m
}

// UnknownKeyError lists keys the catalogue does not know, each with the
// nearest valid key.
type UnknownKeyError struct {
	File string
	Keys []UnknownKey
}

// UnknownKey is one unknown key and its nearest valid sibling ("" when none
// is close). Retired is set for a key the config once had (see
// RetiredCLIConfigKeys): Nearest is then its replacement, "" when none.
//
// Removed is set, to the reason, for a key nothing reads any more that
// `loopctl config migrate` deletes (RemovedCLIConfigKeys); Nearest is then
// the nearest valid key, as for an unknown one.
type UnknownKey struct {
	Path, Nearest string
	Retired       bool
	Removed       string
}

func (e *UnknownKeyError) Error() string {
	var parts []string
	for _, k := range e.Keys {
		if k.Retired {
			s := k.Path + " is no longer read"
			if k.Nearest != "" {
				s += ": use the top-level " + k.Nearest
			}
			parts = append(parts, s+" (`loopctl config migrate` moves it)")
			continue
		}
		if k.Removed != "" {
			s := k.Path + " is no longer accepted: nothing reads it (" + k.Removed + "); `loopctl config migrate` removes it"
			if k.Nearest != "" {
				s += " (the nearest valid key is " + k.Nearest + ")"
			}
			parts = append(parts, s)
			continue
		}
		s := "unknown key " + k.Path
		if k.Nearest != "" {
			s += " (did you mean " + k.Nearest + "?)"
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("%s: %s; fix or remove it (`loopctl config schema` lists every key)", e.File, strings.Join(parts, "; "))
}

// Is makes errors.Is(err, ErrInvalidConfig) true.
func (e *UnknownKeyError) Is(target error) bool { return target == ErrInvalidConfig }

// CheckCLIConfigKeys refuses keys the catalogue does not know (a typo must
// never silently switch a setting off), naming each and the nearest valid
// key. Values' types are checked by the readers of each key.
func CheckCLIConfigKeys(name string, raw map[string]any) error {
	idx := keyIndex()
	var unknown []UnknownKey
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			spec, ok := idx[p]
			if to, retired := retiredKeys[p]; retired && !ok {
				unknown = append(unknown, UnknownKey{Path: p, Nearest: to, Retired: true})
				continue
			}
			if why, removed := removedKeys[p]; removed && !ok {
				unknown = append(unknown, UnknownKey{Path: p, Nearest: nearestKey(p, idx), Removed: why})
				continue
			}
			if !ok {
				if prefix == "routing.control.keywords" {
					continue // the keywords reader refuses a non-command
				}
				unknown = append(unknown, UnknownKey{Path: p, Nearest: nearestKey(p, idx)})
				continue
			}
			switch spec.Type {
			case "object":
				if sub, ok := m[k].(map[string]any); ok {
					walk(p, sub)
				}
			case "list":
				if items, ok := m[k].([]any); ok {
					for _, it := range items {
						if sub, ok := it.(map[string]any); ok {
							walk(p+"[]", sub)
						}
					}
				}
			}
		}
	}
	walk("", raw)
	if len(unknown) == 0 {
		return nil
	}
	return &UnknownKeyError{File: name, Keys: unknown}
}

// nearestKey is the valid key closest to p: among p's siblings first (the
// same parent), by edit distance, within max(2, a third of its length); else
// any key with the same last segment.
func nearestKey(p string, idx map[string]ConfigKey) string {
	parent, leaf := "", p
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		parent, leaf = p[:i], p[i+1:]
	}
	best, bestD := "", max(2, len(leaf)/3)+1
	var paths []string
	for k := range idx {
		paths = append(paths, k)
	}
	sort.Strings(paths)
	for _, k := range paths {
		kp, kl := "", k
		if i := strings.LastIndexByte(k, '.'); i >= 0 {
			kp, kl = k[:i], k[i+1:]
		}
		if kp != parent {
			continue
		}
		if d := editDistance(strings.ToLower(leaf), strings.ToLower(kl)); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		return best
	}
	for _, k := range paths {
		if strings.HasSuffix(k, "."+leaf) || k == leaf {
			return k
		}
	}
	return ""
}

// CLIConfigSchema is the JSON Schema (draft-07) of the CLI config, for
// editors: every catalogued key with its type, default, allowed values and
// description; unknown keys are not allowed where the catalogue is closed.
func CLIConfigSchema() []byte {
	idx := keyIndex()
	var node func(prefix string) map[string]any
	props := func(prefix string) map[string]any {
		out := map[string]any{}
		for _, k := range configKeys {
			parent, leaf := "", k.Path
			if i := strings.LastIndexByte(k.Path, '.'); i >= 0 {
				parent, leaf = k.Path[:i], k.Path[i+1:]
			}
			if parent == prefix {
				out[leaf] = node(k.Path)
			}
		}
		return out
	}
	node = func(p string) map[string]any {
		k := idx[p]
		s := map[string]any{}
		if k.Doc != "" {
			s["description"] = k.Doc
		}
		if k.Default != nil {
			s["default"] = k.Default
		}
		switch k.Type {
		case "string":
			s["type"] = "string"
			if len(k.Enum) > 0 {
				s["enum"] = k.Enum
			}
		case "bool":
			s["type"] = "boolean"
		case "int":
			s["type"] = "integer"
		case "number":
			s["type"] = "number"
		case "strings":
			s["type"] = "array"
			s["items"] = map[string]any{"type": "string"}
		case "object":
			s["type"] = "object"
			if p == "routing.control.keywords" {
				s["additionalProperties"] = map[string]any{"type": "string"}
				kw := map[string]any{}
				for _, c := range ControlCommands() {
					kw[c] = map[string]any{"type": "string", "default": "the-loop " + c}
				}
				s["properties"] = kw
				break
			}
			s["properties"] = props(p)
			s["additionalProperties"] = false
		case "list":
			s["type"] = "array"
			s["items"] = map[string]any{"type": "object", "properties": props(p + "[]"), "additionalProperties": false}
		}
		return s
	}
	root := map[string]any{
		"$schema":              "http://json-schema.org/draft-07/schema#",
		"$id":                  "https://theloop.dev/schemas/cli-config.schema.json",
		"title":                "theloop operator configuration (cli-config.yaml)",
		"type":                 "object",
		"properties":           props(""),
		"additionalProperties": false,
	}
	b, _ := json.MarshalIndent(root, "", "  ")
	return append(b, '\n')
}

// harnessPrograms names each harness, with its program where that differs
// from the name ("cursor: cursor-agent").
func harnessPrograms() string {
	var out []string
	for _, d := range harness.All() {
		if d.Binary != d.Name {
			out = append(out, d.Name+": "+d.Binary)
		} else {
			out = append(out, d.Name)
		}
	}
	return strings.Join(out, ", ")
}
