package daemon

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReloadDiff: a reload's diff names each changed key once, applied when
// a part reloads it (and only the parts that reload it are touched), else
// needing a restart; identical configurations differ in nothing.
func TestReloadDiff(t *testing.T) {
	cur := DefaultConfig()
	cur.StateRoot = "/s"
	same := cur
	require.Empty(t, diffConfig(&cur, &same, reloadedBy).Applied)
	require.Empty(t, diffConfig(&cur, &same, reloadedBy).NeedRestart)

	partNames := func(df reloadDiff) []string {
		var out []string
		for _, i := range df.parts {
			out = append(out, reloadParts[i].name)
		}
		return out
	}
	for name, tc := range map[string]struct {
		change      func(c *Config)
		applied     []string
		needRestart []string
		parts       []string
	}{
		"a restart key":                 {func(c *Config) { c.Webhook.Port = 1 }, nil, []string{"webhooks.ghWebhook.host/port"}, nil},
		"the harness arguments":         {func(c *Config) { c.Routing.HarnessArgs.Codex = []string{"--x"} }, nil, []string{"routing.harnessArgs"}, nil},
		"reactions, the intake's alone": {func(c *Config) { c.Routing.Reactions.Started = "rocket" }, []string{"routing.reactions"}, nil, []string{"intake"}},
		"authorized users, three parts": {func(c *Config) { c.Routing.AuthorizedUsers = []string{"dana"} }, []string{"routing.authorizedUsers"}, nil, []string{"receiver", "intake", "graphs"}},
		"routing.authorized, receiver and authority": {func(c *Config) { c.Routing.Authorized = []string{"team:octo/ops"} },
			[]string{"routing.authorized, routing.authorizedCacheSeconds"}, nil, []string{"receiver", "authority"}},
		"the stuck age, the metrics'": {func(c *Config) { c.Service.GateStuckAfter = 1 }, []string{"service.metrics.gateStuckAfterSeconds"}, nil, []string{"metrics"}},
		"both kinds, in table order": {func(c *Config) { c.Routing.GraphEnabled = !c.Routing.GraphEnabled; c.Repositories = []string{"o/r"} },
			[]string{"repositories"}, []string{"routing.graph.enabled"}, []string{"receiver", "intake"}},
	} {
		t.Run(name, func(t *testing.T) {
			next := cur
			tc.change(&next)
			df := diffConfig(&cur, &next, reloadedBy)
			require.Equal(t, tc.applied, df.Applied)
			require.Equal(t, tc.needRestart, df.NeedRestart)
			require.Equal(t, tc.parts, partNames(df))
		})
	}
}
