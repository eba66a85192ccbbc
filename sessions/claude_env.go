package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/internal/atomicfile"
	"github.com/theloop-dev/theloop/plugin"
)

// pythonPluginID is the Python the-loop's plugin. Its commands share our
// names (/the-loop:…) but run the Python CLI; theloop never enables it and
// warns when the operator's settings do.
const pythonPluginID = "the-loop@the-loop"

// Trust scopes for ClaudeEnvironment.TrustScope.
const (
	TrustWorkspaceRoot = "workspace-root"
	TrustDirectory     = "directory"
)

// Bypass-disclaimer policies for ClaudeEnvironment.AcceptBypass.
const (
	BypassAuto   = "auto"
	BypassAlways = "always"
	BypassNever  = "never"
)

// ClaudeEnvironment pre-seeds Claude Code's own configuration so that an
// unattended session in a new worktree starts at its prompt instead of at a
// trust dialog (which the first paste would otherwise answer), with
// theloop's own plugin (package plugin: the skill, the /the-loop commands,
// the SessionStart reminder and loop-gate as the Stop hook) installed in a
// local marketplace and enabled. Build it with ClaudeEnvironmentFromEnv, or fill
// the paths explicitly (tests must: never point them at a real home).
type ClaudeEnvironment struct {
	// ConfigDir is Claude Code's config directory ($CLAUDE_CONFIG_DIR or
	// ~/.claude). Empty disables preparation.
	ConfigDir string
	// UserConfigFile holds per-project trust (".claude.json").
	UserConfigFile string
	// SettingsFile holds plugin and permission settings ("" = ConfigDir/settings.json).
	SettingsFile string
	// Home is the user's home directory, which is never trusted wholesale.
	Home string
	// Trust marks the session's directory trusted.
	Trust bool
	// TrustScope is TrustWorkspaceRoot (also trust WorkspaceRoot when it
	// contains the cwd) or TrustDirectory (the cwd only).
	TrustScope string
	// WorkspaceRoot is the root all worktrees live under.
	WorkspaceRoot string
	// AcceptBypass decides when to pre-accept the bypass-permissions
	// disclaimer: BypassAuto (only when the harness args ask for bypass),
	// BypassAlways, BypassNever.
	AcceptBypass string
	// Plugin writes theloop's plugin into MarketplaceDir and enables it
	// (extraKnownMarketplaces.theloop, enabledPlugins["the-loop@theloop"]).
	Plugin bool
	// MarketplaceDir is the local marketplace (plugin.MarketplaceDir; the
	// same directory `loopctl install` writes).
	MarketplaceDir string
	// GateProgram is the loop-gate the plugin's Stop hook runs, ideally an
	// absolute path to the installed binary ("" keeps what is installed, else
	// "loop-gate" on the session's PATH).
	GateProgram string
}

// ClaudeEnvironmentFromEnv resolves Claude Code's files the way Claude Code
// does: config dir $CLAUDE_CONFIG_DIR else <home>/.claude; user config
// <config dir>/.config.json if it exists, else
// ${CLAUDE_CONFIG_DIR:-<home>}/.claude.json. Trust (workspace-root scope)
// and the plugin are on (marketplace under $XDG_DATA_HOME/theloop); the
// bypass disclaimer follows the harness args.
func ClaudeEnvironmentFromEnv(getenv func(string) string, home, workspaceRoot string) ClaudeEnvironment {
	base := getenv("CLAUDE_CONFIG_DIR")
	dir := base
	if dir == "" {
		dir = filepath.Join(home, ".claude")
		base = home
	}
	user := filepath.Join(dir, ".config.json")
	if _, err := os.Stat(user); err != nil {
		user = filepath.Join(base, ".claude.json")
	}
	return ClaudeEnvironment{
		ConfigDir:      dir,
		UserConfigFile: user,
		SettingsFile:   filepath.Join(dir, "settings.json"),
		Home:           home,
		Trust:          true,
		TrustScope:     TrustWorkspaceRoot,
		WorkspaceRoot:  workspaceRoot,
		AcceptBypass:   BypassAuto,
		Plugin:         true,
		MarketplaceDir: plugin.MarketplaceDir(getenv, home),
	}
}

