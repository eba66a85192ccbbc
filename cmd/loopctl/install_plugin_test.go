package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/required"
	"github.com/theloop-dev/theloop/plugin"
)

func (w *installWorld) marketplace() string {
	return plugin.MarketplaceDir(func(string) string { return "" }, w.home)
}

// uninstall runs `loopctl uninstall args...` like install.
func (w *installWorld) uninstall(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	f, io := testFactory(t, w.sub, nil)
	home := w.home
	f.HomeDir = func() (string, error) { return home, nil }
	code = Main(append([]string{"loopctl", "uninstall"}, args...), f)
	return code, io.out.String(), io.err.String()
}

// claudeFresh is a settings file install creates from nothing.
func claudeFresh(dir string) string {
	return `{
  "extraKnownMarketplaces": {
    "theloop": {
      "source": {
        "source": "directory",
        "path": ` + mustJSONString(dir) + `
      }
    }
  },
  "enabledPlugins": {
    "the-loop@theloop": true
  }
}
`
}

func installedStop(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, plugin.Name, "hooks", "hooks.json"))
	require.NoError(t, err)
	return plugin.Tree{plugin.HooksPath: b}.StopCommand()
}

// claudeProjectFresh is what --scope project writes into a repository's
// .claude/settings.json: the gate alone, run from PATH.
// jsonGuard is plugin.CrashGuard as a JSON string's text.
var jsonGuard = strings.ReplaceAll(plugin.CrashGuard, `"`, `\"`)

var claudeProjectFresh = `{
  "hooks": {
    "Stop": [
      {
        "hooks": [
          {
            "type": "command",
            "command": "loop-gate claude` + jsonGuard + `"
          }
        ]
      }
    ]
  }
}
`

func TestInstallClaudePluginFresh(t *testing.T) {
	for _, tc := range []struct {
		args []string
		path func(w installWorld) string
	}{
		{nil, func(w installWorld) string { return filepath.Join(w.home, ".claude", "settings.json") }},
	} {
		t.Run(strings.Join(append([]string{"scope"}, tc.args...), " "), func(t *testing.T) {
			w := newInstallWorld(t)
			code, out, errOut := w.install(t, tc.args...)
			require.Equal(t, 0, code, errOut)
			dir := w.marketplace()
			require.Equal(t, claudeFresh(dir), readFile(t, tc.path(w)))
			require.Contains(t, out, tc.path(w)+`: enabledPlugins["the-loop@theloop"] = true`)
			require.Contains(t, out, dir+": the-loop plugin "+plugin.Version()+"+")
			require.Contains(t, errOut, "loop-gate is not on PATH")
			require.FileExists(t, filepath.Join(dir, ".claude-plugin", "marketplace.json"))
			for _, c := range plugin.Commands() {
				require.FileExists(t, filepath.Join(dir, plugin.Name, "commands", c+".md"))
			}
			require.Equal(t, "loop-gate claude"+plugin.CrashGuard, installedStop(t, dir))
		})
	}
}

// TestInstallUninstallRoundTrip: install → uninstall → install leaves the
// user's other settings byte-identical.
func TestInstallUninstallRoundTrip(t *testing.T) {
	w := newInstallWorld(t)
	w.install(t, "--dry-run") // fixes w.home
	path := filepath.Join(w.home, ".claude", "settings.json")
	write(t, w.home, ".claude/settings.json", claudeExisting)
	require.NoError(t, os.Chmod(path, 0o600))
	dir := w.marketplace()

	// Dry run: what would change, and nothing written.
	code, out, errOut := w.install(t, "--dry-run")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "add "+filepath.Join(dir, plugin.Name, "commands", "work-on.md")+"\n")
	require.Contains(t, out, "+  \"enabledPlugins\": {\n")
	require.True(t, strings.HasSuffix(out, "dry run: nothing written\n"), out)
	require.Equal(t, claudeExisting, readFile(t, path))
	require.NoDirExists(t, dir)

	code, _, errOut = w.install(t)
	require.Equal(t, 0, code, errOut)
	installed := readFile(t, path)
	want := strings.TrimSuffix(claudeExisting, "\n}\n") + `,
  "extraKnownMarketplaces": {
    "theloop": {
      "source": {
        "source": "directory",
        "path": ` + mustJSONString(dir) + `
      }
    }
  },
  "enabledPlugins": {
    "the-loop@theloop": true
  }
}
`
	require.Equal(t, want, installed, "only theloop's keys are added; every other byte stays")
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the file keeps its permissions")

	// Twice: nothing changes, nothing is written.
	code, out, errOut = w.install(t)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "nothing to do")
	st2, err := os.Stat(path)
	require.NoError(t, err)
	require.True(t, os.SameFile(st, st2), "an up-to-date file is not rewritten")

	code, out, errOut = w.uninstall(t)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `removed enabledPlugins["the-loop@theloop"]`)
	require.Contains(t, out, "removed "+dir)
	require.Equal(t, claudeExisting, readFile(t, path), "uninstall restores the user's file byte for byte")
	require.NoDirExists(t, dir)

	code, _, errOut = w.install(t)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, installed, readFile(t, path))

	code, _, _ = w.uninstall(t)
	require.Equal(t, 0, code)
	code, out, _ = w.uninstall(t)
	require.Equal(t, 0, code)
	require.Contains(t, out, "nothing of theloop's to remove")
}

