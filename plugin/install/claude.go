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

	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/plugin"
	"github.com/theloop-dev/theloop/run"
)

// pythonPluginID is the Python the-loop's plugin, enabled from its GitHub
// marketplace. Its commands share our names (/the-loop:…) but run the
// Python CLI.
const pythonPluginID = "the-loop@the-loop"

// Install installs theloop for the harness: for Claude Code the plugin
// (local marketplace + settings), whose hooks carry the Stop gate; for
// Cursor the stop hook and, in a project, the rule file; for the Codex CLI
// and the Gemini CLI the hook in their hook file and the prose in their
// packaging (agentcli.go).
func Install(opts *Options) error {
	layout := opts.desc().Install
	switch layout.Style {
	case harness.InstallPackaged:
		return installAgentCLI(opts)
	case harness.InstallPlugin:
		if opts.Scope == scopeProject {
			return runInstallClaudeProject(opts)
		}
		return runInstallClaudePlugin(opts)
	}
	if err := runInstallStopHook(opts); err != nil {
		return err
	}
	if !layout.Rule {
		return nil
	}
	return installCursorRule(opts)
}

// marketplaceDir is where the plugin's local marketplace lives.
func (o *Options) marketplaceDir() (string, error) {
	home, err := o.Env.HomeDir()
	if err != nil || home == "" {
		return "", failWith(exitFailed, "loopctl install: no home directory for the plugin's files (%v); set HOME", err)
	}
	return plugin.MarketplaceDir(o.Env.Getenv, home), nil
}

func runInstallClaudePlugin(opts *Options) error {
	path, err := opts.settingsPath()
	if err != nil {
		return err
	}
	dir, err := opts.marketplaceDir()
	if err != nil {
		return err
	}
	old, err := os.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return failWith(exitFailed, "loopctl install: reading %s: %v", path, err)
	}
	updated, moved, changes, err := installClaudePlugin(old, dir)
	if err != nil {
		return failWith(exitFailed, "loopctl install: %s: %v; fix the file by hand (nothing was written)", path, err)
	}

	// The Stop hook's program: the one asked for, else the one the
	// settings' old Stop hook ran, else the one already installed.
	program := plugin.GateProgram
	switch {
	case opts.CommandSet:
		program = opts.Command
	case moved != "":
		program = moved
	default:
		if p := plugin.InstalledGateProgram(dir); p != "" {
			program = p
		}
	}
	tree, err := plugin.Marketplace(plugin.Options{GateProgram: program})
	if err != nil {
		return failWith(exitRefused, "loopctl install: %v", err)
	}
	plan, err := plugin.Plan(dir, tree)
	if err != nil {
		return failWith(exitFailed, "loopctl install: %v", err)
	}

	out := opts.IO.Out
	if opts.DryRun {
		for _, c := range plan {
			fmt.Fprintf(out, "%s %s\n", c.Op, filepath.Join(dir, filepath.FromSlash(c.Path)))
		}
		if len(changes) > 0 {
			from := path
			if !exists {
				from = "/dev/null"
			}
			io.WriteString(out, unifiedDiff(from, path, old, updated))
		}
		fmt.Fprintln(out, "dry run: nothing written")
		return nil
	}

	if len(plan) > 0 {
		if _, err := plugin.Sync(dir, tree); err != nil {
			return failWith(exitFailed, "loopctl install: %v", err)
		}
		fmt.Fprintf(out, "%s: the-loop plugin %s (%d file(s) written or removed; Stop hook %q)\n", dir, pluginVersion(tree), len(plan), tree.StopCommand())
	}
	if len(changes) > 0 {
		if err := writeFileAtomic(path, updated, opts.Scope == scopeUser); err != nil {
			return failWith(exitFailed, "loopctl install: writing %s: %v (the file is unchanged)", path, err)
		}
		for _, c := range changes {
			fmt.Fprintf(out, "%s: %s\n", path, c)
		}
	}
	if len(plan) == 0 && len(changes) == 0 {
		fmt.Fprintf(out, "the-loop plugin %s is installed in %s and enabled in %s; nothing to do\n", pluginVersion(tree), dir, path)
	}
	if enabledPython(updated) {
		fmt.Fprintf(opts.IO.ErrOut, "warning: %s also enables the Python the-loop's plugin (%s), whose /the-loop: commands run the Python CLI; disable it: claude plugin disable %s\n", path, pythonPluginID, pythonPluginID)
	}
	opts.registerWithClaude(dir, len(plan) > 0)
	if wd, err := opts.Env.Getwd(); err == nil {
		if root, err := gitRoot(wd); err == nil {
			if b, err := os.ReadFile(filepath.Join(root, ".claude", "settings.json")); err == nil && strings.Contains(string(b), gateBinary) {
				if o, err := parseObject(b, ""); err == nil {
					if gates, _ := removeGateHooks(o, "Stop", true); len(gates) > 0 {
						fmt.Fprintf(opts.IO.ErrOut, "warning: %s (this repository) runs the gate as a Stop hook too: with the plugin, Claude Code runs both, counting two attempts per stop, and past the third they undo each other's give-up until Claude Code's own cap of 9 blocks. Use one of the two.\n", filepath.Join(root, ".claude", "settings.json"))
					}
				}
			}
		}
	}
	if !filepath.IsAbs(plugin.CommandProgram(tree.StopCommand())) && !opts.onPath(plugin.CommandProgram(tree.StopCommand())) {
		fmt.Fprintf(opts.IO.ErrOut, "warning: %s is not on PATH; install it (go install github.com/theloop-dev/theloop/cmd/loop-gate@latest) or run loopctl install --command /absolute/path/to/loop-gate\n", gateBinary)
	}
	return nil
}

