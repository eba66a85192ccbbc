package install

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/plugin"
	"github.com/theloop-dev/theloop/run"
)

// A project-scope install writes files a team commits. What it writes there
// must hold in a teammate's checkout: no path into the installer's home,
// no reference to files only the installer has. So the committed file
// carries the gate alone, as a command the harness finds on PATH
// ("loop-gate claude") or a path relative to the project
// ("$CLAUDE_PROJECT_DIR"/bin/loop-gate claude). What is per person (Claude
// Code's plugin with the commands and the skill, the Codex plugin, the
// Gemini extension) lives in the home directory and is said to live there.

// projectCommand is the loop-gate command line for a committed file in the
// repository at root. existing is the command an earlier install wrote
// ("" when none). A program under the installer's home is refused when
// asked for (exit 2), and replaced by the PATH name when an earlier install
// left one, saying so.
func (o *Options) projectCommand(root, existing string) (string, error) {
	home, _ := o.Env.HomeDir()
	program := gateBinary
	switch {
	case o.CommandSet:
		program = o.Command
	case existing != "":
		program = plugin.GateInvocation(strings.TrimSpace(existing))
		if p, ok := strings.CutSuffix(program, " "+o.Harness); ok {
			program = p
		} else {
			program = gateProgram(existing)
		}
	}
	unquoted := plugin.CommandProgram(program + " x")
	if !filepath.IsAbs(unquoted) {
		return plugin.WithCrashGuard(shellQuoteIfBare(program) + " " + o.Harness), nil
	}
	if rel, ok := within(root, unquoted); ok {
		// The variable the harness sets, in a hook's environment, to the
		// project's root ("" when it has none we rely on).
		v := o.desc().Gate.ProjectDirVar
		if v == "" {
			return "", failWith(exitRefused, "loopctl install: %s runs hooks from a directory theloop cannot name in %s's hook file; put loop-gate on PATH (the default, \"loop-gate %s\") instead of %s", harnessTitle(o.Harness), harnessTitle(o.Harness), o.Harness, unquoted)
		}
		if o.desc().Gate.ProjectDirInText {
			// Gemini replaces $GEMINI_PROJECT_DIR in the command text with the
			// directory, shell-quoted by itself: no quotes around it.
			return plugin.WithCrashGuard("$" + v + "/" + shellQuote(filepath.ToSlash(rel)) + " " + o.Harness), nil
		}
		// Claude Code sets $CLAUDE_PROJECT_DIR in the hook's environment.
		return plugin.WithCrashGuard(`"$` + v + `"/` + shellQuote(filepath.ToSlash(rel)) + " " + o.Harness), nil
	}
	if home != "" {
		if _, under := within(home, unquoted); under {
			if o.CommandSet {
				return "", failWith(exitRefused, "loopctl install: --command %s is in your home directory; --scope project writes a file your team commits, where that path does not hold in a teammate's checkout. Put loop-gate on PATH (the default) or inside the repository", unquoted)
			}
			fmt.Fprintf(o.IO.ErrOut, "note: the hook ran %s, a path in your home directory that a teammate's checkout does not have; it now runs %q from PATH\n", unquoted, gateBinary)
			return hookCommand(gateBinary, o.Harness), nil
		}
	}
	return plugin.WithCrashGuard(shellQuoteIfBare(program) + " " + o.Harness), nil
}

// shellQuoteIfBare quotes a program as written by the user (unquoted) and
// keeps one that is already quoted.
func shellQuoteIfBare(p string) string {
	if p != "" && (p[0] == '\'' || p[0] == '"') {
		return p
	}
	return shellQuote(p)
}

// within reports whether path is base or below it, and the relative path.
func within(base, path string) (string, bool) {
	rel, err := filepath.Rel(filepath.Clean(base), filepath.Clean(path))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}

// repoRoot is the repository of a project-scope settings path
// (<root>/.claude/settings.json and the like).
func repoRootOf(settings string) string { return filepath.Dir(filepath.Dir(settings)) }

