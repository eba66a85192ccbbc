package daemon

import (
	"context"
	"fmt"
	"net/http"
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

	recMu     sync.Mutex
	recCtx    context.Context
	recCancel context.CancelFunc
	recDone   chan struct{}
}

func (d *Daemon) reload() *reloadState { return &d.svc.rl }

// receiverHandler serves whichever receiver is current.
func (d *Daemon) receiverHandler(r *ingress.Receiver) http.Handler {
	rs := d.reload()
	rs.recv.Store(r)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rs.recv.Load().ServeHTTP(w, req)
	})
}

// startReconcile runs reconcileLoop until stopReconcile (or ctx ends).
func (d *Daemon) startReconcile(ctx context.Context) {
	rs := d.reload()
	rs.recMu.Lock()
	defer rs.recMu.Unlock()
	rs.recCtx = ctx
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	rs.recCancel, rs.recDone = cancel, done
	go func() { defer close(done); d.reconcileLoop(rctx) }()
}

func (d *Daemon) stopReconcile() {
	rs := d.reload()
	rs.recMu.Lock()
	defer rs.recMu.Unlock()
	if rs.recCancel != nil {
		rs.recCancel()
		<-rs.recDone
		rs.recCancel = nil
	}
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
	df := diffConfig(&d.cfg, &next)
	if len(df.keys) > 0 {
		if err := d.applyReload(df, &next); err != nil {
			return ReloadResult{}, err
		}
	}
	applied := df.Applied
	if applied == nil {
		applied = []string{}
	}
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
	rs := d.reload()
	if st.reconcile {
		d.stopReconcile()
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
		rs.recMu.Lock()
		ctx := rs.recCtx
		rs.recMu.Unlock()
		if ctx != nil && ctx.Err() == nil {
			d.startReconcile(ctx)
		}
	}
	return nil
}
