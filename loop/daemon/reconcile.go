package daemon

import (
	"context"
	"time"
)

// reconcileLoop runs the reconcile pass at start and every
// ReconcileInterval, so a webhook missed while loopd was down is still seen
// (GitHub does not redeliver).
//
// TODO(ingress poller): the pass itself is the ingress poller's reconcile
// (branch ingress); until it lands this loop only ticks.
func (d *Daemon) reconcileLoop(ctx context.Context) {
	if d.cfg.ReconcileInterval < 0 {
		return
	}
	d.reconcile(ctx)
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
			d.reconcile(ctx)
		}
	}
}

func (d *Daemon) reconcile(ctx context.Context) {}