// TestInstallClaudeProjectTravels: --scope project writes into the
// committed .claude/settings.json only what holds in a teammate's checkout
// (the gate, from PATH or relative to $CLAUDE_PROJECT_DIR), takes out what an
// earlier install put there that does not, and writes nothing in HOME.
func TestInstallClaudeProjectTravels(t *testing.T) {
	w := newInstallWorld(t)
	code, out, errOut := w.install(t, "--scope", "project")
	require.Equal(t, 0, code, errOut)
	path := filepath.Join(w.repo, ".claude", "settings.json")
	require.Equal(t, claudeProjectFresh, readFile(t, path))
	require.Contains(t, out, "commit it")
	require.Contains(t, out, "--scope user")
	require.NotContains(t, readFile(t, path), w.home)
	require.NoDirExists(t, w.marketplace(), "project scope puts nothing in HOME")

	code, out, errOut = w.install(t, "--scope", "project")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "nothing to do")

	// A program inside the repository is named relative to the project.
	code, _, errOut = w.install(t, "--scope", "project", "--command", filepath.Join(w.repo, "bin", "loop-gate"))
	require.Equal(t, 0, code, errOut)
	require.Contains(t, readFile(t, path), `"command": "\"$CLAUDE_PROJECT_DIR\"/bin/loop-gate claude`+jsonGuard+`"`)
	code, out, errOut = w.install(t, "--scope", "project")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "nothing to do", "the project-relative program is kept")

	// A program in the installer's home is refused: it would not hold for a teammate.
	code, _, errOut = w.install(t, "--scope", "project", "--command", filepath.Join(w.home, "go", "bin", "loop-gate"))
	require.Equal(t, exitRefused, code)
	require.Contains(t, errOut, "in your home directory")
	require.NotContains(t, readFile(t, path), w.home)

	// An earlier install's entries that named HOME are replaced.
	w2 := newInstallWorld(t)
	w2.install(t, "--dry-run")
	write(t, w2.repo, ".claude/settings.json", strings.Replace(claudeFresh(w2.marketplace()), "\n}\n", `,
  "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "`+filepath.Join(w2.home, "go", "bin", "loop-gate")+` claude"}]}]}
}
`, 1))
	code, out, errOut = w2.install(t, "--scope", "project")
	require.Equal(t, 0, code, errOut)
	settings := readFile(t, filepath.Join(w2.repo, ".claude", "settings.json"))
	require.NotContains(t, settings, w2.home, out)
	require.Contains(t, settings, `"command": "loop-gate claude`+jsonGuard+`"`)
	require.Contains(t, errOut, "now runs \"loop-gate\" from PATH")
}

func TestInstallMovesAnOldStopHookIntoThePlugin(t *testing.T) {
	w := newInstallWorld(t)
	w.install(t, "--dry-run")
	write(t, w.home, ".claude/settings.json", `{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"/usr/local/bin/loop-gate claude"},{"type":"command","command":"say done"}]}],"PreToolUse":[]}}`)
	code, out, errOut := w.install(t)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `removed the Stop hook "/usr/local/bin/loop-gate claude" (the plugin runs the gate now)`)
	settings := readFile(t, filepath.Join(w.home, ".claude", "settings.json"))
	require.NotContains(t, settings, "loop-gate", "two gates would count two attempts per stop")
	require.Contains(t, settings, `{"type":"command","command":"say done"}`, "other hooks stay")
	require.Equal(t, "/usr/local/bin/loop-gate claude"+plugin.CrashGuard, installedStop(t, w.marketplace()), "the program moves with it")
	require.NotContains(t, errOut, "not on PATH", "an absolute program is not looked up")

	// Without --command, the installed program stays; with it, it changes.
	code, _, errOut = w.install(t)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "/usr/local/bin/loop-gate claude"+plugin.CrashGuard, installedStop(t, w.marketplace()))
	code, out, errOut = w.install(t, "--command", "/opt/the loop/loop-gate")
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "'/opt/the loop/loop-gate' claude"+plugin.CrashGuard, installedStop(t, w.marketplace()))
	require.Contains(t, out, fmt.Sprintf("Stop hook %q", "'/opt/the loop/loop-gate' claude"+plugin.CrashGuard))
}