// runInstallClaudeProject writes the Stop gate into the project's
// .claude/settings.json as a command that travels, and takes out what an
// earlier install put there that does not (the theloop marketplace entry,
// which names a directory in the installer's home, and the plugin it
// enabled).
func runInstallClaudeProject(opts *Options) error {
	path, err := opts.settingsPath()
	if err != nil {
		return err
	}
	root := repoRootOf(path)
	old, err := os.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return failWith(exitFailed, "loopctl install: reading %s: %v", path, err)
	}
	// The plugin's entries go first: they name the installer's home.
	stripped, pluginChanges, err := uninstallClaudePluginEntries(old)
	if err != nil {
		return failWith(exitFailed, "loopctl install: %s: %v; fix the file by hand (nothing was written)", path, err)
	}
	var cmdErr error
	want := func(existing string) string {
		c, err := opts.projectCommand(root, existing)
		if err != nil {
			cmdErr = err
		}
		return c
	}
	entry := func(cmd string) *object { return newObject("type", "command", "command", cmd) }
	updated, command, changes, err := installGroupedHook(stripped, "Stop", want, entry)
	if cmdErr != nil {
		return cmdErr
	}
	if err != nil {
		return failWith(exitFailed, "loopctl install: %s: %v; fix the file by hand (nothing was written)", path, err)
	}
	changes = append(pluginChanges, changes...)
	out := opts.IO.Out
	if len(changes) == 0 {
		fmt.Fprintf(out, "%s already runs %q as the Claude Code Stop hook; nothing to do\n", path, command)
	} else if opts.DryRun {
		from := path
		if !exists {
			from = "/dev/null"
		}
		io.WriteString(out, unifiedDiff(from, path, old, updated))
		fmt.Fprintf(out, "dry run: %s not written\n", path)
	} else {
		if err := writeFileAtomic(path, updated, false); err != nil {
			return failWith(exitFailed, "loopctl install: writing %s: %v (the file is unchanged)", path, err)
		}
		for _, c := range changes {
			fmt.Fprintf(out, "%s: %s\n", path, c)
		}
	}
	if enabledPython(updated) {
		fmt.Fprintf(opts.IO.ErrOut, "warning: %s also enables the Python the-loop's plugin (%s), whose /the-loop: commands run the Python CLI; disable it: claude plugin disable %s\n", path, pythonPluginID, pythonPluginID)
	}
	fmt.Fprintf(out, "%s holds only the gate, a command every checkout can run: commit it. The /the-loop: commands and the skill come with --scope user, whose plugin runs the gate too: in one checkout, use one of the two.\n", path)
	if opts.userPluginEnabled() {
		fmt.Fprintf(opts.IO.ErrOut, "warning: your user-scope install (the-loop@theloop in ~/.claude/settings.json) runs the gate too: Claude Code runs both, which count two attempts per stop and, past the third, undo each other's give-up until Claude Code's own cap of 9 blocks. Use one: loopctl uninstall --harness claude (user scope) here, or leave this repository's hook out.\n")
	}
	opts.warnGateOnPath(command)
	return nil
}

