package install

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/plugin"
)

// Upgrading re-runs Install for every harness theloop is installed for at
// user scope, so the plugin's files, hooks and registrations become this
// binary's. It is what `loopctl daemon restart --with-upgrade` has loopd do
// before it serves again. Project-scope installs live in repositories the
// upgrade cannot know; `loopctl install --scope project` upgrades them.

// Installed lists the harnesses theloop is installed for at user scope,
// from what Install leaves behind: the Claude Code plugin's local
// marketplace, the Codex plugin's marketplace, the Gemini extension, and a
// loop-gate entry in Cursor's hook file.
func Installed(env *Env) []string {
	home, err := env.HomeDir()
	if err != nil || home == "" {
		return nil
	}
	var out []string
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	for _, d := range harness.All() {
		o := &Options{Env: env, Harness: d.Name, Scope: scopeUser}
		var found bool
		switch d.Install.Style {
		case harness.InstallPlugin:
			found = exists(filepath.Join(plugin.MarketplaceDir(env.Getenv, home), plugin.Name, filepath.FromSlash(plugin.ManifestPath)))
		case harness.InstallPackaged:
			found = exists(agentCLIOf(o).packageDir(o, home))
		default:
			if p, err := o.settingsPath(); err == nil {
				data, err := readBounded(p, 1<<20)
				found = err == nil && bytes.Contains(data, []byte(gateBinary))
			}
		}
		if found {
			out = append(out, d.Name)
		}
	}
	return out
}

// readBounded reads at most limit bytes of a regular file.
func readBounded(p string, limit int64) ([]byte, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > limit {
		return nil, fmt.Errorf("%s: not a regular file of at most %d bytes", p, limit)
	}
	return os.ReadFile(p)
}

// UpgradeResult is what Upgrade did for one harness.
type UpgradeResult struct {
	Harness string
	// Report is what Install printed (the files and settings it changed,
	// or that nothing needed to).
	Report []string
	Err    error
}

// Upgrade runs Install at user scope for every harness Installed finds,
// keeping each one's loop-gate program (base's Command is not applied),
// and returns one result per harness; the error joins the failures. base
// supplies the world (Env, Runner) and where warnings go (IO.ErrOut).
func Upgrade(base Options) ([]UpgradeResult, error) {
	var results []UpgradeResult
	var errs []error
	for _, h := range Installed(base.Env) {
		var out bytes.Buffer
		o := base
		o.Harness, o.Scope, o.DryRun, o.Command, o.CommandSet, o.Repo = h, scopeUser, false, gateBinary, false, ""
		o.IO.Out = &out
		if o.IO.ErrOut == nil {
			o.IO.ErrOut = &out
		}
		err := Install(&o)
		r := UpgradeResult{Harness: h, Err: err}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if line != "" {
				r.Report = append(r.Report, line)
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", h, err))
		}
		results = append(results, r)
	}
	return results, errors.Join(errs...)
}
