package daemon

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/theloop-dev/theloop/ingress"
)

// What a reload compares and who applies it (nats-server's config reload
// and raft's reloadable subset are the models): reloadKeys lists every
// value compared between the running Config and the next one, in the order
// they are reported; reloadParts are the parts of the daemon that reload
// keys, each naming the keys it reloads and applying its own. A changed key
// no part reloads is reported as needing a restart.

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

// reloadPart is a part of the running daemon that reloads keys: it names
// them, may check (and build) what it needs from the next configuration
// before anything changes, and applies its own once the keys' values are
// in d.cfg (under the policy write lock: no dispatch runs meanwhile).
type reloadPart struct {
	name string
	keys []string
	// stage checks staged (the running configuration with every changed
	// key the reload applies) and builds what apply installs; an error
	// refuses the whole reload.
	stage func(d *Daemon, staged Config, st *reloadStaged) error
	// apply installs the keys (nil: the part reads d.cfg as it goes).
	apply func(d *Daemon, st *reloadStaged)
}

// reloadStaged is what the parts built before the reload applied.
type reloadStaged struct {
	recv *ingress.Receiver
	// reconcile: the reconcile pass is to be restarted (with the new
	// receiver).
	reconcile bool
}

// receiverKeys are what the webhook receiver is built from; the reconcile
// pass routes through it and polls polling.sources (or the repositories).
var receiverKeys = []string{"routing.authorizedUsers", "routing.authorized, routing.authorizedCacheSeconds", "routing.control.keywords",
	"routing.control.enabled", "routing.autoExecuteLabel", "repositories", "webhooks.ghWebhook.events", "polling.sources"}

var reloadParts = []reloadPart{
	// The receiver and the reconcile pass that routes through it: a new
	// receiver (a new Router with the new authorization and keywords) is
	// swapped in atomically and the pass restarted with it.
	{name: "receiver", keys: receiverKeys, stage: func(d *Daemon, staged Config, st *reloadStaged) error {
		recv, err := ingress.NewReceiver(IngressConfig(staged), ingress.ReceiverDeps{Sink: d.Sink(), Log: d.sink, Clock: d.deps.Clock, SinkCopiesPayload: true, Health: d.Healthy})
		if err != nil {
			return fmt.Errorf("daemon: reload: webhook receiver: %w", err)
		}
		st.recv, st.reconcile = recv, true
		return nil
	}, apply: func(d *Daemon, st *reloadStaged) {
		d.recv = st.recv
		d.reload().recv.Store(st.recv)
	}},
	// routing.authorized is answered by GitHub through the authority.
	{name: "authority", keys: []string{"routing.authorized, routing.authorizedCacheSeconds"}, apply: func(d *Daemon, _ *reloadStaged) {
		if d.authority != nil {
			_ = d.authority.Reset(d.cfg.Routing.Authorized, d.cfg.Routing.AuthorizedCache) // checked by the receiver's stage
		}
	}},
	// The intake and the PR linkage take their configuration from d.cfg.
	{name: "intake", keys: []string{"routing.authorizedUsers", "routing.control.keywords", "routing.control.enabled", "routing.control.requireStartCommand",
		"routing.spawnOnUnmatched", "routing.autoExecuteLabel", "repositories", "routing.reactions", "routing.announce.enabled", "routing.interaction.mode",
		"routing.promptTemplate", "routing.spawnPromptTemplate", "routing.tmux.sessionPerPr"},
		apply: func(d *Daemon, _ *reloadStaged) { d.policyChanged() }},
	// The graph controller's gate policy.
	{name: "graphs", keys: []string{"routing.authorizedUsers", "routing.control.keywords", "routing.tmux.sessionPerPr"}, apply: func(d *Daemon, _ *reloadStaged) {
		if d.svc.graphs != nil {
			d.svc.graphs.SetPolicy(d.cfg.Routing.AuthorizedUsers, d.cfg.ExecuteKeyword(), d.cfg.Routing.Tmux.SessionPerPr)
		}
	}},
	// The usage watch reads the budget and rates from d.cfg at each poll.
	{name: "usage", keys: []string{"routing.budget, usage.rates"}},
	// The gate metrics' stuck age.
	{name: "metrics", keys: []string{"service.metrics.gateStuckAfterSeconds"}, apply: func(d *Daemon, _ *reloadStaged) {
		if d.svc.metrics != nil {
			d.svc.metrics.SetStuckAfter(d.cfg.Service.GateStuckAfter)
		}
	}},
}

// reloadedBy maps each key a part reloads to the parts that reload it. It
// panics when a part names a key reloadKeys lacks, or a reloaded key has
// no take (or a key with a take is reloaded by no part): the tables are
// checked against each other at start.
var reloadedBy = func() map[string][]int {
	takes := map[string]bool{}
	for _, k := range reloadKeys {
		takes[k.key] = k.take != nil
	}
	m := map[string][]int{}
	for i, p := range reloadParts {
		for _, k := range p.keys {
			take, known := takes[k]
			if !known || !take {
				panic("daemon: reload part " + p.name + " names " + k + ", which is not a reloadable key")
			}
			m[k] = append(m[k], i)
		}
	}
	for k, take := range takes {
		if take && len(m[k]) == 0 {
			panic("daemon: no reload part reloads " + k)
		}
	}
	return m
}()

// reloadDiff is what changed between two configurations.
type reloadDiff struct {
	ReloadResult
	keys  []reloadKey // the changed keys some part reloads
	parts []int       // the parts that reload them, in reloadParts order
}

// diffConfig compares cur and next key by key: a changed key is applied
// when a part reloads it, else it needs a restart.
func diffConfig(cur, next *Config) reloadDiff {
	var df reloadDiff
	touched := make([]bool, len(reloadParts))
	for _, k := range reloadKeys {
		if reflect.DeepEqual(k.of(cur), k.of(next)) {
			continue
		}
		parts := reloadedBy[k.key]
		if len(parts) == 0 {
			df.NeedRestart = append(df.NeedRestart, k.key)
			continue
		}
		df.Applied = append(df.Applied, k.key)
		df.keys = append(df.keys, k)
		for _, p := range parts {
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
