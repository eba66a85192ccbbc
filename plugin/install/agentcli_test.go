package install

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/internal/required"
	"github.com/theloop-dev/theloop/plugin"
)

// hookCommands lists the commands under hooks.<event> of a grouped
// settings file.
func hookCommands(t *testing.T, data, event string) []string {
	t.Helper()
	var s struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Type    string `json:"type"`
				Command string `json:"command"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	require.NoError(t, json.Unmarshal([]byte(data), &s), data)
	var out []string
	for _, g := range s.Hooks[event] {
		for _, h := range g.Hooks {
			require.Equal(t, "command", h.Type)
			out = append(out, h.Command)
		}
	}
	return out
}

func TestInstallAgentCLIs(t *testing.T) {
	for _, tc := range []struct {
		harness, event string
		file           func(w *world, scope string) string
		pkg            func(w *world) string
		manifest       string
	}{
		{"codex", "Stop",
			func(w *world, scope string) string {
				if scope == scopeUser {
					return filepath.Join(w.home, ".codex", "hooks.json")
				}
				return filepath.Join(w.repo, ".codex", "hooks.json")
			},
			func(w *world) string { return plugin.CodexMarketplaceDir(func(string) string { return "" }, w.home) },
			filepath.Join(plugin.CodexPluginDir, plugin.CodexManifestPath)},
		{"gemini", "AfterAgent",
			func(w *world, scope string) string {
				if scope == scopeUser {
					return filepath.Join(w.home, ".gemini", "settings.json")
				}
				return filepath.Join(w.repo, ".gemini", "settings.json")
			},
			func(w *world) string { return plugin.GeminiExtensionDir(w.home) },
			plugin.GeminiManifestPath},
	} {
		for _, scope := range []string{scopeUser, scopeProject} {
			t.Run(tc.harness+" "+scope, func(t *testing.T) {
				w := newWorld(t)
				path := tc.file(w, scope)
				// Somebody else's hooks and settings are there already.
				other := `{
  "model": "x",
  "hooks": {
    "` + tc.event + `": [
      {"hooks": [{"type": "command", "command": "notify-send done", "timeout": 5}]}
    ],
    "SessionStart": [{"hooks": [{"type": "command", "command": "echo hi"}]}]
  }
}
`
				require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
				require.NoError(t, os.WriteFile(path, []byte(other), 0o644))

				require.NoError(t, Install(w.options(tc.harness, scope)), w.err.String())
				got := w.read(t, path)
				require.Equal(t, []string{"notify-send done", plugin.GateCommand("loop-gate", tc.harness)}, hookCommands(t, got, tc.event))
				require.Equal(t, []string{"echo hi"}, hookCommands(t, got, "SessionStart"))
				require.Contains(t, got, `"model": "x"`)
				require.FileExists(t, filepath.Join(tc.pkg(w), tc.manifest))
				require.Contains(t, w.out.String(), path+": added the "+tc.event+" hook "+fmt.Sprintf("%q", plugin.GateCommand("loop-gate", tc.harness)))
				require.Contains(t, w.err.String(), "loop-gate is not on PATH")
				// A project layer loads only in a folder the user trusted:
				// the install says so, naming the file and the folder, and
				// only for that scope.
				if scope == scopeProject {
					require.Contains(t, w.err.String(), "warning: "+fmt.Sprintf(harness.ByName(tc.harness).Install.ProjectNote, path, w.repo))
				} else {
					require.NotContains(t, w.err.String(), "only for a project it trusts")
					require.NotContains(t, w.err.String(), "only in a folder it trusts")
				}

				// A second install changes nothing.
				w.out.Reset()
				require.NoError(t, Install(w.options(tc.harness, scope)))
				require.Equal(t, got, w.read(t, path))
				require.Contains(t, w.out.String(), "already runs")
				require.Contains(t, w.out.String(), "is up to date")

				// Uninstall removes exactly what install wrote.
				w.out.Reset()
				require.NoError(t, Uninstall(w.options(tc.harness, scope)), w.err.String())
				after := w.read(t, path)
				require.Equal(t, []string{"notify-send done"}, hookCommands(t, after, tc.event))
				require.JSONEq(t, other, after)
				if scope == scopeUser {
					require.NoDirExists(t, tc.pkg(w))
				}
				// And a second uninstall finds nothing.
				w.out.Reset()
				require.NoError(t, Uninstall(w.options(tc.harness, scope)))
				require.Contains(t, w.out.String(), "nothing of theloop's to remove")
			})
		}
	}
}

func TestInstallAgentCLIFromNothingAndBack(t *testing.T) {
	for _, h := range []string{harnessCodex, harnessGemini} {
		t.Run(h, func(t *testing.T) {
			w := newWorld(t)
			opts := w.options(h, scopeProject)
			require.NoError(t, Install(opts))
			path, err := opts.settingsPath()
			require.NoError(t, err)
			require.Equal(t, []string{plugin.GateCommand("loop-gate", h)}, hookCommands(t, w.read(t, path), harness.ByName(h).Gate.Event))
			require.NoError(t, Uninstall(w.options(h, scopeProject)))
			require.JSONEq(t, `{}`, w.read(t, path), "no empty containers are left")
		})
	}
}

func TestInstallAgentCLIDryRunWritesNothing(t *testing.T) {
	w := newWorld(t)
	opts := w.options(harnessGemini, scopeUser)
	opts.DryRun = true
	require.NoError(t, Install(opts))
	require.Contains(t, w.out.String(), "+++ "+filepath.Join(w.home, ".gemini", "settings.json"))
	require.Contains(t, w.out.String(), "dry run: nothing written")
	require.NoDirExists(t, filepath.Join(w.home, ".gemini"))
}

func TestInstallAgentCLIUpdatesTheProgram(t *testing.T) {
	w := newWorld(t)
	path := filepath.Join(w.home, ".codex", "hooks.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(`{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"/old/loop-gate codex","timeout":30}]},{"hooks":[{"type":"command","command":"loop-gate codex"}]}]}}`), 0o644))
	opts := w.options(harnessCodex, scopeUser)
	opts.Command, opts.CommandSet = "/opt/bin/loop-gate", true
	require.NoError(t, Install(opts))
	got := w.read(t, path)
	require.Equal(t, []string{plugin.GateCommand("/opt/bin/loop-gate", "codex")}, hookCommands(t, got, "Stop"))
	require.Contains(t, got, `"timeout": 30`, "the entry's other keys are kept")
	require.Contains(t, w.out.String(), "removed a duplicate loop-gate Stop hook")
}

func TestCodexHooksFeatureIsEnabledWhenOff(t *testing.T) {
	w := newWorld(t)
	bin := t.TempDir()
	// A codex that reports hooks off, and records what it is asked.
	log := filepath.Join(t.TempDir(), "codex.log")
	script := "#!/bin/sh\necho \"$*\" >> " + log + "\ncase \"$*\" in\n'features list') echo 'hooks                                    stable             false';;\nesac\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "codex"), []byte(script), 0o755))
	w.env["PATH"] = bin
	require.NoError(t, Install(w.options(harnessCodex, scopeUser)), w.err.String())
	calls, err := os.ReadFile(log)
	require.NoError(t, err)
	dir := plugin.CodexMarketplaceDir(func(string) string { return "" }, w.home)
	require.Equal(t, "features list\nfeatures enable hooks\nplugin marketplace add "+dir+"\nplugin add the-loop@theloop\n", string(calls))
	require.Contains(t, w.out.String(), "codex: enabled the hooks feature")
	require.Contains(t, w.out.String(), "codex: the-loop@theloop installed")
}

// --- the real CLIs ----------------------------------------------------------

// realCLI is the named CLI on PATH, or a skip saying how to get it.
func realCLI(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		required.Skip(t, name, fmt.Sprintf("the %s CLI is not on PATH: npm install %s and put node_modules/.bin on PATH (.ci/run does) to check the installation with the real client", name, pkg))
	}
	return p
}

func runReal(t *testing.T, home, dir, prog string, args ...string) string {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+home, "CODEX_HOME=", "GEMINI_CLI_TRUST_WORKSPACE=true", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s:\n%s", prog, strings.Join(args, " "), out)
	return string(out)
}

// TestCodexAcceptsTheInstall: the real codex adds the marketplace and the
// plugin loopctl install wrote, lists it installed and enabled with its
// skills, keeps its hooks feature on, and forgets it after uninstall.
func TestCodexAcceptsTheInstall(t *testing.T) {
	codex := realCLI(t, "codex", "@openai/codex")
	w := newWorld(t)
	// Codex refuses to put helper binaries under a temporary directory
	// only with a warning; the home is the test's own.
	w.env["PATH"] = filepath.Dir(codex) + string(os.PathListSeparator) + os.Getenv("PATH")
	require.NoError(t, Install(w.options(harnessCodex, scopeUser)), w.err.String())
	require.Contains(t, w.out.String(), "codex: the-loop@theloop installed", w.err.String())
	list := runReal(t, w.home, w.home, codex, "plugin", "list")
	require.Regexp(t, `the-loop@theloop\s+installed, enabled`, list)
	features := runReal(t, w.home, w.home, codex, "features", "list")
	on, known := featureState(features, "hooks")
	require.True(t, known && on, features)
	cache := filepath.Join(w.home, ".codex", "plugins", "cache", plugin.MarketplaceName, plugin.Name)
	entries, err := os.ReadDir(cache)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	for _, c := range append(plugin.Commands(), plugin.Name) {
		require.FileExists(t, filepath.Join(cache, entries[0].Name(), "skills", c, "SKILL.md"))
	}

	// Installing again changes nothing Codex sees.
	require.NoError(t, Install(w.options(harnessCodex, scopeUser)), w.err.String())
	require.Equal(t, list, runReal(t, w.home, w.home, codex, "plugin", "list"))

	require.NoError(t, Uninstall(w.options(harnessCodex, scopeUser)), w.err.String())
	require.False(t, marketplaceListed(runReal(t, w.home, w.home, codex, "plugin", "marketplace", "list")))
	require.JSONEq(t, `{}`, w.read(t, w.home, ".codex", "hooks.json"))
}

// TestGeminiAcceptsTheInstall: the real gemini validates the extension
// loopctl install wrote, lists it enabled with the skill, and lists it no
// more after uninstall.
func TestGeminiAcceptsTheInstall(t *testing.T) {
	gemini := realCLI(t, "gemini", "@google/gemini-cli")
	w := newWorld(t)
	require.NoError(t, Install(w.options(harnessGemini, scopeUser)), w.err.String())
	dir := plugin.GeminiExtensionDir(w.home)
	out := runReal(t, w.home, w.home, gemini, "extensions", "validate", dir)
	require.Contains(t, out, "successfully validated")
	out = runReal(t, w.home, w.home, gemini, "extensions", "list")
	require.Contains(t, out, "the-loop (")
	require.Contains(t, out, "Enabled (User): true")
	require.Contains(t, out, "the-loop: How to work an item")
	var settings map[string]any
	require.NoError(t, json.Unmarshal([]byte(w.read(t, w.home, ".gemini", "settings.json")), &settings))

	require.NoError(t, Uninstall(w.options(harnessGemini, scopeUser)), w.err.String())
	out = runReal(t, w.home, w.home, gemini, "extensions", "list")
	require.NotContains(t, out, "the-loop (")
}