// wantsBypass reports whether harness args ask Claude Code to skip
// permission prompts.
func wantsBypass(args []string) bool {
	for i, a := range args {
		switch {
		case a == "--dangerously-skip-permissions", a == "--permission-mode=bypassPermissions":
			return true
		case a == "--permission-mode" && i+1 < len(args) && args[i+1] == "bypassPermissions":
			return true
		}
	}
	return false
}

// Prepare writes trust for cwd and the plugin settings. It only writes a
// file when something changes; it never overwrites a file it cannot parse
// or whose top level is not an object (it reports it instead); it changes
// only the keys it owns and never flips a plugin setting the operator made;
// it writes through symlinks; new files are 0600, existing ones keep their
// mode. Each file is edited under its own lock.
func (e ClaudeEnvironment) Prepare(cwd string, harnessArgs []string) (Prepared, error) {
	var p Prepared
	if e.ConfigDir == "" {
		return p, nil
	}
	if !filepath.IsAbs(cwd) {
		return p, fmt.Errorf("preparing Claude Code for %q: the directory must be absolute", cwd)
	}
	var errs []error
	if e.Trust && e.UserConfigFile != "" {
		dirs := e.trustedDirs(cwd)
		bypass := e.bypass(harnessArgs)
		changed, err := editJSONFile(e.UserConfigFile, func(doc map[string]any) bool {
			changed := false
			projects, ok := doc["projects"].(map[string]any)
			if !ok {
				if _, present := doc["projects"]; present {
					return false // not ours to repair
				}
				projects = map[string]any{}
				doc["projects"] = projects
			}
			for _, d := range dirs {
				proj, ok := projects[d].(map[string]any)
				if !ok {
					if _, present := projects[d]; present {
						continue
					}
					proj = map[string]any{}
					projects[d] = proj
				}
				changed = setTrue(proj, "hasTrustDialogAccepted") || changed
				changed = setTrue(proj, "hasCompletedProjectOnboarding") || changed
			}
			if bypass {
				changed = setTrue(doc, "bypassPermissionsModeAccepted") || changed
			}
			return changed
		})
		if err != nil {
			errs = append(errs, err)
		} else {
			p.Trusted = dirs
			if changed {
				p.Changed = append(p.Changed, e.UserConfigFile)
			}
		}
	}
	settings := e.SettingsFile
	if settings == "" {
		settings = filepath.Join(e.ConfigDir, "settings.json")
	}
	bypass := e.bypass(harnessArgs)
	pluginReady := false
	if e.Plugin {
		changed, err := e.installPlugin()
		if err != nil {
			errs = append(errs, err)
		} else {
			pluginReady = true
			if changed {
				p.Changed = append(p.Changed, e.MarketplaceDir)
			}
		}
	}
	if pluginReady || bypass {
		changed, err := editJSONFile(settings, func(doc map[string]any) bool {
			changed := false
			if bypass {
				changed = setTrue(doc, "skipDangerousModePermissionPrompt") || changed
			}
			if pluginReady {
				if enabled, _ := doc["enabledPlugins"].(map[string]any); enabled[pythonPluginID] == true {
					p.Warnings = append(p.Warnings, fmt.Sprintf("%s also enables the Python the-loop's plugin (%s), whose /the-loop: commands run the Python CLI; disable it: claude plugin disable %s", settings, pythonPluginID, pythonPluginID))
				}
				changed = setIfAbsent(doc, "extraKnownMarketplaces", plugin.MarketplaceName,
					map[string]any{"source": map[string]any{"source": "directory", "path": e.MarketplaceDir}}) || changed
				changed = setIfAbsent(doc, "enabledPlugins", plugin.ID, true) || changed
			}
			return changed
		})
		if err != nil {
			errs = append(errs, err)
		} else if changed {
			p.Changed = append(p.Changed, settings)
		}
	}
	return p, errors.Join(errs...)
}

