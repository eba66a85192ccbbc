package ingress

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
)

func TestConfigFromCLI(t *testing.T) {
	cli, err := loop.ParseCLIConfig("cli-config.yaml", []byte(`
state:
  root: /var/lib/theloop
webhooks:
  ghWebhook:
    path: /hooks/github
    secretEnv: MY_SECRET
    events: [issues, issue_comment, pull_request]
repositories: [octo/repo]
routing:
  authorizedUsers: [alice, bob]
  autoExecuteLabel: "loop: go"
  dedupCacheSize: 5000
  control:
    enabled: true
    keywords:
      stop: ""
      start: "loop go"
polling:
  intervalSeconds: 30
  maxRetries: 5
  sources:
    - provider: github
      repos: [octo/other, octo/repo]
      label: watch
      monitor: {pullRequests: false}
`))
	require.NoError(t, err)
	env := func(k string) (string, bool) { return map[string]string{"MY_SECRET": "s"}[k], k == "MY_SECRET" }
	cfg, pc, err := ConfigFromCLI(cli, env, false)
	require.NoError(t, err)
	require.Equal(t, "/hooks/github", cfg.Path)
	require.Equal(t, []byte("s"), cfg.Secret)
	require.Equal(t, []string{"issues", "issue_comment", "pull_request"}, cfg.Events)
	require.Equal(t, []string{"octo/repo", "octo/other"}, cfg.Repositories)
	require.Equal(t, []string{"alice", "bob"}, cfg.AuthorizedUsers)
	require.Equal(t, "loop: go", cfg.AutoExecuteLabel)
	require.Equal(t, 5000, cfg.DedupSize)
	require.Equal(t, "loop go", cfg.Control.Keywords[CmdStart])
	require.Equal(t, "", cfg.Control.Keywords[CmdStop])
	require.False(t, cfg.Control.Disabled)
	_, err = cfg.Validate()
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, pc.Interval)
	require.Equal(t, 5, pc.MaxRetries)
	require.Equal(t, "/var/lib/theloop", pc.StateRoot)
	require.Equal(t, []PollSource{{Repos: []string{"octo/other", "octo/repo"}, Label: "watch", SkipPullRequests: true}}, pc.Sources)

	// No secret: the receiver refuses, unless the insecure flag was given.
	cfg, _, err = ConfigFromCLI(cli, func(string) (string, bool) { return "", false }, false)
	require.NoError(t, err)
	_, err = NewReceiver(cfg, ReceiverDeps{Sink: newMemSink()})
	require.ErrorIs(t, err, ErrInvalidConfig)
	cfg, _, err = ConfigFromCLI(cli, func(string) (string, bool) { return "", false }, true)
	require.NoError(t, err)
	_, err = NewReceiver(cfg, ReceiverDeps{Sink: newMemSink()})
	require.NoError(t, err)
}

func TestConfigFromCLIRefusesMistypedKeys(t *testing.T) {
	for _, doc := range []string{
		"repositories: octo/repo\n",
		"webhooks:\n  ghWebhook:\n    path: 7\n",
		"polling:\n  sources:\n    - provider: gitlab\n      repos: [a/b]\n",
		"polling:\n  intervalSeconds: soon\n",
		"routing:\n  control:\n    enabled: maybe\n",
	} {
		cli, err := loop.ParseCLIConfig("c.yaml", []byte(doc))
		require.NoError(t, err, doc)
		_, _, err = ConfigFromCLI(cli, nil, false)
		require.ErrorIs(t, err, ErrInvalidConfig, doc)
	}
}
