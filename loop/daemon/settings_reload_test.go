package daemon_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// The Settings page follows a reload: a key the reload applied shows its
// new value, from the file; a key only a restart applies is named, with
// the time of the reload, above the rows (issue 38).
func TestSettingsPageShowsTheLastReload(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) { c.Dashboard.Listen = "127.0.0.1:0" })
	get := dashboardPages(t, w)
	before := get(w.d.DashboardURL() + "/settings?key=routing.autoExecuteLabel")
	require.NotContains(t, before, `id="settings-reloaded"`, "no reload yet")
	require.NotContains(t, before, "ship-it-now")

	// The operator's file, re-read: a new auto-execute label (reloadable)
	// and another state root (a restart's).
	yaml := fmt.Sprintf("state:\n  root: %s-elsewhere\nrouting:\n  autoExecuteLabel: ship-it-now\n", w.cfg.StateRoot)
	cli, err := loop.ParseCLIConfig("cli-config.yaml", []byte(yaml))
	require.NoError(t, err)
	next, _, err := daemon.ConfigFromCLI(cli, func(string) string { return "" }, t.TempDir())
	require.NoError(t, err)
	res, err := w.d.Reload(next)
	require.NoError(t, err)
	require.Contains(t, strings.Join(res.Applied, "\n"), "routing.autoExecuteLabel")
	require.Contains(t, strings.Join(res.NeedRestart, "\n"), "state.root")

	after := get(w.d.DashboardURL() + "/settings?key=routing.autoExecuteLabel")
	require.Contains(t, after, `<tr data-key="routing.autoExecuteLabel" data-source="file">`)
	require.Contains(t, after, "ship-it-now")
	_, note, ok := strings.Cut(after, `id="settings-reloaded">`)
	require.True(t, ok, "the reload's line is on the page")
	note, _, _ = strings.Cut(note, `</p>`)
	require.Contains(t, note, "Reloaded at ")
	require.Contains(t, note, "state.root", "the key that waits for a restart is named")
}