func pluginVersion(tree plugin.Tree) string {
	var m struct {
		Version string `json:"version"`
	}
	_ = json.Unmarshal(tree[plugin.Name+"/"+plugin.ManifestPath], &m)
	return m.Version
}

// registerWithClaude tells Claude Code about the marketplace and installs
// (or upgrades) the plugin now, when the claude CLI is on PATH. Without it
// the settings alone suffice: Claude Code registers the marketplace and
// installs the plugin on its next starts. Failures are warnings.
func (o *Options) registerWithClaude(dir string, upgraded bool) {
	claude := o.lookPath(o.desc().Binary)
	if claude == "" {
		fmt.Fprintln(o.IO.Out, "Claude Code picks the plugin up from the settings when a session starts; restart running sessions.")
		return
	}
	steps := [][]string{
		{"plugin", "marketplace", "add", dir, "--scope", o.Scope},
		{"plugin", "install", plugin.ID, "--scope", o.Scope},
	}
	if upgraded {
		steps = append(steps, []string{"plugin", "update", plugin.ID, "--scope", o.Scope})
	}
	for _, args := range steps {
		if err := o.runClaude(claude, args); err != nil {
			fmt.Fprintf(o.IO.ErrOut, "warning: claude %s: %v (the settings are written; Claude Code installs the plugin when a session starts)\n", strings.Join(args, " "), err)
			return
		}
	}
	fmt.Fprintf(o.IO.Out, "claude: %s installed (%s scope); restart running sessions to load it.\n", plugin.ID, o.Scope)
}

