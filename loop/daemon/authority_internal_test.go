package daemon

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
)

// The operator's file reaches loopd: routing.authorized and its cache,
// the App block (its bot counts as self at the router), and the App's key
// variable is a secret no agent session keeps.
func TestConfigFromCLIMapsAuthorizationAndTheApp(t *testing.T) {
	cfg, _, err := fromYAML(`
repositories: [octo/demo]
routing:
  authorizedUsers: [dana]
  authorized: ["team:octo/approvers", "permission:maintain", codeowners, erin]
  authorizedCacheSeconds: 15
integrations:
  github:
    app: {appId: 77, slug: theloop-e2e, privateKeyEnv: LOOPD_APP_KEY}
`, "/work")
	require.NoError(t, err)
	require.Equal(t, []string{"team:octo/approvers", "permission:maintain", "codeowners", "erin"}, cfg.Routing.Authorized)
	require.Equal(t, 15*time.Second, cfg.Routing.AuthorizedCache)
	require.Equal(t, []string{"theloop-e2e[bot]"}, IngressConfig(cfg).SelfLogins)
	require.Equal(t, cfg.Routing.Authorized, IngressConfig(cfg).Authorized)
	require.True(t, slices.Contains(cfg.SecretEnvNames, "LOOPD_APP_KEY"), "%v", cfg.SecretEnvNames)
	require.True(t, slices.Contains(cfg.SecretEnvNames, integrations.DefaultGitHubAppKeyEnv))

	// An entry that is no rule stops loopd at start, naming it.
	_, err = ingress.NewAuthority([]string{"team:octo"}, 0, ingress.AuthorityDeps{})
	require.ErrorIs(t, err, ingress.ErrBadRule)
	require.ErrorContains(t, err, `"team:octo"`)
	require.ErrorContains(t, ingressValidate(t, func() Config {
		c := Config{Secret: []byte("x")}
		c.Routing.Authorized = []string{"permission:read"}
		return c
	}()), "permission:read")
}

func ingressValidate(t *testing.T, c Config) error {
	t.Helper()
	_, err := IngressConfig(c).Validate()
	return err
}
