package daemon

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
)

// Reload on SIGHUP (issue 14): soft policy — authorized users, control
// keywords and switches, spawn policy, the arming label, repositories and
// event filter, reactions, announcements, interaction mode, prompt
// templates, the stuck-gate age — is swapped into the running daemon. The
// listen address, secret, queue, state root, workspace, tmux and harness
// settings are not: a change to one is reported as needing a restart.
//
// Consistency: every dispatch holds policy.RLock for its whole run (the
// timed wrapper), so Reload's write lock waits for running dispatches and
// no handler ever sees half a policy. The receiver is swapped atomically
// (a new Router with the new authorization and keywords), and the
// reconcile pass is restarted with it.

// reloadState is the daemon's reload machinery (one per Daemon).
type reloadState struct {
	policy sync.RWMutex // dispatches read d.cfg's soft fields under RLock
	recv   atomic.Pointer[ingress.Receiver]
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
		recv, err := newReceiver(staged, d.recvDeps) // pipeline.go
		if err != nil {
			return fmt.Errorf("daemon: reload: %w", err)
		}
		st.recv, st.reconcile = recv, true
		return nil
	}, apply: func(d *Daemon, st *reloadStaged) {
		d.recv = st.recv
		d.svc.rl.recv.Store(st.recv)
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

// Reload applies next's soft policy to the running daemon (valid after
// Ready). next is validated first; on any error nothing changes and the
// running configuration stays. It waits for running dispatches to finish.
//
// The reload is a diff (reloadkeys.go): each changed key is either
// reloaded by the parts that own it — each checks and builds what it needs
// first, then applies its own under the policy lock — or reported as
// needing a restart.
func (d *Daemon) Reload(next Config) (ReloadResult, error) {
	select {
	case <-d.ready:
	default:
		return ReloadResult{}, fmt.Errorf("daemon: not running")
	}
	// Keep what New filled in for the running daemon.
	next.InsecureAcceptUnsigned = d.cfg.InsecureAcceptUnsigned
	if len(next.Secret) == 0 {
		next.Secret = d.cfg.Secret
	}
	if err := next.Validate(); err != nil {
		return ReloadResult{}, err
	}
	next.EventLog.Path = next.EventLogFile()
	df := diffConfig(&d.cfg, &next, reloadedBy)
	if len(df.keys) > 0 {
		if err := d.applyReload(df, &next); err != nil {
			return ReloadResult{}, err
		}
	}
	applied := df.Applied
	if applied == nil {
		applied = []string{}
	}
	d.shown.Store(&shownSettings{rows: next.Settings.Shown(), at: d.deps.Clock.Now(), pending: slices.Clone(df.NeedRestart)})
	d.emit("config.reloaded", graph.LevelInfo, graph.Field{Key: "applied", Value: applied}, graph.Field{Key: "need_restart", Value: df.NeedRestart})
	return df.ReloadResult, nil
}

// applyReload stages every part df touches (a part that refuses leaves the
// running configuration in place), then, with no dispatch running, takes
// the changed keys into d.cfg and lets each part apply its own.
func (d *Daemon) applyReload(df reloadDiff, next *Config) error {
	staged := d.cfg
	for _, k := range df.keys {
		k.take(&staged, next)
	}
	var st reloadStaged
	for _, i := range df.parts {
		if p := reloadParts[i]; p.stage != nil {
			if err := p.stage(d, staged, &st); err != nil {
				return err
			}
		}
	}
	rs := &d.svc.rl
	if st.reconcile {
		d.rec.stop()
	}
	rs.policy.Lock()
	for _, k := range df.keys {
		k.take(&d.cfg, next)
	}
	for _, i := range df.parts {
		if p := reloadParts[i]; p.apply != nil {
			p.apply(d, &st)
		}
	}
	rs.policy.Unlock()
	if st.reconcile {
		d.rec.restart()
	}
	return nil
}
