package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/workitem"
)

func parseCLI(t *testing.T, yaml string) loop.CLIConfig {
	t.Helper()
	c, err := loop.ParseCLIConfig("cli-config.yaml", []byte(yaml))
	require.NoError(t, err)
	return c
}

// fromYAML parses a CLI config and maps it: a value loopd cannot use is
// refused by either step (most when the file is read).
func fromYAML(yaml, workDir string) (Config, []string, error) {
	c, err := loop.ParseCLIConfig("cli-config.yaml", []byte(yaml))
	if err != nil {
		return Config{}, nil, err
	}
	return ConfigFromCLI(c, func(string) string { return "" }, workDir)
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
	require.Equal(t, "0.0.0.0:9999", cfg.Listen())
	require.Equal(t, "/hooks/gh", cfg.Webhook.Path)
	require.Equal(t, []byte("s3"), cfg.Secret)
	require.Equal(t, "nats://127.0.0.1:4222", cfg.Queue.URL)
	require.ElementsMatch(t, []string{"octo/demo", "octo/other"}, cfg.Repositories)
	require.Equal(t, []string{"dana"}, cfg.Routing.AuthorizedUsers)
	require.Equal(t, SpawnLabeled, cfg.Routing.SpawnOnUnmatched)
	require.Equal(t, "go-go", cfg.Routing.AutoExecuteLabel)
	require.Equal(t, 7, cfg.Routing.MaxConcurrentDispatches)
	require.False(t, cfg.Routing.RequireStartCommand)
	require.Equal(t, InteractionCLI, cfg.Routing.InteractionMode)
	require.Equal(t, "/srv/ws", cfg.Routing.WorkspaceRoot)
	require.Equal(t, []string{"--model", "opus"}, cfg.Routing.HarnessArgs.Claude)
	require.Equal(t, "rocket", cfg.Routing.Reactions.Started)
	require.Equal(t, "hooray", cfg.Routing.Reactions.Completed)
	require.Equal(t, 30*time.Second, cfg.ReconcileInterval)
	require.Len(t, cfg.PollerConfig().Sources, 1)
}

func TestConfigFromCLIDefaults(t *testing.T) {
	cfg, _, err := ConfigFromCLI(loop.DefaultCLIConfig(), func(string) string { return "" }, "/w")
	require.NoError(t, err)
	require.Equal(t, DefaultListen, cfg.Listen())
	require.Equal(t, DefaultWebhookPath, cfg.Webhook.Path)
	require.Empty(t, cfg.Secret)
	require.Equal(t, SpawnNever, cfg.Routing.SpawnOnUnmatched)
	require.True(t, cfg.Routing.RequireStartCommand)
	require.Equal(t, InteractionWorkItem, cfg.Routing.InteractionMode)
	require.ErrorIs(t, cfg.Validate(), ErrNoSecret, "no secret refuses to run")
	cfg.InsecureAcceptUnsigned = true
	require.NoError(t, cfg.Validate())
}

