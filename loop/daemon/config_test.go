package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
)

func parseCLI(t *testing.T, yaml string) loop.CLIConfig {
	t.Helper()
	c, err := loop.ParseCLIConfig("cli-config.yaml", []byte(yaml))
	require.NoError(t, err)
	return c
}

func TestConfigFromCLIMapsDaemonSpecKeys(t *testing.T) {
	c := parseCLI(t, `
state:
  root: st
repositories: [octo/demo]
queue:
  url: nats://127.0.0.1:4222
webhooks:
  ghWebhook:
    host: 0.0.0.0
    port: 9999
    path: /hooks/gh
    secretEnv: MY_SECRET
routing:
  authorizedUsers: [dana]
  spawnOnUnmatched: labeled
  autoExecuteLabel: go-go
  maxConcurrentDispatches: 7
  control:
    requireStartCommand: false
  interaction:
    mode: CLI
  workspace:
    root: /srv/ws
  harnessArgs:
    claude: [--model, opus]
  reactions:
    started: rocket
polling:
  intervalSeconds: 30
  sources:
    - provider: github
      repos: [octo/other]
`)
	env := map[string]string{"MY_SECRET": "s3"}
	cfg, warns, err := ConfigFromCLI(c, func(k string) string { return env[k] }, "/work")
	require.NoError(t, err)
	require.Empty(t, warns)
	home, err := os.UserHomeDir()
	require.NoError(t, err)
	require.Equal(t, filepath.Join(home, "st"), cfg.StateRoot, "a relative state.root is under the home directory, as loopctl and loop-gate take it — never the working directory")
	env["THE_LOOP_STATE_ROOT"] = "/srv/theloop"
	cfg2, _, err := ConfigFromCLI(c, func(k string) string { return env[k] }, "/work")
	require.NoError(t, err)
	require.Equal(t, "/srv/theloop", cfg2.StateRoot, "THE_LOOP_STATE_ROOT overrides state.root")
	require.Equal(t, "0.0.0.0:9999", cfg.Listen)
	require.Equal(t, "/hooks/gh", cfg.WebhookPath)
	require.Equal(t, []byte("s3"), cfg.Secret)
	require.Equal(t, "nats://127.0.0.1:4222", cfg.QueueURL)
	require.ElementsMatch(t, []string{"octo/demo", "octo/other"}, cfg.Repos)
	require.Equal(t, []string{"dana"}, cfg.AuthorizedUsers)
	require.Equal(t, SpawnLabeled, cfg.SpawnOnUnmatched)
	require.Equal(t, "go-go", cfg.AutoExecuteLabel)
	require.Equal(t, 7, cfg.Parallelism)
	require.False(t, cfg.RequireStartCommand)
	require.Equal(t, InteractionCLI, cfg.InteractionMode)
	require.Equal(t, "/srv/ws", cfg.WorkspaceRoot)
	require.Equal(t, []string{"--model", "opus"}, cfg.HarnessArgs)
	require.Equal(t, "rocket", cfg.Reactions.Started)
	require.Equal(t, "hooray", cfg.Reactions.Completed)
	require.Equal(t, 30*time.Second, cfg.ReconcileInterval)
	require.Len(t, cfg.Poll.Sources, 1)
}

func TestConfigFromCLIDefaults(t *testing.T) {
	cfg, _, err := ConfigFromCLI(loop.DefaultCLIConfig(), func(string) string { return "" }, "/w")
	require.NoError(t, err)
	require.Equal(t, DefaultListen, cfg.Listen)
	require.Equal(t, DefaultWebhookPath, cfg.WebhookPath)
	require.Empty(t, cfg.Secret)
	require.Equal(t, SpawnNever, cfg.SpawnOnUnmatched)
	require.True(t, cfg.RequireStartCommand)
	require.Equal(t, InteractionWorkItem, cfg.InteractionMode)
	require.ErrorIs(t, cfg.Validate(), ErrNoSecret, "no secret refuses to run")
	cfg.InsecureAcceptUnsigned = true
	require.NoError(t, cfg.Validate())
}

func TestConfigFromCLIRefusesBadValues(t *testing.T) {
	_, _, err := ConfigFromCLI(parseCLI(t, "routing:\n  spawnOnUnmatched: sometimes\n"), func(string) string { return "" }, "/w")
	require.ErrorContains(t, err, "routing.spawnOnUnmatched")
	_, warns, err := ConfigFromCLI(parseCLI(t, "routing:\n  interaction:\n    mode: auto\n"), func(string) string { return "" }, "/w")
	require.NoError(t, err)
	require.Len(t, warns, 1, "an unknown interaction mode is work-item with a warning")
}

func TestSecretFromTheDefaultVariable(t *testing.T) {
	cfg, _, err := ConfigFromCLI(loop.DefaultCLIConfig(), func(k string) string {
		if k == DefaultSecretEnv {
			return "x"
		}
		return ""
	}, "/w")
	require.NoError(t, err)
	require.Equal(t, []byte("x"), cfg.Secret)
}

