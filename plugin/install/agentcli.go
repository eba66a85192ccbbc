package install

import (
	"bufio"
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

// The Codex CLI and the Gemini CLI each get two things:
//
//   - the gate, in the CLI's own hook file: Codex's hooks.json
//     (hooks.Stop) and Gemini's settings.json (hooks.AfterAgent), both in
//     Claude Code's grouped shape {"hooks":[{"type":"command",...}]}, at
//     user scope (~/.codex, $CODEX_HOME; ~/.gemini) or in the repository;
//   - the prose (the skill and the /the-loop: commands), rendered by
//     package plugin into the packaging the CLI loads: a Codex plugin in a
//     local marketplace under theloop's data directory, registered with
//     `codex plugin marketplace add` and `codex plugin add` when codex is
//     on PATH; a Gemini CLI extension in ~/.gemini/extensions/the-loop,
//     which the CLI loads from there. Both live in the user's home
//     whatever the scope (neither CLI has per-repository plugins).

// agentCLI is how one harness with a packaged install (its descriptor's
// Install) is installed.
type agentCLI struct {
	desc  *harness.Descriptor
	event string // the hook event the gate runs on
	// entry is the hook entry for a command line.
	entry func(command string) *object
	// packageDir is where the prose goes.
	packageDir func(o *Options, home string) string
	tree       func() (plugin.Tree, error)
	// registers: the package is registered through the CLI (a
	// marketplace), not only copied.
	registers bool
}

// agentCLIOf is the packaged install of the harness the options name.
func agentCLIOf(o *Options) agentCLI {
	d := o.desc()
	cli := agentCLI{
		desc:  d,
		event: d.Gate.Event,
		entry: func(cmd string) *object {
			var kv []any
			for _, x := range d.Install.HookEntry(cmd) {
				kv = append(kv, x)
			}
			return newObject(kv...)
		},
	}
	switch d.Install.Package {
	case harness.PackageMarketplace:
		cli.packageDir = func(o *Options, home string) string { return plugin.CodexMarketplaceDir(o.Env.Getenv, home) }
		cli.tree = plugin.CodexMarketplace
		cli.registers = true
	default:
		cli.packageDir = func(_ *Options, home string) string { return plugin.GeminiExtensionDir(home) }
		cli.tree = plugin.GeminiExtension
	}
	return cli
}

// codexPluginID is the plugin as Codex names it.
const codexPluginID = plugin.Name + "@" + plugin.MarketplaceName

func installAgentCLI(opts *Options) error {
	cli := agentCLIOf(opts)
	path, err := opts.settingsPath()
	if err != nil {
		return err
	}
	home, err := opts.Env.HomeDir()
	if err != nil || home == "" {
		return failWith(exitFailed, "loopctl install: no home directory for the %s's files (%v); set HOME", harnessTitle(opts.Harness), err)
	}
	old, err := os.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return failWith(exitFailed, "loopctl install: reading %s: %v", path, err)
	}
	want, cmdErr := opts.wantCommand(path)
	updated, command, changes, err := installGroupedHook(old, cli.event, want, cli.entry)
	if *cmdErr != nil {
		return *cmdErr
	}
	if err != nil {
		return failWith(exitFailed, "loopctl install: %s: %v; fix the file by hand (nothing was written)", path, err)
	}
	dir := cli.packageDir(opts, home)
	tree, err := cli.tree()
	if err != nil {
		return failWith(exitFailed, "loopctl install: %v", err)
	}
	plan, err := plugin.Plan(dir, tree)
	if err != nil {
		return failWith(exitFailed, "loopctl install: %v", err)
	}
	out := opts.IO.Out
	if opts.DryRun {
		if len(changes) > 0 {
			from := path
			if !exists {
				from = "/dev/null"
			}
			io.WriteString(out, unifiedDiff(from, path, old, updated))
		}
		for _, c := range plan {
			fmt.Fprintf(out, "%s %s\n", c.Op, filepath.Join(dir, filepath.FromSlash(c.Path)))
		}
		fmt.Fprintln(out, "dry run: nothing written")
		return nil
	}
	if len(changes) > 0 {
		if err := writeFileAtomic(path, updated, opts.Scope == scopeUser); err != nil {
			return failWith(exitFailed, "loopctl install: writing %s: %v (the file is unchanged)", path, err)
		}
		for _, c := range changes {
			fmt.Fprintf(out, "%s: %s\n", path, c)
		}
	} else {
		fmt.Fprintf(out, "%s already runs %q as the %s %s hook\n", path, command, harnessTitle(opts.Harness), cli.event)
	}
	if len(plan) > 0 {
		if _, err := plugin.Sync(dir, tree); err != nil {
			return failWith(exitFailed, "loopctl install: %v", err)
		}
		fmt.Fprintf(out, "%s: the-loop's skill and commands for the %s (%d file(s) written or removed)\n", dir, harnessTitle(opts.Harness), len(plan))
	} else {
		fmt.Fprintf(out, "%s is up to date\n", dir)
	}
	if cli.registers {
		opts.registerWithCodex(dir, len(changes) > 0)
	}
	opts.warnScopeLoads(path)
	if command == hookCommand(gateBinary, opts.Harness) && !opts.onPath(gateBinary) {
		fmt.Fprintf(opts.IO.ErrOut, "warning: %s is not on PATH; install it (go install github.com/theloop-dev/theloop/cmd/loop-gate@latest) or run loopctl install --command /absolute/path/to/loop-gate\n", gateBinary)
	}
	return nil
}