// runClaude runs one step of the claude CLI (at most 60 s) with the
// operator's home and Claude config directory, in the project for --scope
// project.
func (o *Options) runClaude(claude string, args []string) error {
	home, _ := o.Env.HomeDir()
	cmdDir := ""
	if o.Scope == scopeProject {
		cmdDir = filepath.Dir(filepath.Dir(mustSettingsPath(o)))
	}
	runner := o.Runner
	if runner == nil {
		runner = run.Exec{Environ: run.InheritEnv} // the user's own CLI, installing for the user
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := runner.Run(ctx, run.Cmd{Name: claude, Args: args, Dir: cmdDir,
		Env: []string{"HOME=" + home, "CLAUDE_CONFIG_DIR=" + filepath.Join(home, ".claude")}})
	return err
}

func mustSettingsPath(o *Options) string {
	p, _ := o.settingsPath()
	return p
}

// lookPath finds an executable in the Factory's PATH ("" when absent).
func (o *Options) lookPath(name string) string {
	for _, dir := range filepath.SplitList(o.Env.Getenv("PATH")) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// enabledPython reports whether settings enable the Python the-loop's
// plugin.
func enabledPython(settings []byte) bool {
	var s struct {
		EnabledPlugins map[string]any `json:"enabledPlugins"`
	}
	_ = json.Unmarshal(settings, &s)
	v, _ := s.EnabledPlugins[pythonPluginID].(bool)
	return v
}

// --- the settings -------------------------------------------------------------

// marketplaceSource is the extraKnownMarketplaces entry for theloop's local
// marketplace.
func marketplaceSource(dir string) *object {
	return newObject("source", newObject("source", "directory", "path", dir))
}

// installClaudePlugin registers the local marketplace
// (extraKnownMarketplaces.theloop, a directory source), enables the plugin
// (enabledPlugins["the-loop@theloop"]), and removes loop-gate entries from
// hooks.Stop, since the plugin's own hooks now run the gate (two would count
// two attempts per stop). moved is the program the first removed entry ran.
// Everything else in the file is kept byte for byte.
func installClaudePlugin(old []byte, dir string) (updated []byte, moved string, changes []string, err error) {
	root, err := parseObject(old, "the file")
	if err != nil {
		return nil, "", nil, err
	}
	mkts, err := root.object("extraKnownMarketplaces", "extraKnownMarketplaces")
	if err != nil {
		return nil, "", nil, err
	}
	want := marketplaceSource(dir)
	if cur, ok := mkts.vals[plugin.MarketplaceName]; !ok || !sameJSON(cur, want) {
		mkts.set(plugin.MarketplaceName, want)
		root.set("extraKnownMarketplaces", mkts)
		changes = append(changes, fmt.Sprintf("extraKnownMarketplaces.%s → directory %s", plugin.MarketplaceName, dir))
	}
	enabled, err := root.object("enabledPlugins", "enabledPlugins")
	if err != nil {
		return nil, "", nil, err
	}
	if cur, ok := enabled.vals[plugin.ID]; !ok || !sameJSON(cur, json.RawMessage("true")) {
		enabled.set(plugin.ID, json.RawMessage("true"))
		root.set("enabledPlugins", enabled)
		changes = append(changes, fmt.Sprintf("enabledPlugins[%q] = true", plugin.ID))
	}
	removed, err := removeGateHooks(root, "Stop", true)
	if err != nil {
		return nil, "", nil, err
	}
	for i, cmd := range removed {
		if i == 0 {
			moved = plugin.CommandProgram(cmd)
		}
		changes = append(changes, fmt.Sprintf("removed the Stop hook %q (the plugin runs the gate now)", plugin.GateInvocation(cmd)))
	}
	if len(changes) == 0 {
		return old, moved, nil, nil
	}
	return root.render(old), moved, changes, nil
}

// uninstallClaudePlugin undoes installClaudePlugin: the marketplace entry,
// the enabledPlugins key and any loop-gate Stop hook go; a container left
// empty by that goes too. dropEmpty also removes those two containers when
// they are already empty (the claude CLI leaves them so after its own
// uninstall).
func uninstallClaudePlugin(old []byte, dropEmpty bool) (updated []byte, changes []string, err error) {
	root, err := parseObject(old, "the file")
	if err != nil {
		return nil, nil, err
	}
	for _, k := range []struct{ outer, key string }{{"extraKnownMarketplaces", plugin.MarketplaceName}, {"enabledPlugins", plugin.ID}} {
		inner, err := root.object(k.outer, k.outer)
		if err != nil {
			return nil, nil, err
		}
		if _, present := root.vals[k.outer]; dropEmpty && present && len(inner.keys) == 0 {
			root.del(k.outer)
			changes = append(changes, fmt.Sprintf("removed the empty %s", k.outer))
			continue
		}
		if !inner.del(k.key) {
			continue
		}
		changes = append(changes, fmt.Sprintf("removed %s[%q]", k.outer, k.key))
		if len(inner.keys) == 0 {
			root.del(k.outer)
		} else {
			root.set(k.outer, inner)
		}
	}
	removed, err := removeGateHooks(root, "Stop", true)
	if err != nil {
		return nil, nil, err
	}
	for _, cmd := range removed {
		changes = append(changes, fmt.Sprintf("removed the Stop hook %q", plugin.GateInvocation(cmd)))
	}
	if len(changes) == 0 {
		return old, nil, nil
	}
	return root.render(old), changes, nil
}

// removeGateHooks removes loop-gate commands from hooks.<event>: in Claude
// Code's shape (grouped: [{"hooks":[{command}]}]) or Cursor's (flat:
// [{command}]). Groups and containers left empty are removed.
func removeGateHooks(root *object, event string, grouped bool) ([]string, error) {
	hooks, err := root.object("hooks", "hooks")
	if err != nil {
		return nil, err
	}
	if _, ok := hooks.vals[event]; !ok {
		return nil, nil
	}
	elems, err := hooks.array(event, "hooks."+event)
	if err != nil {
		return nil, err
	}
	var removed []string
	isGate := func(e any) (string, bool) {
		entry, err := parseObject(e.(json.RawMessage), "")
		cmd, ok := entry.str("command")
		return cmd, err == nil && ok && plugin.IsGateCommand(cmd)
	}
	var kept []any
	for _, e := range elems {
		if !grouped {
			if cmd, gate := isGate(e); gate {
				removed = append(removed, cmd)
				continue
			}
			kept = append(kept, e)
			continue
		}
		group, gerr := parseObject(e.(json.RawMessage), "")
		if gerr != nil {
			kept = append(kept, e) // not a matcher group: not ours to judge
			continue
		}
		entries, eerr := group.array("hooks", "")
		if eerr != nil {
			kept = append(kept, e)
			continue
		}
		var keptEntries []any
		for _, h := range entries {
			if cmd, gate := isGate(h); gate {
				removed = append(removed, cmd)
				continue
			}
			keptEntries = append(keptEntries, h)
		}
		switch {
		case len(keptEntries) == len(entries):
			kept = append(kept, e)
		case len(keptEntries) > 0:
			group.set("hooks", keptEntries)
			kept = append(kept, group)
		}
	}
	if len(removed) == 0 {
		return nil, nil
	}
	if len(kept) == 0 {
		hooks.del(event)
	} else {
		hooks.set(event, kept)
	}
	if len(hooks.keys) == 0 {
		root.del("hooks")
	} else {
		root.set("hooks", hooks)
	}
	return removed, nil
}

// del removes key; it reports whether the key was there.
func (o *object) del(key string) bool {
	if _, ok := o.vals[key]; !ok {
		return false
	}
	delete(o.vals, key)
	for i, k := range o.keys {
		if k == key {
			o.keys = append(o.keys[:i], o.keys[i+1:]...)
			break
		}
	}
	return true
}

// sameJSON compares a stored value with a wanted one, ignoring layout.
func sameJSON(have, want any) bool {
	a := canonicalJSON(have)
	return a != "" && a == canonicalJSON(want)
}

func canonicalJSON(v any) string {
	o := &object{keys: []string{"v"}, vals: map[string]any{"v": v}}
	var x any
	if json.Unmarshal(o.render(nil), &x) != nil {
		return ""
	}
	b, _ := json.Marshal(x)
	return string(b)
}

// --- Cursor's rule ----------------------------------------------------------------

// cursorRulePath is the project's rule file.
func cursorRulePath(repoRoot string) string {
	return filepath.Join(repoRoot, ".cursor", "rules", "the-loop.mdc")
}

// installCursorRule writes the operating model as a Cursor rule in the
// project (Cursor reads rule files per project; at user scope it has none).
func installCursorRule(opts *Options) error {
	if opts.Scope != scopeProject {
		fmt.Fprintln(opts.IO.Out, "Cursor reads rules per project: run loopctl install --harness cursor --scope project in each repository for the-loop's rule.")
		return nil
	}
	settings, err := opts.settingsPath()
	if err != nil {
		return err
	}
	path := cursorRulePath(filepath.Dir(filepath.Dir(settings)))
	want := plugin.CursorRule()
	old, err := os.ReadFile(path)
	if err == nil && string(old) == string(want) {
		fmt.Fprintf(opts.IO.Out, "%s is up to date\n", path)
		return nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return failWith(exitFailed, "loopctl install: reading %s: %v", path, err)
	}
	if opts.DryRun {
		from := path
		if err != nil {
			from = "/dev/null"
		}
		io.WriteString(opts.IO.Out, unifiedDiff(from, path, old, want))
		fmt.Fprintf(opts.IO.Out, "dry run: %s not written\n", path)
		return nil
	}
	if err := writeFileAtomic(path, want, false); err != nil {
		return failWith(exitFailed, "loopctl install: writing %s: %v", path, err)
	}
	fmt.Fprintf(opts.IO.Out, "%s: wrote the-loop's rule\n", path)
	return nil
}

// --- uninstall ----------------------------------------------------------------------

// Uninstall removes what Install wrote for the harness and scope.
func Uninstall(opts *Options) error {
	d := opts.desc()
	if d.Install.Style == harness.InstallPackaged {
		return uninstallAgentCLI(opts)
	}
	path, err := opts.settingsPath()
	if err != nil {
		return err
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return failWith(exitFailed, "loopctl uninstall: reading %s: %v", path, err)
	}
	var updated []byte
	var changes []string
	if d.Install.Style == harness.InstallPlugin {
		ran := false
		if !opts.DryRun && opts.Scope == scopeUser {
			ran = opts.unregisterWithClaude()
			// Claude Code may have rewritten the file.
			if b, rerr := os.ReadFile(path); rerr == nil {
				old = b
			}
		}
		updated, changes, err = uninstallClaudePlugin(old, ran)
	} else {
		updated, changes, err = uninstallFlatHook(old, d.Gate.Event)
	}
	if err != nil {
		return failWith(exitFailed, "loopctl uninstall: %s: %v; fix the file by hand (nothing was written)", path, err)
	}
	out := opts.IO.Out
	if opts.DryRun {
		if len(changes) > 0 {
			io.WriteString(out, unifiedDiff(path, path, old, updated))
		}
	} else if len(changes) > 0 {
		if err := writeUninstalled(opts, path, updated); err != nil {
			return err
		}
		for _, c := range changes {
			fmt.Fprintf(out, "%s: %s\n", path, c)
		}
		reportRemovedFile(opts, path, updated)
	}
	if len(changes) == 0 {
		fmt.Fprintf(out, "%s: nothing of theloop's to remove\n", path)
	}
	switch {
	case d.Install.Style == harness.InstallPlugin && opts.Scope == scopeUser:
		dir, err := opts.marketplaceDir()
		if err != nil {
			return err
		}
		if opts.DryRun {
			fmt.Fprintf(out, "would remove %s\n", dir)
		} else if removed, err := plugin.Remove(dir); err != nil {
			return failWith(exitFailed, "loopctl uninstall: %v", err)
		} else if removed {
			if home, err := opts.Env.HomeDir(); err == nil && home != "" {
				removeEmptyDirs(filepath.Dir(dir), home)
			}
			fmt.Fprintf(out, "removed %s\n", dir)
		}
	case d.Install.Rule && opts.Scope == scopeProject:
		rule := cursorRulePath(filepath.Dir(filepath.Dir(path)))
		b, err := os.ReadFile(rule)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return failWith(exitFailed, "loopctl uninstall: reading %s: %v", rule, err)
		case string(b) != string(plugin.CursorRule()):
			fmt.Fprintf(opts.IO.ErrOut, "%s differs from the rule install writes; left in place\n", rule)
		case opts.DryRun:
			fmt.Fprintf(out, "would remove %s\n", rule)
		default:
			if err := os.Remove(rule); err != nil {
				return failWith(exitFailed, "loopctl uninstall: %v", err)
			}
			removeEmptyDirs(filepath.Dir(rule), filepath.Dir(filepath.Dir(path)))
			fmt.Fprintf(out, "removed %s\n", rule)
		}
	}
	if opts.DryRun {
		fmt.Fprintln(out, "dry run: nothing written")
	}
	return nil
}

// uninstallFlatHook removes loop-gate from a flat hook file's (Cursor's
// hooks.json) hooks.<event>.
func uninstallFlatHook(old []byte, event string) ([]byte, []string, error) {
	root, err := parseObject(old, "the file")
	if err != nil {
		return nil, nil, err
	}
	removed, err := removeGateHooks(root, event, false)
	if err != nil || len(removed) == 0 {
		return old, nil, err
	}
	var changes []string
	for _, cmd := range removed {
		changes = append(changes, fmt.Sprintf("removed the %s hook %q", event, plugin.GateInvocation(cmd)))
	}
	return root.render(old), changes, nil
}

// unregisterWithClaude uninstalls the plugin and removes the marketplace
// through the claude CLI when it is on PATH (best effort); it reports
// whether the CLI ran.
func (o *Options) unregisterWithClaude() bool {
	claude := o.lookPath(o.desc().Binary)
	if claude == "" {
		return false
	}
	for _, args := range [][]string{
		{"plugin", "uninstall", plugin.ID, "--scope", o.Scope},
		{"plugin", "marketplace", "remove", plugin.MarketplaceName, "--scope", o.Scope},
	} {
		if err := o.runClaude(claude, args); err != nil {
			fmt.Fprintf(o.IO.ErrOut, "note: claude %s: %v\n", strings.Join(args, " "), err)
		}
	}
	return true
}
