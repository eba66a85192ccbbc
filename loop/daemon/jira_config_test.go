package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
)

// webhooks.jiraWebhook: off without projects; with them, the secret comes
// from the file secretFile names or the variable secretEnv names — never
// the configuration file — and loopd refuses to start without one, or
// with two projects on one repository.
func TestJiraWebhookSettings(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	cfg, _, err := ConfigFromCLI(parseCLI(t, "state:\n  root: /st\n"), env(nil), "/w")
	require.NoError(t, err)
	require.Nil(t, cfg.Jira, "no project named: no Jira endpoint")

	yaml := "state:\n  root: /st\nwebhooks:\n  jiraWebhook:\n    projects:\n      PROJ: octo/app\n"
	cfg, _, err = ConfigFromCLI(parseCLI(t, yaml), env(map[string]string{"THE_LOOP_JIRA_WEBHOOK_SECRET": "from-env"}), "/w")
	require.NoError(t, err)
	require.NotNil(t, cfg.Jira)
	require.Equal(t, "from-env", string(cfg.Jira.Secret))
	require.Equal(t, map[string]string{"PROJ": "octo/app"}, cfg.Jira.Projects)
	require.Equal(t, 60*time.Second, cfg.Jira.PollInterval)
	require.Equal(t, "/jira-webhook", cfg.Jira.Path)
	require.Contains(t, cfg.SecretEnvNames, "THE_LOOP_JIRA_WEBHOOK_SECRET", "no agent gets the secret")

	_, _, err = ConfigFromCLI(parseCLI(t, yaml), env(nil), "/w")
	require.ErrorIs(t, err, loop.ErrInvalidConfig)
	require.ErrorContains(t, err, "THE_LOOP_JIRA_WEBHOOK_SECRET")

	file := filepath.Join(t.TempDir(), "jira-secret")
	require.NoError(t, os.WriteFile(file, []byte("from-file\n"), 0o600))
	cfg, _, err = ConfigFromCLI(parseCLI(t, yaml+"    secretFile: "+file+"\n    pollSeconds: 0\n"), env(map[string]string{"THE_LOOP_JIRA_WEBHOOK_SECRET": "from-env"}), "/w")
	require.NoError(t, err)
	require.Equal(t, "from-file", string(cfg.Jira.Secret))
	require.Negative(t, cfg.Jira.PollInterval, "pollSeconds 0: never")

	_, err = loop.ParseCLIConfig("cli-config.yaml", []byte(yaml+"      OPS: octo/app\n"))
	require.ErrorContains(t, err, "both name repository octo/app")

	_, err = loop.ParseCLIConfig("cli-config.yaml", []byte("webhooks:\n  jiraWebhook:\n    secret: inline\n"))
	require.Error(t, err, "a secret in the configuration file is refused")
}