// warnScopeLoads says when the CLI will not load the hook file just written
// on its own: a project layer each CLI loads only for a folder the user has
// trusted, and Codex's hook trust.
func (o *Options) warnScopeLoads(path string) {
	errOut := o.IO.ErrOut
	layout := o.desc().Install
	if layout.ProjectNote != "" && o.Scope == scopeProject {
		fmt.Fprintf(errOut, "warning: "+layout.ProjectNote+"\n", path, repoRootOf(path))
	}
	if layout.Note != "" {
		fmt.Fprintln(errOut, "note: "+layout.Note)
	}
}

// registerWithCodex turns the hooks feature on when the installed codex
// has it off, and adds the marketplace and the plugin; without codex on
// PATH it says how. A new hook is run by Codex only once the user has
// trusted it (/hooks), which install says when it wrote one.
func (o *Options) registerWithCodex(dir string, newHook bool) {
	if newHook {
		fmt.Fprintln(o.IO.Out, "Codex runs a new hook only after you trust it: open codex and review it with /hooks.")
	}
	codex := o.lookPath(o.desc().Binary)
	if codex == "" {
		fmt.Fprintf(o.IO.Out, "codex is not on PATH: register the plugin with `codex plugin marketplace add %s && codex plugin add %s`; Codex must have its hooks feature on (`codex features enable hooks`).\n", dir, codexPluginID)
		return
	}
	listed, err := o.runCLI(codex, []string{"features", "list"})
	if err != nil {
		fmt.Fprintf(o.IO.ErrOut, "warning: codex features list: %v\n", err)
	} else if on, known := featureState(listed, "hooks"); known && !on {
		if _, err := o.runCLI(codex, []string{"features", "enable", "hooks"}); err != nil {
			fmt.Fprintf(o.IO.ErrOut, "warning: Codex's hooks feature is off and `codex features enable hooks` failed: %v; without it Codex runs no hook\n", err)
		} else {
			fmt.Fprintln(o.IO.Out, "codex: enabled the hooks feature ([features] hooks = true in Codex's config.toml), without which Codex runs no hook")
		}
	}
	for _, args := range [][]string{
		{"plugin", "marketplace", "add", dir},
		{"plugin", "add", codexPluginID},
	} {
		if _, err := o.runCLI(codex, args); err != nil {
			fmt.Fprintf(o.IO.ErrOut, "warning: codex %s: %v (the files are written; run it yourself)\n", strings.Join(args, " "), err)
			return
		}
	}
	fmt.Fprintf(o.IO.Out, "codex: %s installed; restart running sessions to load it.\n", codexPluginID)
}

