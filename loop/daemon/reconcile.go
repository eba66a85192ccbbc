package daemon

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/workitem"
)

// reconcileLoop runs the ingress poller's reconcile pass at start and every
// ReconcileInterval, so a webhook missed while loopd was down is still seen
// (GitHub does not redeliver): new comments and labels on the configured
// polling sources (else the repositories webhooks are accepted from), and
// the closure of every tracked work item with a live session, and the pull
// requests and checks of those items (for the dashboard).
// What it finds goes through the same Sink (and dedup) as webhooks.
func (d *Daemon) reconcileLoop(ctx context.Context) {
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
		GitHub: d.integ, Sink: d.Sink(), Router: d.recv.Router(), Store: d.ctl.ps,
		Tracked: d.trackedRefs, Log: d.sink, Clock: d.deps.Clock,
		// The PR/CI state it reads feeds the dashboard the way routed
		// webhooks do (prci.go), not the queue: it is state, not an event
		// of the work item.
		Observe: d.notePRCI,
	})
	if err != nil {
		d.emit("reconcile.disabled", graph.LevelWarning, graph.Field{Key: "error", Value: err.Error()})
		return
	}
	var repos []string
	for _, src := range pc.Sources {
		repos = append(repos, src.Repos...)
	}
	rd := &redeliverer{integ: d.integ, store: d.q, repos: repos, hookID: d.cfg.WebhookHookID(), path: d.cfg.Webhook.Path,
		record: d.emit, now: d.deps.Clock.Now, reported: map[string]bool{}} // redeliver.go
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
func (d *Daemon) reconcile(ctx context.Context, p *ingress.Poller, rd *redeliverer) {
	if rst := rd.pass(ctx); rst.Calls > 0 {
		d.emit("reconcile.redelivery_done", graph.LevelDebug, graph.Field{Key: "stats", Value: rst})
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
func (d *Daemon) trackedRefs(context.Context) ([]workitem.Ref, error) {
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