func TestInstallReplacesAnOutdatedPlugin(t *testing.T) {
	w := newInstallWorld(t)
	code, _, errOut := w.install(t)
	require.Equal(t, 0, code, errOut)
	dir := w.marketplace()
	stale := filepath.Join(dir, plugin.Name, "commands", "retired.md")
	require.NoError(t, os.WriteFile(stale, []byte("---\ndescription: x\n---\n"), 0o644))
	skill := filepath.Join(dir, plugin.Name, filepath.FromSlash(plugin.SkillPath))
	require.NoError(t, os.WriteFile(skill, []byte("edited"), 0o644))

	code, out, errOut := w.install(t)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "2 file(s) written or removed")
	require.NoFileExists(t, stale)
	b, err := os.ReadFile(skill)
	require.NoError(t, err)
	want, err := os.ReadFile(filepath.Join("..", "..", "plugin", plugin.Name, filepath.FromSlash(plugin.SkillPath)))
	require.NoError(t, err)
	require.Equal(t, string(want), string(b))

	// A directory that is not ours is never overwritten.
	w2 := newInstallWorld(t)
	w2.install(t, "--dry-run")
	write(t, w2.marketplace(), "notes.txt", "mine")
	code, _, errOut = w2.install(t)
	require.Equal(t, exitFailed, code)
	require.Contains(t, errOut, "not theloop's")
	require.Equal(t, "mine", readFile(t, filepath.Join(w2.marketplace(), "notes.txt")))
}

func TestInstallWarnsAboutThePythonPlugin(t *testing.T) {
	w := newInstallWorld(t)
	write(t, w.repo, ".claude/settings.json", `{"enabledPlugins":{"the-loop@the-loop":true}}`)
	code, _, errOut := w.install(t, "--scope", "project")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "claude plugin disable the-loop@the-loop")
}

func TestInstallCursorRule(t *testing.T) {
	w := newInstallWorld(t)
	code, out, errOut := w.install(t, "--harness", "cursor", "--scope", "project")
	require.Equal(t, 0, code, errOut)
	rule := filepath.Join(w.repo, ".cursor", "rules", "the-loop.mdc")
	require.Equal(t, string(plugin.CursorRule()), readFile(t, rule))
	require.Contains(t, out, rule+": wrote the-loop's rule")
	code, out, _ = w.install(t, "--harness", "cursor", "--scope", "project")
	require.Equal(t, 0, code)
	require.Contains(t, out, rule+" is up to date")

	code, out, _ = w.install(t, "--harness", "cursor")
	require.Equal(t, 0, code)
	require.Contains(t, out, "Cursor reads rules per project")

	hooks := filepath.Join(w.repo, ".cursor", "hooks.json")
	code, out, errOut = w.uninstall(t, "--harness", "cursor", "--scope", "project")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "removed "+rule)
	require.NoFileExists(t, rule)
	require.NotContains(t, readFile(t, hooks), "loop-gate")
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(readFile(t, hooks)), &v))

	// A rule the user edited stays.
	write(t, w.repo, ".cursor/rules/the-loop.mdc", "mine")
	code, _, errOut = w.uninstall(t, "--harness", "cursor", "--scope", "project")
	require.Equal(t, 0, code)
	require.Contains(t, errOut, "left in place")
	require.FileExists(t, rule)
}

// --- the real Claude Code -------------------------------------------------------

// claudeCLI is the real claude program, or a skip.
func claudeCLI(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("claude")
	if err != nil {
		required.Skip(t, "claude", "the claude CLI is not on PATH: npm install @anthropic-ai/claude-code and put node_modules/.bin on PATH (.ci/run does) to validate the plugin with the real client")
	}
	return p
}