func TestConfigFromCLIRefusesBadValues(t *testing.T) {
	_, _, err := fromYAML("routing:\n  spawnOnUnmatched: sometimes\n", "/w")
	require.ErrorContains(t, err, "routing.spawnOnUnmatched")
	c := parseCLI(t, "routing:\n  interaction:\n    mode: auto\n")
	require.Len(t, c.Warnings, 1, "an unknown interaction mode is work-item with a warning")
	cfg, _, err := ConfigFromCLI(c, func(string) string { return "" }, "/w")
	require.NoError(t, err)
	require.Equal(t, InteractionWorkItem, cfg.Routing.InteractionMode)
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
  credsFile: /etc/nats/loopd.creds
service:
  node: loopd-a
  maxSessions: 8
  leaseTTLSeconds: 20
`)
	cfg, _, err := ConfigFromCLI(c, func(string) string { return "" }, "/work")
	require.NoError(t, err)
	require.Equal(t, ClusterConfig{Node: "loopd-a", MaxSessions: 8, LeaseTTL: 20 * time.Second, QueueReplicas: 3}, cfg.Cluster())

	// Defaults: one node, the whole queue.
	cfg, _, err = ConfigFromCLI(parseCLI(t, "state:\n  root: /st\n"), func(string) string { return "" }, "/work")
	require.NoError(t, err)
	require.Equal(t, ClusterConfig{LeaseTTL: 15 * time.Second, QueueReplicas: 1}, cfg.Cluster())

	// Sharing needs a shared queue.
	_, _, err = ConfigFromCLI(parseCLI(t, "state:\n  root: /st\nservice:\n  node: a\n"), func(string) string { return "" }, "/work")
	require.ErrorIs(t, err, loop.ErrInvalidConfig)
	require.ErrorContains(t, err, "queue.url")

	// A misspelt key is refused with the nearest valid one.
	_, err = loop.ParseCLIConfig("cli-config.yaml", []byte("service:\n  maxSession: 3\n"))
	require.ErrorContains(t, err, "service.maxSessions")
}

// routing.tmux close settings (docs/daemon.md §6.6, §12.2): the reference's
// defaults keep the session and end the harness inside it.
func TestConfigFromCLITmuxCloseSettings(t *testing.T) {
	cfg, _, err := ConfigFromCLI(parseCLI(t, "state:\n  root: /st\n"), func(string) string { return "" }, "/work")
	require.NoError(t, err)
	require.True(t, cfg.Routing.Tmux.KeepSessionOnClose)
	require.True(t, cfg.Routing.Tmux.KillHarnessOnClose)
	require.Equal(t, 5*time.Second, cfg.Routing.Tmux.HarnessKillGrace)

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
	require.True(t, cfg.Routing.Tmux.KeepSessionOnClose)
	require.False(t, cfg.Routing.Tmux.KillHarnessOnClose)
	require.Equal(t, 500*time.Millisecond, cfg.Routing.Tmux.HarnessKillGrace)

	_, err = loop.ParseCLIConfig("cli-config.yaml", []byte("routing:\n  tmux:\n    killHarnesOnClose: true\n"))
	require.Error(t, err, "a misspelt key is refused")

	_, _, err = fromYAML("state:\n  root: /st\nrouting:\n  tmux:\n    harnessKillGraceSeconds: -1\n", "/work")
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
			cfg, _, err := fromYAML(doc, "/work")
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
		routing string
		off     bool
		env     []string
		err     string
	}{
		{"{}", false, nil, ""},
		{"{sandbox: \"off\", agentEnv: [ANTHROPIC_API_KEY]}", true, []string{"ANTHROPIC_API_KEY"}, ""},
		{"{sandbox: false}", true, nil, ""},
		{"{sandbox: maybe}", false, nil, "routing.sandbox"},
		{"{agentEnv: [GH_TOKEN]}", false, nil, "routing.agentEnv: GH_TOKEN"},
		{"{agentEnv: [THE_LOOP_GH_WEBHOOK_SECRET]}", false, nil, "routing.agentEnv: THE_LOOP_GH_WEBHOOK_SECRET"},
	} {
		cfg, _, err := fromYAML("state: {root: /srv/theloop}\nrouting: "+tc.routing+"\n", "/work")
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.off, cfg.SandboxOff())
		require.Equal(t, tc.env, cfg.Routing.AgentEnv)
	}
}

func TestValidateUnsignedListensOnLoopbackOnly(t *testing.T) {
	require.False(t, loopbackAddr("127.0.0.1"), "no port")
	for _, tc := range []struct {
		host string
		port int
		ok   bool
	}{
		{"127.0.0.1", 8787, true}, {"[::1]", 0, true}, {"localhost", 1, true}, {"127.9.9.9", 1, true},
		{"0.0.0.0", 8787, false}, {"", 8787, false}, {"[::]", 1, false}, {"10.0.0.5", 1, false}, {"example.com", 1, false},
	} {
		cfg := DefaultConfig()
		cfg.StateRoot = "/s"
		cfg.InsecureAcceptUnsigned = true
		cfg.Webhook.Host, cfg.Webhook.Port = tc.host, tc.port
		listen, ok := cfg.Listen(), tc.ok
		err := cfg.Validate()
		if ok {
			require.NoError(t, err, listen)
			continue
		}
		require.ErrorContains(t, err, "webhooks.ghWebhook.host", listen)
		// With a secret the flag is moot and any address is fine.
		cfg.Secret = []byte("s3cret")
		require.NoError(t, cfg.Validate(), listen)
	}
}

// TestPayloadCloneURL: a payload's clone_url is used only for the work
// item's own repository on its own host, over https or ssh.
func TestPayloadCloneURL(t *testing.T) {
	gh := workitem.Ref{Provider: "github", Owner: "octo", Repo: "repo", Number: 1}
	ghe := workitem.Ref{Provider: "github", Host: "ghe.example.com:8443", Owner: "corp", Repo: "app", Number: 1}
	for _, tc := range []struct {
		item     workitem.Ref
		full, u  string
		accepted bool
	}{
		{gh, "octo/repo", "https://github.com/octo/repo.git", true},
		{gh, "Octo/Repo", "https://GitHub.com/Octo/Repo", true},
		{gh, "octo/repo", "ssh://git@github.com/octo/repo.git", true},
		{ghe, "corp/app", "https://ghe.example.com/corp/app.git", true},
		{ghe, "corp/app", "ssh://git@ghe.example.com:2222/corp/app.git", true},
		{gh, "octo/repo", "file:///etc/octo/repo.git", false},
		{gh, "octo/repo", "/srv/octo/repo.git", false},
		{gh, "octo/repo", "git@github.com:octo/repo.git", false},
		{gh, "octo/repo", "http://github.com/octo/repo.git", false},
		{gh, "octo/repo", "git://github.com/octo/repo.git", false},
		{gh, "octo/repo", "https://evil.example/octo/repo.git", false},
		{gh, "octo/repo", "https://github.com.evil.example/octo/repo.git", false},
		{gh, "octo/repo", "https://github.com/mallory/repo.git", false},
		{gh, "octo/repo", "https://github.com/octo/repo.git/../../mallory/x", false},
		{gh, "octo/repo", "https://user:tok@github.com/octo/repo.git", false},
		{gh, "octo/repo", "ssh://git:pw@github.com/octo/repo.git", false},
		{gh, "octo/repo", "https://github.com/octo/repo.git?x=1", false},
		{gh, "octo/repo", "ext::sh -c touch% /tmp/pwned", false},
		{gh, "octo/repo", "-uhttps://github.com/octo/repo.git", false},
		{gh, "mallory/repo", "https://github.com/octo/repo.git", false},
		{ghe, "corp/app", "https://github.com/corp/app.git", false},
	} {
		payload, err := json.Marshal(map[string]any{"repository": map[string]any{"full_name": tc.full, "clone_url": tc.u}})
		require.NoError(t, err)
		got := payloadCloneURL(&ingress.Event{Payload: payload}, tc.item)
		if tc.accepted {
			require.Equal(t, tc.u, got, tc.u)
		} else {
			require.Empty(t, got, tc.u)
		}
	}
	require.Equal(t, "file:///srv/git/octo/repo.git", cloneURLs(nil, "file:///srv/git/{owner}/{repo}.git")(gh, nil), "the operator's template is trusted")
}

func TestConfigFromCLISlackChannel(t *testing.T) {
	env := map[string]string{"BOT": "xoxb-1", "SIGN": "sig", "APP": "xapp-1", "THE_LOOP_SLACK_SIGNING_SECRET": "default-sig"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name, yaml, err string
		mode            string
	}{
		{"off by default", "", "", ""},
		{"events", "channels:\n  slack: {enabled: true, channel: '#loop', botTokenEnv: BOT, signingSecretEnv: SIGN, users: {U1ABC: dana}}\n", "", "events"},
		{"events, default secret variable", "channels:\n  slack: {enabled: true, channel: C1, botTokenEnv: BOT}\n", "", "events"},
		{"events without a secret", "channels:\n  slack: {enabled: true, channel: C1, botTokenEnv: BOT, signingSecretEnv: NOPE}\n", "NOPE (channels.slack.signingSecretEnv) is not set", ""},
		{"socket", "channels:\n  slack: {enabled: true, mode: socket, channel: C1, botTokenEnv: BOT, appTokenEnv: APP}\n", "", "socket"},
		{"socket without an app token", "channels:\n  slack: {enabled: true, mode: socket, channel: C1, botTokenEnv: BOT}\n", "THE_LOOP_SLACK_APP_TOKEN (channels.slack.appTokenEnv) is not set", ""},
		{"no bot token", "channels:\n  slack: {enabled: true, channel: C1}\n", "THE_LOOP_SLACK_BOT_TOKEN is not set", ""},
		{"no channel", "channels:\n  slack: {enabled: true, botTokenEnv: BOT}\n", "channels.slack.channel", ""},
		{"bad mode", "channels:\n  slack: {enabled: true, mode: poll}\n", "channels.slack.mode", ""},
		{"bad user id", "channels:\n  slack: {users: {dana: dana}}\n", "channels.slack.users", ""},
		{"typo", "channels:\n  slack: {chanel: C1}\n", "did you mean channels.slack.channel?", ""},
		{"the reference's authorizedUsers", "channels:\n  slack: {authorizedUsers: [U1]}\n", "channels.slack.authorizedUsers is no longer accepted", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loop.ParseCLIConfig("cli-config.yaml", []byte("state: {root: /srv/theloop}\n"+tc.yaml))
			if err == nil {
				var cfg Config
				cfg, _, err = ConfigFromCLI(c, getenv, "/work")
				if tc.err == "" {
					require.NoError(t, err)
					if tc.mode == "" {
						require.Nil(t, cfg.Slack)
					} else {
						require.NotNil(t, cfg.Slack)
						require.Equal(t, tc.mode, cfg.Slack.Mode)
						require.Equal(t, "/srv/theloop/channels", cfg.Slack.StateDir)
						require.Equal(t, "xoxb-1", cfg.Slack.BotToken)
						require.Contains(t, cfg.SecretEnvNames, "BOT", "a renamed token variable is a secret")
					}
					return
				}
			}
			require.ErrorIs(t, err, loop.ErrInvalidConfig)
			require.ErrorContains(t, err, tc.err)
		})
	}
	// A renamed variable is a secret too: routing.agentEnv may not name it.
	_, _, err := ConfigFromCLI(parseCLI(t, "state: {root: /srv/theloop}\nrouting: {agentEnv: [BOT]}\nchannels:\n  slack: {botTokenEnv: BOT}\n"), getenv, "/work")
	require.ErrorContains(t, err, "routing.agentEnv: BOT")
}

// integrations.github.webhook.hookId names the hook the reconcile pass has
// redeliver from; a negative id is refused with its key.
func TestConfigWebhookHookID(t *testing.T) {
	cfg, _, err := fromYAML("state: {root: /srv/theloop}\nintegrations:\n  github:\n    webhook:\n      hookId: 123456\n", "/work")
	require.NoError(t, err)
	require.Equal(t, int64(123456), cfg.WebhookHookID())
	cfg, _, err = fromYAML("state: {root: /srv/theloop}\n", "/work")
	require.NoError(t, err)
	require.Zero(t, cfg.WebhookHookID())
	_, _, err = fromYAML("state: {root: /srv/theloop}\nintegrations:\n  github:\n    webhook:\n      hookId: -1\n", "/work")
	require.ErrorContains(t, err, "integrations.github.webhook.hookId")
	_, _, err = fromYAML("state: {root: /srv/theloop}\nintegrations:\n  github:\n    webhook:\n      hook: 1\n", "/work")
	require.Error(t, err, "an unknown key is refused")
}

// queue.*: credentials come from files or the environment, never the file
// itself; a queue.url off this machine without them is refused unless
// queue.insecure.
func TestConfigQueueCredentials(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "nats-password")
	require.NoError(t, os.WriteFile(pw, []byte("from-a-file\n"), 0o600))
	base := "state: {root: /srv/theloop}\nqueue:\n  url: nats://nats-1.example:4222\n"
	for _, tc := range []struct {
		name, yaml, err string
		env             map[string]string
		check           func(t *testing.T, c Config)
	}{
		{name: "remote without credentials", yaml: base, err: "needs credentials"},
		{name: "remote, insecure", yaml: base + "  insecure: true\n", check: func(t *testing.T, c Config) { require.True(t, c.Queue.Insecure) }},
		{name: "user and password file", yaml: base + "  user: loopd\n  passwordFile: " + pw + "\n  tls: {caFile: /etc/nats/ca.pem, certFile: /etc/nats/loopd.pem, keyFile: /etc/nats/loopd-key.pem}\n",
			check: func(t *testing.T, c Config) {
				require.Equal(t, "loopd", c.QueueAuth.User)
				require.Equal(t, "from-a-file", c.QueueAuth.Password)
				require.Equal(t, "/etc/nats/ca.pem", c.QueueTLS().CAFile)
				require.Equal(t, "/etc/nats/loopd-key.pem", c.QueueTLS().KeyFile)
			}},
		{name: "user and password variable", yaml: base + "  user: loopd\n  passwordEnv: NATS_PW\n", env: map[string]string{"NATS_PW": "from-env"},
			check: func(t *testing.T, c Config) { require.Equal(t, "from-env", c.QueueAuth.Password) }},
		{name: "password variable unset", yaml: base + "  user: loopd\n  passwordEnv: NATS_PW\n", err: "NATS_PW is not set"},
		{name: "creds file", yaml: base + "  credsFile: /etc/nats/loopd.creds\n", check: func(t *testing.T, c Config) { require.Equal(t, "/etc/nats/loopd.creds", c.QueueAuth.CredsFile) }},
		{name: "a password in the file is not a key", yaml: base + "  password: hunter2\n", err: "queue.password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loop.ParseCLIConfig("cli-config.yaml", []byte(tc.yaml))
			if err == nil {
				var cfg Config
				cfg, _, err = ConfigFromCLI(c, func(k string) string { return tc.env[k] }, "/work")
				if tc.check != nil && err == nil {
					tc.check(t, cfg)
				}
			}
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
		})
	}
}
