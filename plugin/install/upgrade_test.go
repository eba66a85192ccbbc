package install

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/plugin"
)

// Upgrade finds what was installed at user scope and installs this
// binary's version over it: a plugin file an older version wrote is
// replaced, a custom loop-gate program is kept, and what was never
// installed stays uninstalled.
func TestUpgradeReinstallsWhatIsInstalled(t *testing.T) {
	w := newWorld(t)
	require.Empty(t, Installed(w.options(harnessClaude, scopeUser).Env))
	results, err := Upgrade(*w.options(harnessClaude, scopeUser))
	require.NoError(t, err)
	require.Empty(t, results, "nothing installed, nothing upgraded")

	claude := w.options(harnessClaude, scopeUser)
	claude.Command, claude.CommandSet = "/opt/theloop/loop-gate", true
	require.NoError(t, Install(claude))
	require.NoError(t, Install(w.options(harnessCursor, scopeUser)))
	require.Equal(t, []string{harnessClaude, harnessCursor}, Installed(claude.Env))

	// An older version's file.
	dir := plugin.MarketplaceDir(claude.Env.Getenv, w.home)
	skill := filepath.Join(dir, plugin.Name, "skills", "the-loop", "SKILL.md")
	want := w.read(t, skill)
	require.NoError(t, os.WriteFile(skill, []byte("an older skill\n"), 0o644))

	results, err = Upgrade(*w.options(harnessClaude, scopeUser))
	require.NoError(t, err)
	require.Len(t, results, 2)
	require.Equal(t, harnessClaude, results[0].Harness)
	require.NotEmpty(t, results[0].Report)
	require.Contains(t, results[0].Report[0], "file(s) written or removed")
	require.Equal(t, want, w.read(t, skill), "the file is this version's again")
	require.Equal(t, "/opt/theloop/loop-gate", plugin.InstalledGateProgram(dir), "the custom loop-gate is kept")
	require.Contains(t, results[1].Report[0], "nothing to do")

	// Twice changes nothing.
	results, err = Upgrade(*w.options(harnessClaude, scopeUser))
	require.NoError(t, err)
	require.Contains(t, results[0].Report[0], "nothing to do")
}
