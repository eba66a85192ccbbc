package daemon

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
)

// `loopctl config show` prints loop.Settings.Resolve's rows; loopd builds
// its Config from the same resolved Settings. For a few configs (defaults
// included) each shown value must be the one loopd uses.
func TestConfigShowEqualsWhatLoopdUses(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"defaults", ""},
		{"systemd example", "state: {root: /var/lib/loopd/state}\nrepositories: [octo/demo]\nrouting:\n  authorizedUsers: [dana]\n  spawnOnUnmatched: labeled\n  workspace: {root: /var/lib/loopd/ws}\n"},
		{"tuned", "polling:\n  enabled: false\n  intervalSeconds: 45\n  maxRetries: 7\n  sources:\n    - {provider: github, repos: [octo/extra], label: go}\nrouting:\n  dispatchTimeoutSeconds: 60\n  dedupCacheSize: 10\n  harnessTrust: {enabled: false, scope: directory}\n  harnessPlugins: {enabled: false}\n  tmux: {resumeProbeSeconds: 0.5, harnessKillGraceSeconds: 3}\n  spawnWorkdir: rel\neventLog: {path: ev.jsonl}\nservice: {stream: {enabled: false, keepAliveSeconds: 9}}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loop.ParseCLIConfig("cli-config.yaml", []byte(tc.yaml))
			require.NoError(t, err)
			env := func(k string) string {
				if k == "HOME" {
					return "/home/u"
				}
				return ""
			}
			st, err := loop.ResolveSettings(c, loop.SettingsEnv{Getenv: env, HomeDir: func() (string, error) { return "/home/u", nil }, WorkDir: "/work"})
			require.NoError(t, err)
			cfg, _, err := ConfigFromSettings(st, env)
			require.NoError(t, err)
			shown := map[string]any{}
			for _, r := range st.Shown() {
				shown[r.Key] = r.Value
			}
			secs := func(key string) time.Duration {
				switch v := shown[key].(type) {
				case int:
					return time.Duration(v) * time.Second
				case uint64:
					return time.Duration(v) * time.Second
				case float64:
					return time.Duration(v * float64(time.Second))
				}
				t.Fatalf("%s: %T", key, shown[key])
				return 0
			}
			num := func(key string) int {
				switch v := shown[key].(type) {
				case int:
					return v
				case uint64:
					return int(v)
				}
				t.Fatalf("%s: %T", key, shown[key])
				return 0
			}
			require.Equal(t, cfg.StateRoot, shown["state.root"])
			require.Equal(t, cfg.EventLog.Path, shown["eventLog.path"])
			require.Equal(t, cfg.Routing.SpawnWorkdir, shown["routing.spawnWorkdir"])
			require.Equal(t, cfg.Routing.WorkspaceRoot, shown["routing.workspace.root"])
			require.Equal(t, cfg.Webhook.Path, shown["webhooks.ghWebhook.path"])
			require.Equal(t, cfg.Routing.SpawnOnUnmatched, shown["routing.spawnOnUnmatched"])
			require.Equal(t, cfg.Routing.MaxConcurrentDispatches, num("routing.maxConcurrentDispatches"))
			require.Equal(t, cfg.Routing.DedupCacheSize, num("routing.dedupCacheSize"))
			require.Equal(t, IngressConfig(cfg).DedupSize, num("routing.dedupCacheSize"))
			require.Equal(t, cfg.PollerConfig().MaxRetries, num("polling.maxRetries"))
			require.Equal(t, cfg.PollerConfig().Interval, secs("polling.intervalSeconds"))
			if shown["polling.enabled"] == true {
				require.Equal(t, cfg.ReconcileInterval, secs("polling.intervalSeconds"), "loopd reconciles at the interval show prints")
			} else {
				require.Zero(t, cfg.ReconcileInterval, "polling.enabled: false reconciles only at start")
			}
			require.Equal(t, cfg.Routing.DispatchTimeout, secs("routing.dispatchTimeoutSeconds"))
			require.Equal(t, cfg.Routing.Tmux.ResumeProbe, secs("routing.tmux.resumeProbeSeconds"))
			require.Equal(t, cfg.Routing.Tmux.HarnessKillGrace, secs("routing.tmux.harnessKillGraceSeconds"))
			require.Equal(t, cfg.Service.StreamKeepAlive, secs("service.stream.keepAliveSeconds"))
			require.Equal(t, !cfg.Service.StreamDisabled, shown["service.stream.enabled"])
			require.Equal(t, cfg.Routing.HarnessTrust.Enabled, shown["routing.harnessTrust.enabled"])
			require.Equal(t, cfg.Routing.HarnessTrust.Scope, shown["routing.harnessTrust.scope"])
			require.Equal(t, cfg.Routing.HarnessPluginsEnabled, shown["routing.harnessPlugins.enabled"])
			require.Equal(t, cfg.Routing.Keywords, shown["routing.control.keywords"])
			if r, ok := shown["repositories"].([]string); ok {
				require.Equal(t, cfg.Repositories, r)
			} else {
				require.Empty(t, cfg.Repositories)
			}
		})
	}
}