// featureState reads a feature's effective state from `codex features
// list` ("<name>  <stage>  <true|false>" per line).
func featureState(listing, name string) (on, known bool) {
	sc := bufio.NewScanner(strings.NewReader(listing))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == name {
			return f[len(f)-1] == "true", true
		}
	}
	return false, false
}

// runCLI runs one step of a harness CLI (at most 60 s) with the
// operator's home (and $CODEX_HOME), in the project for --scope project,
// and returns its output.
func (o *Options) runCLI(program string, args []string) (string, error) {
	home, _ := o.Env.HomeDir()
	env := []string{"HOME=" + home}
	if ch := o.Env.Getenv("CODEX_HOME"); ch != "" {
		env = append(env, "CODEX_HOME="+ch)
	}
	cmdDir := ""
	if o.Scope == scopeProject {
		if p, err := o.settingsPath(); err == nil {
			cmdDir = filepath.Dir(filepath.Dir(p))
		}
	}
	runner := o.Runner
	if runner == nil {
		runner = run.Exec{Environ: run.InheritEnv} // the user's own CLI, installing for the user
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := runner.Run(ctx, run.Cmd{Name: program, Args: args, Dir: cmdDir, Env: env})
	return string(res.Stdout), err
}

func uninstallAgentCLI(opts *Options) error {
	cli := agentCLIOf(opts)
	path, err := opts.settingsPath()
	if err != nil {
		return err
	}
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return failWith(exitFailed, "loopctl uninstall: reading %s: %v", path, err)
	}
	root, err := parseObject(old, "the file")
	if err != nil {
		return failWith(exitFailed, "loopctl uninstall: %s: %v; fix the file by hand (nothing was written)", path, err)
	}
	removed, err := removeGateHooks(root, cli.event, true)
	if err != nil {
		return failWith(exitFailed, "loopctl uninstall: %s: %v; fix the file by hand (nothing was written)", path, err)
	}
	out := opts.IO.Out
	if len(removed) == 0 {
		fmt.Fprintf(out, "%s: nothing of theloop's to remove\n", path)
	} else {
		updated := root.render(old)
		if opts.DryRun {
			io.WriteString(out, unifiedDiff(path, path, old, updated))
		} else {
			if err := writeUninstalled(opts, path, updated); err != nil {
				return err
			}
			for _, cmd := range removed {
				fmt.Fprintf(out, "%s: removed the %s hook %q\n", path, cli.event, plugin.GateInvocation(cmd))
			}
			reportRemovedFile(opts, path, updated)
		}
	}
	// The prose lives in the home directory whatever the scope, and goes
	// with either uninstall — whether or not the hook was still there, so a
	// second uninstall finishes what a first left — unless the user-scope
	// hook still runs the gate (a project uninstall then leaves the
	// user-scope install whole).
	home, err := opts.Env.HomeDir()
	if err != nil || home == "" {
		return failWith(exitFailed, "loopctl uninstall: no home directory (%v); set HOME", err)
	}
	dir := cli.packageDir(opts, home)
	if _, err := os.Stat(dir); err == nil || cli.registers {
		switch {
		case opts.Scope == scopeProject && opts.userScopeGate(cli.event):
			fmt.Fprintf(out, "%s stays: your user-scope install still uses it (loopctl uninstall --harness %s removes it)\n", dir, opts.Harness)
		case opts.DryRun:
			fmt.Fprintf(out, "would remove %s\n", dir)
		default:
			if cli.registers {
				opts.unregisterWithCodex()
			}
			if gone, err := plugin.Remove(dir); err != nil {
				return failWith(exitFailed, "loopctl uninstall: %v", err)
			} else if gone {
				removeEmptyDirs(filepath.Dir(dir), home)
				fmt.Fprintf(out, "removed %s (in your home directory)\n", dir)
			}
		}
	}
	if opts.DryRun {
		fmt.Fprintln(out, "dry run: nothing written")
	}
	return nil
}

