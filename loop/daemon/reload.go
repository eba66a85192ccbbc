package daemon

import (
	"fmt"
	"reflect"
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

// ReloadResult says what a reload applied and what it could not.
type ReloadResult struct {
	// Applied names the soft keys that changed and now apply.
	Applied []string
	// NeedRestart names changed keys a reload does not apply.
	NeedRestart []string
}

// Reload applies next's soft policy to the running daemon (valid after
// Ready). next is validated first; on any error nothing changes and the
// running configuration stays. It waits for running dispatches to finish.
func (d *Daemon) Reload(next Config) (ReloadResult, error) {
	var res ReloadResult
	select {
	case <-d.ready:
	default:
		return res, fmt.Errorf("daemon: not running")
	}
	// Keep what New filled in for the running daemon.
	next.InsecureAcceptUnsigned = d.cfg.InsecureAcceptUnsigned
	if len(next.Secret) == 0 {
		next.Secret = d.cfg.Secret
	}
	if err := next.Validate(); err != nil {
		return res, err
	}
	next.EventLogPath = next.EventLogFile()
	cur := d.cfg
	for _, h := range []struct {
		key       string
		cur, next any
	}{
		{"state.root", cur.StateRoot, next.StateRoot},
		{"webhooks.ghWebhook.host/port", cur.Listen, next.Listen},
		{"webhooks.ghWebhook.path", cur.WebhookPath, next.WebhookPath},
		{"the webhook secret", string(cur.Secret), string(next.Secret)},
		{"queue.url", cur.QueueURL, next.QueueURL},
		{"queue credentials, queue.tls, queue.insecure", []any{cur.QueueAuth, cur.QueueTLS, cur.QueueInsecure}, []any{next.QueueAuth, next.QueueTLS, next.QueueInsecure}},
		{"service.node/maxSessions/leaseTTLSeconds, queue.replicas", cur.Cluster, next.Cluster},
		{"routing.maxConcurrentDispatches", cur.Parallelism, next.Parallelism},
		{"routing.workspace", cur.WorkspaceRoot, next.WorkspaceRoot},
		{"routing.workspace.cloneUrl", cur.CloneURL, next.CloneURL},
		{"routing.tmux.keepSessionOnClose", cur.KeepSessionOnClose, next.KeepSessionOnClose},
		{"routing.tmux.killHarnessOnClose", cur.KillHarnessOnClose, next.KillHarnessOnClose},
		{"routing.tmux.harnessKillGraceSeconds", cur.HarnessKillGrace, next.HarnessKillGrace},
		{"routing.defaultHarness", cur.DefaultHarness, next.DefaultHarness},
		{"routing.harnessArgs", [][]string{cur.HarnessArgs, cur.CursorArgs, cur.CodexArgs, cur.GeminiArgs}, [][]string{next.HarnessArgs, next.CursorArgs, next.CodexArgs, next.GeminiArgs}},
		{"routing.harnessByRepository", cur.HarnessByRepository, next.HarnessByRepository},
		{"routing.graph.enabled", cur.GraphEnabled, next.GraphEnabled},
		{"routing.graph.specDir", cur.GraphSpecDir, next.GraphSpecDir},
		{"eventLog.path", cur.EventLogPath, next.EventLogPath},
		{"integrations", cur.Integrations, next.Integrations},
		{"channels.slack", cur.Slack, next.Slack},
		{"service", cur.Service.Listen + "|" + cur.Service.Token, next.Service.Listen + "|" + next.Service.Token},
		{"usage.pollSeconds", cur.Usage.Poll, next.Usage.Poll},
	} {
		if !reflect.DeepEqual(h.cur, h.next) {
			res.NeedRestart = append(res.NeedRestart, h.key)
		}
	}
	soft := []struct {
		key       string
		cur, next any
		apply     func()
	}{
		{"routing.authorizedUsers", cur.AuthorizedUsers, next.AuthorizedUsers, func() { d.cfg.AuthorizedUsers = slices.Clone(next.AuthorizedUsers) }},
		{"routing.authorized, routing.authorizedCacheSeconds", []any{cur.Authorized, cur.AuthorityTTL}, []any{next.Authorized, next.AuthorityTTL}, func() {
			d.cfg.Authorized, d.cfg.AuthorityTTL = slices.Clone(next.Authorized), next.AuthorityTTL
			if d.authority != nil {
				_ = d.authority.Reset(next.Authorized, next.AuthorityTTL) // checked before anything was applied
			}
		}},
		{"routing.control.keywords", cur.Keywords, next.Keywords, func() { d.cfg.Keywords = next.Keywords; d.cfg.ExecuteKeyword = next.ExecuteKeyword }},
		{"routing.control.enabled", cur.ControlEnabled, next.ControlEnabled, func() { d.cfg.ControlEnabled = next.ControlEnabled }},
		{"routing.control.requireStartCommand", cur.RequireStartCommand, next.RequireStartCommand, func() { d.cfg.RequireStartCommand = next.RequireStartCommand }},
		{"routing.spawnOnUnmatched", cur.SpawnOnUnmatched, next.SpawnOnUnmatched, func() { d.cfg.SpawnOnUnmatched = next.SpawnOnUnmatched }},
		{"routing.autoExecuteLabel", cur.AutoExecuteLabel, next.AutoExecuteLabel, func() { d.cfg.AutoExecuteLabel = next.AutoExecuteLabel }},
		{"repositories", cur.Repos, next.Repos, func() { d.cfg.Repos = slices.Clone(next.Repos) }},
		{"webhooks.ghWebhook.events", cur.Events, next.Events, func() { d.cfg.Events = slices.Clone(next.Events) }},
		{"polling.sources", cur.Poll, next.Poll, func() { d.cfg.Poll = next.Poll }},
		{"routing.reactions", cur.Reactions, next.Reactions, func() { d.cfg.Reactions = next.Reactions }},
		{"routing.announce.enabled", cur.AnnounceEnabled, next.AnnounceEnabled, func() { d.cfg.AnnounceEnabled = next.AnnounceEnabled }},
		{"routing.interaction.mode", cur.InteractionMode, next.InteractionMode, func() { d.cfg.InteractionMode = next.InteractionMode }},
		{"routing.promptTemplate", cur.PromptTemplate, next.PromptTemplate, func() { d.cfg.PromptTemplate = next.PromptTemplate }},
		{"routing.spawnPromptTemplate", cur.SpawnPromptTemplate, next.SpawnPromptTemplate, func() { d.cfg.SpawnPromptTemplate = next.SpawnPromptTemplate }},
		{"routing.tmux.sessionPerPr", cur.SessionPerPr, next.SessionPerPr, func() { d.cfg.SessionPerPr = next.SessionPerPr }},
		{"routing.budget, usage.rates", []any{cur.Usage.Budget, cur.Usage.Rates}, []any{next.Usage.Budget, next.Usage.Rates}, func() {
			d.cfg.Usage.Budget, d.cfg.Usage.Rates = next.Usage.Budget, next.Usage.Rates
		}},
		{"service.metrics.gateStuckAfterSeconds", cur.Service.GateStuckAfter, next.Service.GateStuckAfter, func() {
			d.cfg.Service.GateStuckAfter = next.Service.GateStuckAfter
			if d.svc.metrics != nil {
				d.svc.metrics.SetStuckAfter(next.Service.GateStuckAfter)
			}
		}},
	}
	var changed []func()
	for _, s := range soft {
		if !reflect.DeepEqual(s.cur, s.next) {
			res.Applied = append(res.Applied, s.key)
			changed = append(changed, s.apply)
		}
	}
	if len(changed) == 0 {
		d.emit("config.reloaded", graph.LevelInfo, graph.Field{Key: "applied", Value: []string{}}, graph.Field{Key: "need_restart", Value: res.NeedRestart})
		return res, nil
	}

	// Check the rules and build the new receiver before touching
	// anything: a policy either refuses leaves the running one in place.
	if err := ingress.ParseAuthorized(next.Authorized); err != nil {
		return ReloadResult{}, fmt.Errorf("daemon: reload: routing.authorized: %w", err)
	}
	rs := &d.svc.rl
	staged := d.cfg
	for _, s := range soft {
		if !reflect.DeepEqual(s.cur, s.next) {
			switch s.key {
			case "routing.authorizedUsers":
				staged.AuthorizedUsers = next.AuthorizedUsers
			case "routing.authorized, routing.authorizedCacheSeconds":
				staged.Authorized = next.Authorized
			case "routing.control.keywords":
				staged.Keywords = next.Keywords
			case "routing.control.enabled":
				staged.ControlEnabled = next.ControlEnabled
			case "routing.autoExecuteLabel":
				staged.AutoExecuteLabel = next.AutoExecuteLabel
			case "repositories":
				staged.Repos = next.Repos
			case "webhooks.ghWebhook.events":
				staged.Events = next.Events
			}
		}
	}
	recv, err := newReceiver(staged, d.recvDeps) // pipeline.go
	if err != nil {
		return ReloadResult{}, fmt.Errorf("daemon: reload: %w", err)
	}

	d.rec.stop()
	rs.policy.Lock()
	for _, apply := range changed {
		apply()
	}
	d.policyChanged()
	d.recv = recv
	rs.recv.Store(recv)
	if d.svc.graphs != nil {
		d.svc.graphs.SetPolicy(d.cfg.AuthorizedUsers, d.cfg.ExecuteKeyword, d.cfg.SessionPerPr)
	}
	rs.policy.Unlock()
	d.rec.restart()
	d.emit("config.reloaded", graph.LevelInfo, graph.Field{Key: "applied", Value: res.Applied}, graph.Field{Key: "need_restart", Value: res.NeedRestart})
	return res, nil
}
