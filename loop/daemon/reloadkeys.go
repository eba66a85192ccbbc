package daemon

import (
	"reflect"
	"slices"
)

// What a reload compares (nats-server's config reload and raft's
// reloadable subset are the models): reloadKeys lists every value compared
// between the running Config and the next one, in the order they are
// reported. Who reloads which key is the parts' business (reloadParts in
// reload.go); a changed key no part reloads is reported as needing a
// restart.

// reloadKey is one key (or keys reported together) compared on reload.
type reloadKey struct {
	key string
	// of is the value compared.
	of func(c *Config) any
	// take copies the key's value from src into dst (every key a part
	// reloads has one; a key only a restart applies has none).
	take func(dst *Config, src *Config)
}

var reloadKeys = []reloadKey{
	{key: "state.root", of: func(c *Config) any { return c.StateRoot }},
	{key: "webhooks.ghWebhook.host/port", of: func(c *Config) any { return c.Listen() }},
	{key: "webhooks.ghWebhook.path", of: func(c *Config) any { return c.Webhook.Path }},
	{key: "the webhook secret", of: func(c *Config) any { return string(c.Secret) }},
	{key: "queue.url", of: func(c *Config) any { return c.Queue.URL }},
	{key: "queue credentials, queue.tls, queue.insecure", of: func(c *Config) any { return []any{c.QueueAuth, c.QueueTLS(), c.Queue.Insecure} }},
	{key: "service.node/maxSessions/leaseTTLSeconds, queue.replicas", of: func(c *Config) any { return c.Cluster() }},
	{key: "routing.maxConcurrentDispatches", of: func(c *Config) any { return c.Routing.MaxConcurrentDispatches }},
	{key: "routing.workspace", of: func(c *Config) any { return c.Routing.WorkspaceRoot }},
	{key: "routing.workspace.cloneUrl", of: func(c *Config) any { return c.Routing.CloneURL }},
	{key: "routing.tmux.keepSessionOnClose", of: func(c *Config) any { return c.Routing.Tmux.KeepSessionOnClose }},
	{key: "routing.tmux.killHarnessOnClose", of: func(c *Config) any { return c.Routing.Tmux.KillHarnessOnClose }},
	{key: "routing.tmux.harnessKillGraceSeconds", of: func(c *Config) any { return c.Routing.Tmux.HarnessKillGrace }},
	{key: "routing.defaultHarness", of: func(c *Config) any { return c.Routing.DefaultHarness }},
	{key: "routing.harnessArgs", of: func(c *Config) any { return c.Routing.HarnessArgs }},
	{key: "routing.harnessByRepository", of: func(c *Config) any { return c.Routing.HarnessByRepository }},
	{key: "routing.graph.enabled", of: func(c *Config) any { return c.Routing.GraphEnabled }},
	{key: "routing.graph.specDir", of: func(c *Config) any { return c.Routing.GraphSpecDir }},
	{key: "eventLog.path", of: func(c *Config) any { return c.EventLog.Path }},
	{key: "integrations", of: func(c *Config) any { return c.Integrations }},
	{key: "channels.slack", of: func(c *Config) any { return c.Slack }},
	{key: "service", of: func(c *Config) any { return c.Service.Listen + "|" + c.Service.Token }},
	{key: "usage.pollSeconds", of: func(c *Config) any { return c.Usage.Poll }},

	{"routing.authorizedUsers", func(c *Config) any { return c.Routing.AuthorizedUsers }, func(d, s *Config) { d.Routing.AuthorizedUsers = slices.Clone(s.Routing.AuthorizedUsers) }},
	{"routing.authorized, routing.authorizedCacheSeconds", func(c *Config) any { return []any{c.Routing.Authorized, c.Routing.AuthorizedCache} }, func(d, s *Config) {
		d.Routing.Authorized, d.Routing.AuthorizedCache = slices.Clone(s.Routing.Authorized), s.Routing.AuthorizedCache
	}},
	{"routing.control.keywords", func(c *Config) any { return c.Routing.Keywords }, func(d, s *Config) { d.Routing.Keywords = s.Routing.Keywords }},
	{"routing.control.enabled", func(c *Config) any { return c.Routing.ControlEnabled }, func(d, s *Config) { d.Routing.ControlEnabled = s.Routing.ControlEnabled }},
	{"routing.control.requireStartCommand", func(c *Config) any { return c.Routing.RequireStartCommand }, func(d, s *Config) { d.Routing.RequireStartCommand = s.Routing.RequireStartCommand }},
	{"routing.spawnOnUnmatched", func(c *Config) any { return c.Routing.SpawnOnUnmatched }, func(d, s *Config) { d.Routing.SpawnOnUnmatched = s.Routing.SpawnOnUnmatched }},
	{"routing.autoExecuteLabel", func(c *Config) any { return c.Routing.AutoExecuteLabel }, func(d, s *Config) { d.Routing.AutoExecuteLabel = s.Routing.AutoExecuteLabel }},
	{"repositories", func(c *Config) any { return c.Repositories }, func(d, s *Config) { d.Repositories = slices.Clone(s.Repositories) }},
	{"webhooks.ghWebhook.events", func(c *Config) any { return c.Webhook.Events }, func(d, s *Config) { d.Webhook.Events = slices.Clone(s.Webhook.Events) }},
	{"polling.sources", func(c *Config) any { return c.PollerConfig() }, func(d, s *Config) { d.Polling = s.Polling }},
	{"routing.reactions", func(c *Config) any { return c.Routing.Reactions }, func(d, s *Config) { d.Routing.Reactions = s.Routing.Reactions }},
	{"routing.announce.enabled", func(c *Config) any { return c.Routing.AnnounceEnabled }, func(d, s *Config) { d.Routing.AnnounceEnabled = s.Routing.AnnounceEnabled }},
	{"routing.interaction.mode", func(c *Config) any { return c.Routing.InteractionMode }, func(d, s *Config) { d.Routing.InteractionMode = s.Routing.InteractionMode }},
	{"routing.promptTemplate", func(c *Config) any { return c.PromptTemplate }, func(d, s *Config) { d.PromptTemplate = s.PromptTemplate }},
	{"routing.spawnPromptTemplate", func(c *Config) any { return c.SpawnPromptTemplate }, func(d, s *Config) { d.SpawnPromptTemplate = s.SpawnPromptTemplate }},
	{"routing.tmux.sessionPerPr", func(c *Config) any { return c.Routing.Tmux.SessionPerPr }, func(d, s *Config) { d.Routing.Tmux.SessionPerPr = s.Routing.Tmux.SessionPerPr }},
	{"routing.budget, usage.rates", func(c *Config) any { return []any{c.Usage.Budget, c.Usage.Rates} }, func(d, s *Config) {
		d.Usage.Budget, d.Usage.Rates = s.Usage.Budget, s.Usage.Rates
	}},
	{"service.metrics.gateStuckAfterSeconds", func(c *Config) any { return c.Service.GateStuckAfter }, func(d, s *Config) { d.Service.GateStuckAfter = s.Service.GateStuckAfter }},
}