// userScopeGate reports whether the harness's user-scope hook file runs
// loop-gate on event.
func (o *Options) userScopeGate(event string) bool {
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
		return true // unreadable: assume it is still in use, remove nothing
	}
	removed, _ := removeGateHooks(root, event, true)
	return len(removed) > 0
}

// unregisterWithCodex removes the plugin and the marketplace through the
// codex CLI when it is on PATH (best effort: either may be gone already).
func (o *Options) unregisterWithCodex() {
	codex := o.lookPath(o.desc().Binary)
	if codex == "" {
		return
	}
	listing, _ := o.runCLI(codex, []string{"plugin", "marketplace", "list"})
	if !marketplaceListed(listing) {
		return
	}
	for _, args := range [][]string{
		{"plugin", "remove", codexPluginID},
		{"plugin", "marketplace", "remove", plugin.MarketplaceName},
	} {
		if _, err := o.runCLI(codex, args); err != nil {
			fmt.Fprintf(o.IO.ErrOut, "note: codex %s: %v\n", strings.Join(args, " "), err)
		} else {
			fmt.Fprintf(o.IO.Out, "codex %s\n", strings.Join(args, " "))
		}
	}
}

func marketplaceListed(listing string) bool {
	sc := bufio.NewScanner(strings.NewReader(listing))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 && f[0] == plugin.MarketplaceName {
			return true
		}
	}
	return false
}

// installGroupedHook makes hooks.<event> of a settings file in Claude
// Code's grouped shape ({"hooks":{"<event>":[{"hooks":[{...}]}]}}) run the
// command want returns, once: an existing loop-gate entry is updated in
// place (its other keys kept), a duplicate removed, else a new group is
// appended. Everything else in the file is kept byte for byte.
func installGroupedHook(old []byte, event string, want func(existing string) string, entry func(string) *object) (updated []byte, command string, changes []string, err error) {
	root, err := parseObject(old, "the file")
	if err != nil {
		return nil, "", nil, err
	}
	hooks, err := root.object("hooks", "hooks")
	if err != nil {
		return nil, "", nil, err
	}
	groups, err := hooks.array(event, "hooks."+event)
	if err != nil {
		return nil, "", nil, err
	}
	found := false
	var kept []any
	for _, g := range groups {
		group, gerr := parseObject(g.(json.RawMessage), "")
		if gerr != nil {
			kept = append(kept, g)
			continue
		}
		entries, eerr := group.array("hooks", "")
		if eerr != nil {
			kept = append(kept, g)
			continue
		}
		var keptEntries []any
		touched := false
		for _, e := range entries {
			h, perr := parseObject(e.(json.RawMessage), "")
			cmd, ok := h.str("command")
			if perr != nil || !ok || !plugin.IsGateCommand(cmd) {
				keptEntries = append(keptEntries, e)
				continue
			}
			if found {
				touched = true
				changes = append(changes, fmt.Sprintf("removed a duplicate loop-gate %s hook (%q)", event, cmd))
				continue
			}
			found = true
			command = want(cmd)
			if cmd == command {
				keptEntries = append(keptEntries, e)
				continue
			}
			touched = true
			h.set("command", mustJSON(command))
			keptEntries = append(keptEntries, h)
			changes = append(changes, fmt.Sprintf("%s hook %q → %q", event, cmd, command))
		}
		switch {
		case !touched:
			kept = append(kept, g)
		case len(keptEntries) > 0:
			group.set("hooks", keptEntries)
			kept = append(kept, group)
		}
	}
	if !found {
		command = want("")
		kept = append(kept, newObject("hooks", []any{entry(command)}))
		changes = append(changes, fmt.Sprintf("added the %s hook %q", event, command))
	}
	if len(changes) == 0 {
		return old, command, nil, nil
	}
	hooks.set(event, kept)
	root.set("hooks", hooks)
	return root.render(old), command, changes, nil
}
