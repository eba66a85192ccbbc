package sessions

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	return m
}

func testClaudeEnv(t *testing.T) (ClaudeEnvironment, string) {
	home := t.TempDir()
	root := filepath.Join(home, "work")
	env := ClaudeEnvironmentFromEnv(func(string) string { return "" }, home, root)
	return env, root
}

func TestClaudeEnvironmentFromEnv(t *testing.T) {
	home := t.TempDir()
	env := ClaudeEnvironmentFromEnv(func(string) string { return "" }, home, "")
	require.Equal(t, filepath.Join(home, ".claude"), env.ConfigDir)
	require.Equal(t, filepath.Join(home, ".claude.json"), env.UserConfigFile)
	require.Equal(t, filepath.Join(home, ".claude", "settings.json"), env.SettingsFile)

	cfg := t.TempDir()
	getenv := func(k string) string {
		if k == "CLAUDE_CONFIG_DIR" {
			return cfg
		}
		return ""
	}
	env = ClaudeEnvironmentFromEnv(getenv, home, "")
	require.Equal(t, filepath.Join(cfg, ".claude.json"), env.UserConfigFile)
	require.NoError(t, os.WriteFile(filepath.Join(cfg, ".config.json"), []byte("{}"), 0o600))
	env = ClaudeEnvironmentFromEnv(getenv, home, "")
	require.Equal(t, filepath.Join(cfg, ".config.json"), env.UserConfigFile)
}

func TestClaudePrepareTrustAndPlugin(t *testing.T) {
	env, root := testClaudeEnv(t)
	cwd := filepath.Join(root, ".worktrees", "github.com", "o", "r", "github-o-r-1")
	require.NoError(t, os.MkdirAll(cwd, 0o755))
	// An existing user config keeps its other keys, numbers and mode.
	require.NoError(t, os.WriteFile(env.UserConfigFile, []byte(`{"numStartups": 12345678901234567890, "projects": {"/other": {"x": 1}}}`), 0o640))

	p, err := env.Prepare(cwd, nil)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{env.UserConfigFile, env.SettingsFile, env.MarketplaceDir}, p.Changed)
	require.Equal(t, []string{cwd, root}, p.Trusted, "workspace-root scope trusts the root too")

	user := readJSON(t, env.UserConfigFile)
	projects := user["projects"].(map[string]any)
	for _, d := range []string{cwd, root} {
		require.Equal(t, true, projects[d].(map[string]any)["hasTrustDialogAccepted"], d)
		require.Equal(t, true, projects[d].(map[string]any)["hasCompletedProjectOnboarding"], d)
	}
	require.Contains(t, projects, "/other")
	raw, err := os.ReadFile(env.UserConfigFile)
	require.NoError(t, err)
	require.Contains(t, string(raw), "12345678901234567890", "numbers are kept exactly")
	require.NotContains(t, user, "bypassPermissionsModeAccepted")
	fi, err := os.Stat(env.UserConfigFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "existing mode preserved")

	settings := readJSON(t, env.SettingsFile)
	require.Equal(t, map[string]any{"source": map[string]any{"source": "directory", "path": env.MarketplaceDir}},
		settings["extraKnownMarketplaces"].(map[string]any)["theloop"])
	require.Equal(t, true, settings["enabledPlugins"].(map[string]any)["the-loop@theloop"])
	require.NotContains(t, settings["enabledPlugins"], "the-loop@the-loop", "the Python the-loop's plugin is not referenced")
	require.FileExists(t, filepath.Join(env.MarketplaceDir, "the-loop", "commands", "work-on.md"))
	fi, err = os.Stat(env.SettingsFile)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "new files are private")

	// A second run changes nothing and writes nothing.
	p, err = env.Prepare(cwd, nil)
	require.NoError(t, err)
	require.Empty(t, p.Changed)
}

func TestClaudePrepareNeverFlipsOperatorChoices(t *testing.T) {
	env, root := testClaudeEnv(t)
	require.NoError(t, os.MkdirAll(filepath.Dir(env.SettingsFile), 0o700))
	require.NoError(t, os.WriteFile(env.SettingsFile, []byte(`{"enabledPlugins":{"the-loop@theloop":false}}`), 0o600))
	_, err := env.Prepare(root, nil)
	require.NoError(t, err)
	settings := readJSON(t, env.SettingsFile)
	require.Equal(t, false, settings["enabledPlugins"].(map[string]any)["the-loop@theloop"])

	// The Python the-loop's plugin, enabled by the operator, stays enabled
	// and is reported.
	require.NoError(t, os.WriteFile(env.SettingsFile, []byte(`{"enabledPlugins":{"the-loop@the-loop":true}}`), 0o600))
	p, err := env.Prepare(root, nil)
	require.NoError(t, err)
	require.Len(t, p.Warnings, 1)
	require.Contains(t, p.Warnings[0], "claude plugin disable the-loop@the-loop")
	settings = readJSON(t, env.SettingsFile)
	require.Equal(t, true, settings["enabledPlugins"].(map[string]any)["the-loop@the-loop"])
}