func TestConfigFromCLIClusterKeys(t *testing.T) {
	c := parseCLI(t, `
state:
  root: /st
queue:
  url: nats://10.0.0.1:4222,nats://10.0.0.2:4222
  replicas: 3
service:
  node: loopd-a
  maxSessions: 8
  leaseTTLSeconds: 20
`)
	cfg, _, err := ConfigFromCLI(c, func(string) string { return "" }, "/work")
	require.NoError(t, err)
	require.Equal(t, ClusterConfig{Node: "loopd-a", MaxSessions: 8, LeaseTTL: 20 * time.Second, QueueReplicas: 3}, cfg.Cluster)

	// Defaults: one node, the whole queue.
	cfg, _, err = ConfigFromCLI(parseCLI(t, "state:\n  root: /st\n"), func(string) string { return "" }, "/work")
	require.NoError(t, err)
	require.Equal(t, ClusterConfig{LeaseTTL: 15 * time.Second, QueueReplicas: 1}, cfg.Cluster)

	// Sharing needs a shared queue.
	_, _, err = ConfigFromCLI(parseCLI(t, "state:\n  root: /st\nservice:\n  node: a\n"), func(string) string { return "" }, "/work")
	require.ErrorIs(t, err, loop.ErrInvalidConfig)
	require.ErrorContains(t, err, "queue.url")

	// A misspelt key is refused with the nearest valid one.
	_, err = loop.ParseCLIConfig("cli-config.yaml", []byte("service:\n  maxSession: 3\n"))
	require.ErrorContains(t, err, "service.maxSessions")
}

// routing.tmux close settings (daemon-spec §6.6, §12.2): the reference's
// defaults keep the session and end the harness inside it.
func TestConfigFromCLITmuxCloseSettings(t *testing.T) {
	cfg, _, err := ConfigFromCLI(parseCLI(t, "state:\n  root: /st\n"), func(string) string { return "" }, "/work")
	require.NoError(t, err)
	require.True(t, cfg.KeepSessionOnClose)
	require.True(t, cfg.KillHarnessOnClose)
	require.Equal(t, 5*time.Second, cfg.HarnessKillGrace)

	cfg, _, err = ConfigFromCLI(parseCLI(t, `
state:
  root: /st
routing:
  tmux:
    keepSessionOnClose: true
    killHarnessOnClose: false
    harnessKillGraceSeconds: 0.5
`), func(string) string { return "" }, "/work")
	require.NoError(t, err)
	require.True(t, cfg.KeepSessionOnClose)
	require.False(t, cfg.KillHarnessOnClose)
	require.Equal(t, 500*time.Millisecond, cfg.HarnessKillGrace)

	_, err = loop.ParseCLIConfig("cli-config.yaml", []byte("routing:\n  tmux:\n    killHarnesOnClose: true\n"))
	require.Error(t, err, "a misspelt key is refused")

	_, _, err = ConfigFromCLI(parseCLI(t, "state:\n  root: /st\nrouting:\n  tmux:\n    harnessKillGraceSeconds: -1\n"), func(string) string { return "" }, "/work")
	require.ErrorIs(t, err, loop.ErrInvalidConfig)
}

// routing.tmux.socketPath puts the agents' tmux server on a socket the
// operator can reach (systemd's PrivateTmp hides the default one); the
// attach command then names it. Only an absolute path is taken.
func TestConfigFromCLITmuxSocketPath(t *testing.T) {
	for _, tc := range []struct {
		name, value, want, err string
	}{
		{"unset: the default server", "", "", ""},
		{"absolute", "/var/lib/loopd/tmux.sock", "/var/lib/loopd/tmux.sock", ""},
		{"relative is refused", "tmux.sock", "", "routing.tmux.socketPath: \"tmux.sock\" must be an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "state:\n  root: /st\n"
			if tc.value != "" {
				doc += "routing:\n  tmux:\n    socketPath: " + tc.value + "\n"
			}
			cfg, _, err := ConfigFromCLI(parseCLI(t, doc), func(string) string { return "" }, "/work")
			if tc.err != "" {
				require.ErrorIs(t, err, loop.ErrInvalidConfig)
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, cfg.Tmux.SocketPath)
			require.NoError(t, cfg.Tmux.Validate())
		})
	}
}

func TestConfigFromCLISandboxKeys(t *testing.T) {
	for _, tc := range []struct {
		routing map[string]any
		off     bool
		env     []string
		err     string
	}{
		{map[string]any{}, false, nil, ""},
		{map[string]any{"sandbox": "off", "agentEnv": []any{"ANTHROPIC_API_KEY"}}, true, []string{"ANTHROPIC_API_KEY"}, ""},
		{map[string]any{"sandbox": false}, true, nil, ""},
		{map[string]any{"sandbox": "maybe"}, false, nil, "routing.sandbox"},
		{map[string]any{"agentEnv": []any{"GH_TOKEN"}}, false, nil, "routing.agentEnv: GH_TOKEN"},
		{map[string]any{"agentEnv": []any{"THE_LOOP_GH_WEBHOOK_SECRET"}}, false, nil, "routing.agentEnv: THE_LOOP_GH_WEBHOOK_SECRET"},
	} {
		c := loop.CLIConfig{StateRoot: "/srv/theloop", Raw: map[string]any{"routing": tc.routing}}
		cfg, _, err := ConfigFromCLI(c, func(string) string { return "" }, "/work")
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.off, cfg.SandboxOff)
		require.Equal(t, tc.env, cfg.AgentEnv)
	}
}
