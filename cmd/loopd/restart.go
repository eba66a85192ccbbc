package main

import (
	"fmt"
	"log/slog"
	"os"
	"slices"
	"syscall"

	"github.com/theloop-dev/theloop/plugin/install"
)

// A restart an operator asked for (POST /restart, `loopctl daemon
// restart`): once Run has stopped gracefully and every deferred clean-up
// has run, loopd executes itself again with the same arguments — the same
// process, so systemd keeps its main PID, and the executable as it is on
// disk now, so a newly installed loopd takes over. With an upgrade the new
// process gets --upgrade-plugin and upgrades theloop's plugin for the
// installed harnesses before it serves.

// upgradePluginFlag is `loopd run`'s hidden flag for it.
const upgradePluginFlag = "upgrade-plugin"

// restartError is runDaemon's answer when a restart was asked for.
type restartError struct{ withUpgrade bool }

func (e *restartError) Error() string { return "restart requested" }

// restartArgv is args for the restarted process: --upgrade-plugin set
// exactly when withUpgrade.
func restartArgv(args []string, withUpgrade bool) []string {
	out := slices.DeleteFunc(slices.Clone(args), func(a string) bool {
		return a == "--"+upgradePluginFlag || a == "-"+upgradePluginFlag
	})
	if withUpgrade {
		out = append(out, "--"+upgradePluginFlag)
	}
	return out
}

// restart executes loopd again; it returns only when that failed.
func restart(e *env, args []string, withUpgrade bool) int {
	if e.Exec == nil {
		fmt.Fprintln(e.Stderr, "loopd: restart requested; exiting for the supervisor to start loopd again")
		return exitRestart
	}
	err := e.Exec(restartArgv(args, withUpgrade))
	fmt.Fprintf(e.Stderr, "loopd: restart failed: %v; exiting for the supervisor to start loopd again\n", err)
	return exitRestart
}

// execSelf replaces the process with this executable as it is on disk now
// (os.Executable drops Linux's " (deleted)" when the file was replaced).
func execSelf(argv []string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return syscall.Exec(exe, argv, os.Environ())
}

// upgradePlugins re-runs the plugin's installation for every harness it is
// installed for at user scope, logging what changed.
func upgradePlugins(e *env, logger *slog.Logger) ([]string, error) {
	results, err := install.Upgrade(install.Options{Env: &install.Env{Getenv: e.Getenv, Getwd: e.Getwd, HomeDir: e.HomeDir}})
	var changes []string
	for _, r := range results {
		for _, line := range r.Report {
			changes = append(changes, r.Harness+": "+line)
		}
	}
	if len(results) == 0 {
		changes = append(changes, "theloop's plugin is installed for no harness at user scope; nothing to upgrade (loopctl install)")
	}
	for _, c := range changes {
		logger.Info("plugin upgrade", "change", c)
	}
	if err != nil {
		logger.Error("plugin upgrade failed", "error", err.Error())
	}
	return changes, err
}