// installPlugin writes the plugin's files into the marketplace directory
// when they differ from this binary's (an upgrade replaces them); the Stop
// hook runs GateProgram, else the program already installed.
func (e ClaudeEnvironment) installPlugin() (bool, error) {
	if e.MarketplaceDir == "" || !filepath.IsAbs(e.MarketplaceDir) {
		return false, fmt.Errorf("the plugin's marketplace directory %q must be absolute", e.MarketplaceDir)
	}
	program := e.GateProgram
	if program == "" {
		program = plugin.InstalledGateProgram(e.MarketplaceDir)
	}
	tree, err := plugin.Marketplace(plugin.Options{GateProgram: program})
	if err != nil {
		return false, err
	}
	// Sessions spawned side by side write the same files; one at a time.
	if err := os.MkdirAll(filepath.Dir(e.MarketplaceDir), 0o700); err != nil {
		return false, fmt.Errorf("installing theloop's plugin: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	unlock, err := lockFile(ctx, e.MarketplaceDir+".theloop-lock")
	if err != nil {
		return false, err
	}
	defer unlock()
	changes, err := plugin.Sync(e.MarketplaceDir, tree)
	if err != nil {
		return false, fmt.Errorf("installing theloop's plugin: %w", err)
	}
	return len(changes) > 0, nil
}

func (e ClaudeEnvironment) bypass(args []string) bool {
	switch e.AcceptBypass {
	case BypassAlways:
		return true
	case BypassNever:
		return false
	default:
		return wantsBypass(args)
	}
}

// trustedDirs lists the directory keys to trust: cwd (and its real path),
// plus the workspace root under TrustWorkspaceRoot when it contains cwd and
// is neither "/" nor the home directory itself.
func (e ClaudeEnvironment) trustedDirs(cwd string) []string {
	var dirs []string
	add := func(d string) {
		d = filepath.Clean(d)
		for _, have := range dirs {
			if have == d {
				return
			}
		}
		dirs = append(dirs, d)
		if real, err := filepath.EvalSymlinks(d); err == nil && real != d {
			dirs = append(dirs, real)
		}
	}
	add(cwd)
	if e.TrustScope != TrustDirectory && e.WorkspaceRoot != "" {
		root := filepath.Clean(e.WorkspaceRoot)
		home := filepath.Clean(e.Home)
		if rel, err := filepath.Rel(root, filepath.Clean(cwd)); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") &&
			root != "/" && (e.Home == "" || root != home) {
			add(root)
		}
	}
	return dirs
}

func setTrue(m map[string]any, key string) bool {
	if v, ok := m[key].(bool); ok && v {
		return false
	}
	m[key] = true
	return true
}

// setIfAbsent sets m[outer][key] = v unless outer is not an object (left
// alone) or key is already present with any value (the operator's choice).
func setIfAbsent(m map[string]any, outer, key string, v any) bool {
	inner, ok := m[outer].(map[string]any)
	if !ok {
		if _, present := m[outer]; present {
			return false
		}
		inner = map[string]any{}
		m[outer] = inner
	}
	if _, present := inner[key]; present {
		return false
	}
	inner[key] = v
	return true
}

// editJSONFile applies edit to the JSON object in path (a missing file is an
// empty object) and writes the result only if edit reports a change.
func editJSONFile(path string, edit func(map[string]any) bool) (bool, error) {
	target := path
	if real, err := filepath.EvalSymlinks(path); err == nil {
		target = real // write through the link, keep the link
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
		return false, fmt.Errorf("preparing %s: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	unlock, err := lockFile(ctx, filepath.Join(filepath.Dir(target), "."+filepath.Base(target)+".theloop-lock"))
	if err != nil {
		return false, err
	}
	defer unlock()

	mode := fs.FileMode(0o600)
	doc := map[string]any{}
	data, err := os.ReadFile(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return false, fmt.Errorf("reading %s: %w", path, err)
	default:
		if fi, err := os.Stat(target); err == nil {
			mode = fi.Mode().Perm()
		}
		if len(bytes.TrimSpace(data)) > 0 {
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.UseNumber() // keep numbers exactly as written
			var v any
			if err := dec.Decode(&v); err != nil {
				return false, fmt.Errorf("%s is not valid JSON (%v); left untouched — fix or remove it so theloop can pre-trust workspaces", path, err)
			}
			obj, ok := v.(map[string]any)
			if !ok {
				return false, fmt.Errorf("%s does not hold a JSON object; left untouched — fix it so theloop can pre-trust workspaces", path)
			}
			doc = obj
		}
	}
	if !edit(doc) {
		return false, nil
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return false, fmt.Errorf("encoding %s: %w", path, err)
	}
	if err := atomicfile.Write(target, append(out, '\n'), mode); err != nil {
		return false, err
	}
	return true, nil
}
