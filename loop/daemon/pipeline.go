package daemon

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/dispatch"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
	"github.com/theloop-dev/theloop/workitem"
)

// buildPipeline builds the daemon's pipeline — the one place its parts
// meet — for the direction an event flows: receiver → queue → dispatcher
// → intake → sessions (and the graph link beside the intake). build made
// what needs no network (event log, integrations, sessions, graph link).
// The queue is opened first, then the intake (the dispatcher hands it
// events) and the parts beside it (the operator's desk, Slack), then the
// receiver starts listening, then the dispatcher is built on the queue: a
// loopd waiting as a standby for the dispatcher lease still takes webhooks
// into the queue. Reload makes its receiver with the same newReceiver. On
// an error nothing is left listening and the queue is closed.
func (d *Daemon) buildPipeline(ctx context.Context, owner string) (q *queue.Queue, srv *ingress.Server, disp dispatchRunner, err error) {
	q, err = queue.Open(ctx, queue.Config{URL: d.cfg.Queue.URL, StoreDir: filepath.Join(d.cfg.StateRoot, "queue"), Replicas: d.cfg.Cluster().QueueReplicas,
		Auth: d.cfg.QueueAuth, TLS: d.cfg.QueueTLS(), Insecure: d.cfg.Queue.Insecure})
	if err != nil {
		return nil, nil, nil, err
	}
	d.q = q
	defer func() {
		if err != nil {
			q.Close()
		}
	}()
	d.intake = newIntake(intakeConfigOf(&d.cfg), intakeDeps{
		Registry: d.reg, Manager: d.mgr, Workspaces: d.ws, Link: d.link, Control: d.ctl,
		Marks: q, Intents: q, History: tmuxHistory(d.tmux, d.harness.claudeConfigDir), Integrations: d.integ, Tmux: d.tmux.Config(), Attach: d.tmux.AttachCommand, Git: pathRunner{path: d.deps.Path},
		Now: d.deps.Clock.Now, CloneURL: jiraCloneURLs(cloneURLs(d.deps.CloneURL, d.cfg.Routing.CloneURL)), HarnessFor: d.harness.forEvent, Record: d.emit, Observe: d.observe,
		Authority: d.authority,
	})

	// The dashboard's PR/CI state sees each routed event, and what the
	// reconcile pass reads (prci.go).
	notePRCI := func(ev *ingress.Event) { d.dashHost.notePRCI(ev, d.intake.resolve) }
	d.cluster = &cluster{cfg: d.cfg.Cluster(), queueURL: d.cfg.Queue.URL, defaultHarness: d.cfg.Routing.DefaultHarness,
		reg: d.reg, mgr: d.mgr, intake: d.intake, now: d.deps.Clock.Now, emit: d.emit, logf: d.logf, ownership: d.deps.Ownership}
	d.desk = &operatorDesk{cfg: &d.cfg, policy: &d.svc.rl.policy, reg: d.reg, tmux: d.tmux, mgr: d.mgr, ctl: d.ctl, link: d.link, intake: d.intake,
		integ: d.integ, authority: d.authority, cluster: d.cluster, sink: d.Sink(), now: d.deps.Clock.Now, emit: d.emit, claudeConfigDir: d.harness.claudeConfigDir()}
	ch, err := openSlack(d.cfg.Slack, d.cfg.StateRoot, d.svc.httpClient(d.deps.HTTPClient), d.desk) // slack.go
	if err != nil {
		return nil, nil, nil, err
	}
	d.slack = ch

	if warns, err := IngressConfig(d.cfg).Validate(); err == nil {
		for _, w := range warns {
			d.logf("warning: %s", w)
		}
	}
	d.recvDeps = ingress.ReceiverDeps{Sink: d.Sink(), Log: d.sink, Clock: d.deps.Clock, SinkCopiesPayload: true, Health: d.Healthy}
	recv, err := newReceiver(d.cfg, d.recvDeps)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("daemon: %w", err)
	}
	handler := currentReceiver(&d.svc.rl.recv, recv)
	handler, err = d.jira.handler(d.cfg.Jira, d.cfg.StateRoot, d.svc.rl.recv.Load, d.integ, d.Sink(), d.sink, handler) // jira.go: the Jira webhook beside GitHub's
	if err != nil {
		return nil, nil, nil, err
	}
	srv = ingress.NewServer(d.cfg.Listen(), slackHandler(d.slack, handler)) // slack.go: the Events API beside the webhook
	srv.SetConnLimits(raiseWebhookConnLimits(d.logf))                       // rlimit.go
	if err := srv.Start(); err != nil {
		return nil, nil, nil, fmt.Errorf("daemon: listen on %s (webhooks.ghWebhook.host/port): %w", d.cfg.Listen(), err)
	}
	d.addr = srv.Addr()
	d.recv = recv
	d.rec = &reconciler{cfg: &d.cfg, integ: d.integ, sink: d.Sink(), router: func() *ingress.Router { return d.svc.rl.recv.Load().Router() },
		store: d.ctl.ps, reg: d.reg, redeliveries: q, log: d.sink, clock: d.deps.Clock, note: notePRCI, emit: d.emit}

	disp, err = d.cluster.dispatcher(ctx, q, d.svc.timed(d.intake, notePRCI, d.cfg.Routing.DispatchTimeout), dispatch.Config{ // cluster.go: this node alone, or shared
		Parallelism: d.cfg.Routing.MaxConcurrentDispatches, MaxDeliver: d.cfg.MaxDeliver, DrainTimeout: d.cfg.DrainTimeout,
		Observe: dispatchObserver(d.emit),
		// The same daemon restarted takes its lease back at once.
		Owner: owner,
	})
	if err != nil {
		_ = srv.Close()
		return nil, nil, nil, err
	}
	if !d.cfg.Liveness.Off {
		d.live, err = newLivenessWatch(d.cfg.Liveness, livenessDeps{
			Registry: d.reg, Tmux: d.tmux, Manager: d.mgr, Integrations: d.integ,
			Owns: d.cluster.ownsItem, Rebind: d.link.rebind, Clock: d.deps.Clock, Record: d.emit,
			Assignment: func(ctx context.Context, item workitem.Ref, cwd string) string {
				if gc := d.link.spawnContext(ctx, item, cwd); gc != nil {
					return gc.Assignment
				}
				return ""
			},
		})
		if err != nil {
			_ = srv.Close()
			return nil, nil, nil, err
		}
	}
	return q, srv, disp, nil
}

