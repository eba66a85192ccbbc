package daemon

import (
	"context"
	"errors"
	"os"

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

// requestRestart records the request (daemon.* is in the audit log) and
// wakes Run. A second request while the first is under way changes
// nothing but is answered the same.
func (d *Daemon) requestRestart(_ context.Context, actor string, withUpgrade bool) (api.RestartResult, error) {
	if d.restartCh == nil {
		return api.RestartResult{}, errors.New("daemon: not running")
	}
	d.emit("daemon.restart_requested", graph.LevelInfo, graph.Field{Key: "actor", Value: actor}, graph.Field{Key: "with_upgrade", Value: withUpgrade})
	select {
	case d.restartCh <- &RestartError{WithUpgrade: withUpgrade, Actor: actor}:
	default:
	}
	return api.RestartResult{Restarting: true, WithUpgrade: withUpgrade, Actor: actor, PID: os.Getpid(), StartedAt: d.svc.started.UTC()}, nil
}

// NotePluginUpgrade records what upgrading the plugin changed (or why it
// failed) before this start, for the event log (daemon.plugin_upgraded,
// once Run has its log) and for status. Call it before Run.
func (d *Daemon) NotePluginUpgrade(changes []string, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pluginUpgrade = append([]string{}, changes...)
	if err != nil {
		d.pluginUpgradeErr = err.Error()
	}
	d.pluginUpgraded = true
}

// reportPluginUpgrade emits what NotePluginUpgrade recorded.
func (d *Daemon) reportPluginUpgrade() {
	d.mu.Lock()
	done, changes, perr := d.pluginUpgraded, d.pluginUpgrade, d.pluginUpgradeErr
	d.mu.Unlock()
	if !done {
		return
	}
	if perr != "" {
		d.emit("daemon.plugin_upgrade_failed", graph.LevelError, graph.Field{Key: "error", Value: perr}, graph.Field{Key: "changes", Value: changes})
		d.logf("upgrading the plugin failed: %s", perr)
		return
	}
	d.emit("daemon.plugin_upgraded", graph.LevelInfo, graph.Field{Key: "changes", Value: changes})
	d.logf("plugin upgraded before start: %d change(s)", len(changes))
}

// pluginUpgradeStatus is status's view of it.
func (d *Daemon) pluginUpgradeStatus(st *api.Status) {
	d.mu.Lock()
	defer d.mu.Unlock()
	st.PluginUpgrade = append([]string(nil), d.pluginUpgrade...)
	st.PluginUpgradeError = d.pluginUpgradeErr
}