func runClaude(t *testing.T, claude, home string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(claude, args...)
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "HOME="+home, "CLAUDE_CONFIG_DIR="+filepath.Join(home, ".claude"), "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPluginWithRealClaude: the plugin as kept in the repository and the
// marketplace loopctl install writes both pass `claude plugin validate
// --strict`; after install Claude Code lists the plugin enabled at the
// installed version, with its commands, skill and both hooks; uninstall
// removes it.
func TestPluginWithRealClaude(t *testing.T) {
	claude := claudeCLI(t)
	src, err := filepath.Abs(filepath.Join("..", "..", "plugin", plugin.Name))
	require.NoError(t, err)
	out, err := runClaude(t, claude, t.TempDir(), "plugin", "validate", "--strict", src)
	require.NoError(t, err, out)

	w := newInstallWorld(t)
	f, io := testFactory(t, w.sub, nil)
	home, _ := f.HomeDir()
	w.home = home
	getenv := f.Getenv
	f.Getenv = func(k string) string {
		if k == "PATH" {
			return filepath.Dir(claude)
		}
		return getenv(k)
	}
	require.Equal(t, 0, Main([]string{"loopctl", "install"}, f), io.err.String())
	require.Contains(t, io.out.String(), "claude: the-loop@theloop installed (user scope)", io.err.String())
	dir := w.marketplace()

	for _, p := range []string{dir, filepath.Join(dir, plugin.Name)} {
		out, err := runClaude(t, claude, home, "plugin", "validate", "--strict", p)
		require.NoError(t, err, out)
	}
	out, err = runClaude(t, claude, home, "plugin", "list", "--json")
	require.NoError(t, err, out)
	var listed []struct {
		ID      string `json:"id"`
		Version string `json:"version"`
		Enabled bool   `json:"enabled"`
		Scope   string `json:"scope"`
	}
	require.NoError(t, json.Unmarshal([]byte(out[strings.Index(out, "["):]), &listed), out)
	var tree struct {
		Version string `json:"version"`
	}
	require.NoError(t, json.Unmarshal([]byte(readFile(t, filepath.Join(dir, plugin.Name, ".claude-plugin", "plugin.json"))), &tree))
	found := false
	for _, p := range listed {
		if p.ID == plugin.ID {
			found = true
			require.True(t, p.Enabled)
			require.Equal(t, tree.Version, p.Version)
			require.Equal(t, "user", p.Scope)
		}
	}
	require.True(t, found, "claude plugin list does not show %s:\n%s", plugin.ID, out)

	out, err = runClaude(t, claude, home, "plugin", "details", plugin.ID)
	require.NoError(t, err, out)
	for _, c := range append(plugin.Commands(), "the-loop") {
		require.Contains(t, out, c)
	}
	require.Contains(t, out, "SessionStart, Stop")

	// Settings Claude Code rewrote are still ours to uninstall.
	f2, io2 := testFactory(t, w.sub, nil)
	f2.HomeDir = func() (string, error) { return home, nil }
	f2.Getenv = f.Getenv
	require.Equal(t, 0, Main([]string{"loopctl", "uninstall"}, f2), io2.err.String())
	out, err = runClaude(t, claude, home, "plugin", "list", "--json")
	require.NoError(t, err, out)
	require.NotContains(t, out, plugin.ID)
	require.NotContains(t, readFile(t, filepath.Join(home, ".claude", "settings.json")), plugin.MarketplaceName)

	// Project scope: the committed file carries the gate only, and nothing
	// of the installer's home; Claude Code's own run of it is in the gate's
	// real-CLI test (loop/stopgate/realcli).
	f3, io3 := testFactory(t, w.sub, nil)
	f3.HomeDir = func() (string, error) { return home, nil }
	f3.Getenv = f.Getenv
	require.Equal(t, 0, Main([]string{"loopctl", "install", "--scope", "project"}, f3), io3.err.String())
	settings := readFile(t, filepath.Join(w.repo, ".claude", "settings.json"))
	require.Equal(t, claudeProjectFresh, settings)
	f4, io4 := testFactory(t, w.sub, nil)
	f4.HomeDir = func() (string, error) { return home, nil }
	f4.Getenv = f.Getenv
	require.Equal(t, 0, Main([]string{"loopctl", "uninstall", "--scope", "project"}, f4), io4.err.String())
	require.Contains(t, io4.out.String(), `removed the Stop hook "loop-gate claude"`)
}

func mustJSONString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