// ReloadResult says what a reload applied and what it could not.
type ReloadResult struct {
	// Applied names the soft keys that changed and now apply.
	Applied []string
	// NeedRestart names changed keys a reload does not apply.
	NeedRestart []string
}

// reloadDiff is what changed between two configurations.
type reloadDiff struct {
	ReloadResult
	keys  []reloadKey // the changed keys some part reloads
	parts []int       // the parts that reload them, in index order
}

// diffConfig compares cur and next key by key: a changed key is applied
// when a part reloads it (owners: the parts, by index, that reload each
// key), else it needs a restart.
func diffConfig(cur, next *Config, owners map[string][]int) reloadDiff {
	var df reloadDiff
	var touched []bool
	for _, k := range reloadKeys {
		if reflect.DeepEqual(k.of(cur), k.of(next)) {
			continue
		}
		parts := owners[k.key]
		if len(parts) == 0 {
			df.NeedRestart = append(df.NeedRestart, k.key)
			continue
		}
		df.Applied = append(df.Applied, k.key)
		df.keys = append(df.keys, k)
		for _, p := range parts {
			for len(touched) <= p {
				touched = append(touched, false)
			}
			touched[p] = true
		}
	}
	for i, t := range touched {
		if t {
			df.parts = append(df.parts, i)
		}
	}
	return df
}
