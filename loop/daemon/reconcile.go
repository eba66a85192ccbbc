package daemon

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// reconciler runs the reconcile pass (reconcileLoop) in the background,
// restarted by Reload with the policy in force.
type reconciler struct {
	// cfg is the configuration in force; a pass reads it when it starts.
	cfg   *Config
	integ graph.Integrations
	// sink is the queue, observed (Daemon.Sink); router the receiver's in
	// force.
	sink   ingress.Sink
	router func() *ingress.Router
	store  *ingress.PortableStore
	reg    *sessions.Registry
	// redeliveries is where the redeliverer keeps what it asked for.
	redeliveries intentStore
	log          graph.Sink
	clock        graph.Clock
	// note sees the PR/CI state the poller reads (prci.go).
	note func(*ingress.Event)
	emit func(name string, level graph.Level, fields ...graph.Field)

	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs reconcileLoop until stop (or ctx ends).
func (d *reconciler) start(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ctx = ctx
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	d.cancel, d.done = cancel, done
	go func() { defer close(done); d.reconcileLoop(rctx) }()
}

// stop ends the loop and waits for it.
func (d *reconciler) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel != nil {
		d.cancel()
		<-d.done
		d.cancel = nil
	}
}

// restart starts the loop again on the context start was given, unless
// that has ended.
func (d *reconciler) restart() {
	d.mu.Lock()
	ctx := d.ctx
	d.mu.Unlock()
	if ctx != nil && ctx.Err() == nil {
		d.start(ctx)
	}
}

// reconcileLoop runs the ingress poller's reconcile pass at start and every
// ReconcileInterval, so a webhook missed while loopd was down is still seen
// (GitHub does not redeliver): new comments and labels on the configured
// polling sources (else the repositories webhooks are accepted from), and
// the closure of every tracked work item with a live session, and the pull
// requests and checks of those items (for the dashboard).
// What it finds goes through the same Sink (and dedup) as webhooks.
func (d *reconciler) reconcileLoop(ctx context.Context) {
	if d.cfg.ReconcileInterval < 0 {
		return
	}
	pc := d.cfg.PollerConfig()
	pc.StateRoot = d.cfg.StateRoot
	if len(pc.Sources) == 0 {
		// A webhook-only deployment still reconciles the repositories it
		// accepts webhooks from (patterns like owner/* cannot be listed).
		var repos []string
		for _, r := range d.cfg.Repositories {
			if !strings.Contains(r, "*") {
				repos = append(repos, r)
			}
		}
		if len(repos) > 0 {
			pc.Sources = []ingress.PollSource{{Repos: repos}}
		}
	}
	p, err := ingress.NewPoller(pc, ingress.PollerDeps{
		GitHub: d.integ, Sink: d.sink, Router: d.router(), Store: d.store,
		Tracked: d.trackedRefs, Log: d.log, Clock: d.clock,
		// The PR/CI state it reads feeds the dashboard the way routed
		// webhooks do (prci.go), not the queue: it is state, not an event
		// of the work item.
		Observe: d.note,
	})
	if err != nil {
		d.emit("reconcile.disabled", graph.LevelWarning, graph.Field{Key: "error", Value: err.Error()})
		return
	}
	var repos []string
	for _, src := range pc.Sources {
		repos = append(repos, src.Repos...)
	}
	gh := d.cfg.Integrations.GitHub
	rd := &redeliverer{integ: d.integ, store: d.redeliveries, repos: repos, hookID: d.cfg.WebhookHookID(), path: d.cfg.Webhook.Path, app: gh != nil && gh.App != nil,
		record: d.emit, now: d.clock.Now, reported: map[string]bool{}, backoff: max(d.cfg.ReconcileInterval, time.Second)} // redeliver.go
	if rd.path == "" {
		rd.path = DefaultWebhookPath
	}
	d.reconcile(ctx, p, rd)
	if d.cfg.ReconcileInterval == 0 {
		return
	}
	t := time.NewTicker(d.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.reconcile(ctx, p, rd)
		}
	}
}

// reconcile asks GitHub to redeliver what failed (redeliver.go), then runs
// the poller's pass.
func (d *reconciler) reconcile(ctx context.Context, p *ingress.Poller, rd *redeliverer) {
	if rst := rd.pass(ctx); rst.Calls > 0 {
		d.emit("reconcile.redelivery_done", graph.LevelDebug, graph.Field{Key: "stats", Value: rst})
	}
	for _, repo := range rd.repos {
		// Where failed deliveries cannot be redelivered, the poller reads
		// the repository's activity itself (ingress/poll_repo.go).
		p.WatchRepository(repo, !rd.covers(repo))
	}
	st, err := p.Reconcile(ctx)
	if errors.Is(err, ingress.ErrBackingOff) {
		// The back-off was logged once, when it began (poll.backoff): a
		// tick inside it is no new failure.
		d.emit("reconcile.deferred", graph.LevelDebug, graph.Field{Key: "error", Value: err.Error()})
		return
	}
	if err != nil && ctx.Err() == nil {
		d.emit("reconcile.failed", graph.LevelWarning, graph.Field{Key: "error", Value: err.Error()})
		return
	}
	d.emit("reconcile.done", graph.LevelDebug, graph.Field{Key: "stats", Value: st})
}

// trackedRefs are the work items with a live session.
func (d *reconciler) trackedRefs(context.Context) ([]workitem.Ref, error) {
	recs, _ := d.reg.List()
	var out []workitem.Ref
	for _, r := range recs {
		if !r.Status.Live() {
			continue
		}
		if ref, err := r.Item.Canonical(); err == nil {
			out = append(out, ref)
		}
	}
	return out, nil
}