// userPluginEnabled reports whether the user's Claude Code settings enable
// theloop's plugin (whose Stop hook is the gate).
func (o *Options) userPluginEnabled() bool {
	user := *o
	user.Scope = scopeUser
	path, err := user.settingsPath()
	if err != nil {
		return false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	root, err := parseObject(b, "")
	if err != nil {
		return false
	}
	enabled, err := root.object("enabledPlugins", "")
	if err != nil {
		return false
	}
	v, ok := enabled.vals[plugin.ID]
	return ok && sameJSON(v, json.RawMessage("true"))
}

// warnGateOnPath warns when the hook runs loop-gate by name and no
// loop-gate is on PATH.
func (o *Options) warnGateOnPath(command string) {
	if command == hookCommand(gateBinary, o.Harness) && !o.onPath(gateBinary) {
		fmt.Fprintf(o.IO.ErrOut, "warning: %s is not on PATH; install it (go install github.com/theloop-dev/theloop/cmd/loop-gate@latest) — every teammate needs it on PATH too\n", gateBinary)
	}
}

// uninstallClaudePluginEntries removes the theloop marketplace entry and the
// plugin's enabledPlugins key (and a container they leave empty), keeping
// every hook.
func uninstallClaudePluginEntries(old []byte) ([]byte, []string, error) {
	root, err := parseObject(old, "the file")
	if err != nil {
		return nil, nil, err
	}
	var changes []string
	for _, k := range []struct{ outer, key string }{{"extraKnownMarketplaces", plugin.MarketplaceName}, {"enabledPlugins", plugin.ID}} {
		inner, err := root.object(k.outer, k.outer)
		if err != nil {
			return nil, nil, err
		}
		if !inner.del(k.key) {
			continue
		}
		changes = append(changes, fmt.Sprintf("removed %s[%q] (it named a directory in the installer's home)", k.outer, k.key))
		if len(inner.keys) == 0 {
			root.del(k.outer)
		} else {
			root.set(k.outer, inner)
		}
	}
	if len(changes) == 0 {
		return old, nil, nil
	}
	return root.render(old), changes, nil
}

// isEmptyObject reports whether data is a JSON object with nothing of a
// user's in it: no keys, or only Cursor's "version" (which install writes
// with the hooks).
func isEmptyObject(data []byte) bool {
	o, err := parseObject(data, "")
	if err != nil {
		return false
	}
	for _, k := range o.keys {
		if k != "version" {
			return false
		}
	}
	return true
}

// writeOrRemoveProjectFile writes what uninstall leaves of a project file;
// when that is an empty object and git does not track the file, the file
// goes, with the directories install created for it that are now empty
// (up to the repository's root): the checkout is as it was before install.
// It reports whether the file was removed.
func writeOrRemoveProjectFile(path, root string, updated []byte) (removed bool, err error) {
	if !isEmptyObject(updated) || tracked(root, path) {
		return false, writeFileAtomic(path, updated, false)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	removeEmptyDirs(filepath.Dir(path), root)
	return true, nil
}

// removeEmptyDirs removes dir and its parents while they are empty, stopping
// at root (never removed).
func removeEmptyDirs(dir, root string) {
	for d := dir; ; d = filepath.Dir(d) {
		if _, ok := within(root, d); !ok || filepath.Clean(d) == filepath.Clean(root) {
			return
		}
		if os.Remove(d) != nil { // not empty, or not ours to remove
			return
		}
	}
}

// tracked reports whether git tracks path in the repository at root. When
// git cannot answer, the file counts as tracked: it is then rewritten, never
// removed.
func tracked(root, path string) bool {
	rel, ok := within(root, path)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := run.Exec{}.Run(ctx, run.Cmd{Name: "git", Args: []string{"-C", root, "ls-files", "--", filepath.ToSlash(rel)}})
	if err != nil {
		return true
	}
	return strings.TrimSpace(string(res.Stdout)) != ""
}

// writeUninstalled writes what uninstall leaves of a hook file: at project
// scope an empty, untracked file is removed instead (writeOrRemoveProjectFile).
func writeUninstalled(opts *Options, path string, updated []byte) error {
	var err error
	if opts.Scope == scopeProject {
		_, err = writeOrRemoveProjectFile(path, repoRootOf(path), updated)
	} else {
		err = writeFileAtomic(path, updated, true)
	}
	if err != nil {
		return failWith(exitFailed, "loopctl uninstall: writing %s: %v (the file is unchanged)", path, err)
	}
	return nil
}

// reportRemovedFile says so when uninstall removed the file it emptied.
func reportRemovedFile(opts *Options, path string, updated []byte) {
	if opts.Scope != scopeProject {
		return
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) && isEmptyObject(updated) {
		fmt.Fprintf(opts.IO.Out, "removed %s (install had created it; nothing else was in it)\n", path)
	}
}
