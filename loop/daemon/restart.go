package daemon

import (
	"errors"
	"os"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop/api"
)

// An operator's restart (POST /restart, `loopctl daemon restart`): Run
// stops as it does on SIGTERM — no respawn, the webhook listener closed,
// the dispatcher drained, the state root unlocked — and returns a
// *RestartError; the binary (cmd/loopd) then executes itself again in the
// same process, so systemd keeps its main PID and a binary replaced on disk
// takes over. With an upgrade, the new process upgrades theloop's plugin
// before it serves anything (cmd/loopd: --upgrade-plugin) and reports what
// changed (NotePluginUpgrade; docs/daemon.md §1).

// ErrRestartRequested is what a *RestartError is (errors.Is).
var ErrRestartRequested = errors.New("daemon: restart requested")

// RestartError is Run's answer when an operator asked for a restart.
type RestartError struct {
	// WithUpgrade: upgrade the plugin before serving again.
	WithUpgrade bool
	// Actor is who asked.
	Actor string
}

func (e *RestartError) Error() string {
	s := "daemon: restart requested by " + e.Actor
	if e.WithUpgrade {
		s += " (with the plugin's upgrade)"
	}
	return s
}

// Unwrap makes errors.Is(err, ErrRestartRequested) hold.
func (e *RestartError) Unwrap() error { return ErrRestartRequested }

// restarts carries an operator's restart to Run, and what a restart with
// upgrade did before this start (NotePluginUpgrade).
type restarts struct {
	ch chan *RestartError

	mu       sync.Mutex
	upgraded bool
	upgrade  []string
	err      string
}

func newRestarts() *restarts { return &restarts{ch: make(chan *RestartError, 1)} }

// request records the request (daemon.* is in the audit log) and wakes
// Run. A second request while the first is under way changes nothing but
// is answered the same.
func (r *restarts) request(emit emitFunc, started time.Time, actor string, withUpgrade bool) api.RestartResult {
	emit("daemon.restart_requested", graph.LevelInfo, graph.Field{Key: "actor", Value: actor}, graph.Field{Key: "with_upgrade", Value: withUpgrade})
	select {
	case r.ch <- &RestartError{WithUpgrade: withUpgrade, Actor: actor}:
	default:
	}
	return api.RestartResult{Restarting: true, WithUpgrade: withUpgrade, Actor: actor, PID: os.Getpid(), StartedAt: started.UTC()}
}

// NotePluginUpgrade records what upgrading the plugin changed (or why it
// failed) before this start, for the event log (daemon.plugin_upgraded,
// once Run has its log) and for status. Call it before Run.
func (d *Daemon) NotePluginUpgrade(changes []string, err error) {
	r := d.restarts
	r.mu.Lock()
	defer r.mu.Unlock()
	r.upgrade = append([]string{}, changes...)
	if err != nil {
		r.err = err.Error()
	}
	r.upgraded = true
}

// report emits what NotePluginUpgrade recorded.
func (r *restarts) report(emit emitFunc, logf func(string, ...any)) {
	r.mu.Lock()
	done, changes, perr := r.upgraded, r.upgrade, r.err
	r.mu.Unlock()
	if !done {
		return
	}
	if perr != "" {
		emit("daemon.plugin_upgrade_failed", graph.LevelError, graph.Field{Key: "error", Value: perr}, graph.Field{Key: "changes", Value: changes})
		logf("upgrading the plugin failed: %s", perr)
		return
	}
	emit("daemon.plugin_upgraded", graph.LevelInfo, graph.Field{Key: "changes", Value: changes})
	logf("plugin upgraded before start: %d change(s)", len(changes))
}

// status is status's view of it.
func (r *restarts) status(st *api.Status) {
	r.mu.Lock()
	defer r.mu.Unlock()
	st.PluginUpgrade = append([]string(nil), r.upgrade...)
	st.PluginUpgradeError = r.err
}