func TestClaudePrepareLeavesUnparseableFilesAlone(t *testing.T) {
	for name, content := range map[string]string{"not json": "{oops", "not an object": "[1,2]"} {
		t.Run(name, func(t *testing.T) {
			env, root := testClaudeEnv(t)
			require.NoError(t, os.WriteFile(env.UserConfigFile, []byte(content), 0o600))
			_, err := env.Prepare(root, nil)
			require.Error(t, err)
			require.Contains(t, err.Error(), env.UserConfigFile)
			data, rerr := os.ReadFile(env.UserConfigFile)
			require.NoError(t, rerr)
			require.Equal(t, content, string(data))
		})
	}
}

func TestClaudePrepareWritesThroughSymlinks(t *testing.T) {
	env, root := testClaudeEnv(t)
	real := filepath.Join(t.TempDir(), "real-claude.json")
	require.NoError(t, os.WriteFile(real, []byte(`{}`), 0o600))
	require.NoError(t, os.Symlink(real, env.UserConfigFile))
	_, err := env.Prepare(root, nil)
	require.NoError(t, err)
	fi, err := os.Lstat(env.UserConfigFile)
	require.NoError(t, err)
	require.Equal(t, os.ModeSymlink, fi.Mode()&os.ModeSymlink, "the link is kept")
	require.Contains(t, readJSON(t, real), "projects")
}

func TestClaudePrepareBypassAndScope(t *testing.T) {
	tests := []struct {
		name        string
		accept      string
		args        []string
		wantBypass  bool
		scope       string
		wantTrusted int
	}{
		{name: "auto without flag", accept: BypassAuto, wantBypass: false, scope: TrustWorkspaceRoot, wantTrusted: 2},
		{name: "auto with skip flag", accept: BypassAuto, args: []string{"--dangerously-skip-permissions"}, wantBypass: true, scope: TrustWorkspaceRoot, wantTrusted: 2},
		{name: "auto with mode", accept: BypassAuto, args: []string{"--permission-mode", "bypassPermissions"}, wantBypass: true, scope: TrustDirectory, wantTrusted: 1},
		{name: "auto with mode=", accept: BypassAuto, args: []string{"--permission-mode=bypassPermissions"}, wantBypass: true, scope: TrustDirectory, wantTrusted: 1},
		{name: "never", accept: BypassNever, args: []string{"--dangerously-skip-permissions"}, wantBypass: false, scope: TrustWorkspaceRoot, wantTrusted: 2},
		{name: "always", accept: BypassAlways, wantBypass: true, scope: TrustWorkspaceRoot, wantTrusted: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, root := testClaudeEnv(t)
			env.AcceptBypass, env.TrustScope = tt.accept, tt.scope
			cwd := filepath.Join(root, "wt")
			require.NoError(t, os.MkdirAll(cwd, 0o755))
			p, err := env.Prepare(cwd, tt.args)
			require.NoError(t, err)
			require.Len(t, p.Trusted, tt.wantTrusted)
			user := readJSON(t, env.UserConfigFile)
			settings := readJSON(t, env.SettingsFile)
			if tt.wantBypass {
				require.Equal(t, true, user["bypassPermissionsModeAccepted"])
				require.Equal(t, true, settings["skipDangerousModePermissionPrompt"])
			} else {
				require.NotContains(t, user, "bypassPermissionsModeAccepted")
				require.NotContains(t, settings, "skipDangerousModePermissionPrompt")
			}
		})
	}
}

func TestClaudePrepareNeverTrustsHomeOrRoot(t *testing.T) {
	env, _ := testClaudeEnv(t)
	env.WorkspaceRoot = env.Home // a workspace root of $HOME must not trust all of it
	cwd := filepath.Join(env.Home, "wt")
	require.NoError(t, os.MkdirAll(cwd, 0o755))
	p, err := env.Prepare(cwd, nil)
	require.NoError(t, err)
	require.Equal(t, []string{cwd}, p.Trusted)

	env.WorkspaceRoot = "/"
	p, err = env.Prepare(cwd, nil)
	require.NoError(t, err)
	require.Equal(t, []string{cwd}, p.Trusted)
}

func TestClaudeCodePrepareDisabledWithoutConfigDir(t *testing.T) {
	c := &ClaudeCode{}
	p, err := c.PrepareEnvironment(t.TempDir())
	require.NoError(t, err)
	require.Empty(t, p.Changed)
}