// intakeConfigOf is the intake's part of the configuration in force.
func intakeConfigOf(c *Config) intakeConfig {
	return intakeConfig{
		ControlEnabled: c.Routing.ControlEnabled, RequireStartCommand: c.Routing.RequireStartCommand,
		AuthorizedUsers: c.Routing.AuthorizedUsers, SpawnOnUnmatched: c.Routing.SpawnOnUnmatched, Reactions: c.Routing.Reactions,
		AnnounceEnabled: c.Routing.AnnounceEnabled, InteractionMode: c.Routing.InteractionMode,
		PromptTemplate: c.PromptTemplate, SpawnPromptTemplate: c.SpawnPromptTemplate,
		SessionPerPr: c.Routing.Tmux.SessionPerPr, GraphEnabled: c.Routing.GraphEnabled,
		SpawnWorkdir: c.Routing.SpawnWorkdir, KeepCheckoutOnClose: c.Routing.KeepCheckoutOnClose, Close: closeOptionsOf(c),
	}
}

// linkConfigOf is the graph link's part of the configuration in force.
func linkConfigOf(c *Config) linkConfig {
	return linkConfig{
		GraphEnabled: c.Routing.GraphEnabled, GraphSpecDir: c.Routing.GraphSpecDir,
		ControlEnabled: c.Routing.ControlEnabled, RequireStartCommand: c.Routing.RequireStartCommand,
		AuthorizedUsers: c.Routing.AuthorizedUsers, ExecuteKeyword: c.ExecuteKeyword(), SessionPerPr: c.Routing.Tmux.SessionPerPr,
	}
}

// newReceiver is the one place the webhook receiver is made, at start
// and on every Reload: cfg's routing (authorization, keywords,
// repositories, events) behind deps (the queue's sink, the log, the
// clock).
func newReceiver(cfg Config, deps ingress.ReceiverDeps) (*ingress.Receiver, error) {
	recv, err := ingress.NewReceiver(IngressConfig(cfg), deps)
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	return recv, nil
}

// currentReceiver makes r the receiver in force and serves whichever is
// (Reload swaps it).
func currentReceiver(cur *atomic.Pointer[ingress.Receiver], r *ingress.Receiver) http.Handler {
	cur.Store(r)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		cur.Load().ServeHTTP(w, req)
	})
}
