package githubsim_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/ops"
)

const appSlug = "theloop-test"

// appWorld is githubsim serving a GitHub App and the real client
// authenticating as it, both on one fake clock.
type appWorld struct {
	sim   *githubsim.Server
	set   *integrations.Set
	clock *graphtest.Clock
	pem   string
}

func newAppKey(t testing.TB) (*rsa.PrivateKey, string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return key, string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
}

func newAppWorld(t testing.TB, app integrations.GitHubAppConfig, env map[string]string) *appWorld {
	t.Helper()
	key, keyPEM := newAppKey(t)
	clock := graphtest.NewClock(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	sim, err := githubsim.Start(githubsim.Config{Now: clock.Now, App: &githubsim.AppConfig{ID: 4242, Slug: appSlug, PublicKey: &key.PublicKey}})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	app.AppID, app.Slug = 4242, appSlug
	if env == nil {
		env = map[string]string{integrations.DefaultGitHubAppKeyEnv: keyPEM}
	}
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		MaxAttempts: 2, TimeoutSeconds: 5, API: integrations.GitHubAPIConfig{BaseURL: sim.URL()}, App: &app,
	}}, integrations.Deps{
		Env:   func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Clock: clock,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	require.NoError(t, err)
	return &appWorld{sim: sim, set: set, clock: clock, pem: keyPEM}
}

func (w *appWorld) getIssue(t testing.TB, repo string, n int) error {
	t.Helper()
	_, err := w.set.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:" + repo + "#" + itoa(n)})
	return err
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestAppInstallationTokenRenewedBeforeExpiryOnTheClock(t *testing.T) {
	w := newAppWorld(t, integrations.GitHubAppConfig{}, nil)
	require.NoError(t, w.sim.AddRepo("octo/one", githubsim.RepoOptions{}))
	require.NoError(t, w.sim.AddRepo("acme/two", githubsim.RepoOptions{}))
	one, err := w.sim.AddInstallation("octo/one")
	require.NoError(t, err)
	two, err := w.sim.AddInstallation("acme/two")
	require.NoError(t, err)
	a, err := w.sim.OpenIssue("octo/one", "dana", "a", "")
	require.NoError(t, err)
	b, err := w.sim.OpenIssue("acme/two", "dana", "b", "")
	require.NoError(t, err)

	// Each repository's installation is found and gets its own token.
	require.NoError(t, w.getIssue(t, "octo/one", a.Number))
	require.NoError(t, w.getIssue(t, "acme/two", b.Number))
	toks := w.sim.IssuedTokens()
	require.Len(t, toks, 2)
	require.Equal(t, one, toks[0].Installation)
	require.Equal(t, two, toks[1].Installation)

	// Cached while it has more than five minutes to live...
	w.clock.Advance(50 * time.Minute)
	require.NoError(t, w.getIssue(t, "octo/one", a.Number))
	require.Len(t, w.sim.IssuedTokens(), 2, "a token with ten minutes left is reused")

	// ...renewed before it expires, per installation.
	w.clock.Advance(6 * time.Minute)
	require.NoError(t, w.getIssue(t, "octo/one", a.Number))
	toks = w.sim.IssuedTokens()
	require.Len(t, toks, 3, "renewed five minutes before expiry")
	require.Equal(t, one, toks[2].Installation)
	require.Equal(t, w.clock.Now().Truncate(time.Second), toks[2].IssuedAt)

	// Every request but the App's own was made with an installation token.
	for _, r := range w.sim.Requests() {
		require.True(t, r.Authenticated, "%s %s", r.Method, r.Path)
		require.NotEqual(t, 401, r.Status, "%s %s", r.Method, r.Path)
	}

	// A token revoked early (401) is replaced by one fresh exchange.
	w.sim.RevokeInstallationTokens(one)
	require.NoError(t, w.getIssue(t, "octo/one", a.Number))
	require.Len(t, w.sim.IssuedTokens(), 4)

	// What the bot posts is authored by <slug>[bot].
	res, err := w.set.Call(context.Background(), ops.GitHubAddComment, map[string]any{"ref": "github:octo/one#" + itoa(a.Number), "body": "hello"})
	require.NoError(t, err)
	cs, err := w.sim.Comments("octo/one", a.Number)
	require.NoError(t, err, "%v", res)
	require.Equal(t, appSlug+"[bot]", cs[len(cs)-1].Author)
}

func TestAppRevokedInstallationIsRefusedClearly(t *testing.T) {
	w := newAppWorld(t, integrations.GitHubAppConfig{}, nil)
	require.NoError(t, w.sim.AddRepo("octo/one", githubsim.RepoOptions{}))
	require.NoError(t, w.sim.AddRepo("octo/none", githubsim.RepoOptions{}))
	id, err := w.sim.AddInstallation("octo/one")
	require.NoError(t, err)
	is, err := w.sim.OpenIssue("octo/one", "dana", "a", "")
	require.NoError(t, err)
	require.NoError(t, w.getIssue(t, "octo/one", is.Number))

	require.NoError(t, w.sim.SuspendInstallation(id))
	err = w.getIssue(t, "octo/one", is.Number)
	require.Error(t, err)
	require.ErrorIs(t, err, integrations.ErrAppInstallation)
	require.NotErrorIs(t, err, integrations.ErrNotFound, "a revoked installation is not a missing issue")
	require.Contains(t, err.Error(), "This installation has been suspended")
	require.Contains(t, err.Error(), "reinstall the App "+appSlug)

	// A repository the App is not installed on says so.
	other, err := w.sim.OpenIssue("octo/none", "dana", "b", "")
	require.NoError(t, err)
	err = w.getIssue(t, "octo/none", other.Number)
	require.ErrorIs(t, err, integrations.ErrAppInstallation)
	require.Contains(t, err.Error(), "is not installed on octo/none")
}

func TestAppKeyFromAFileAndAGivenInstallation(t *testing.T) {
	key, keyPEM := newAppKey(t)
	_ = key
	w := newAppWorld(t, integrations.GitHubAppConfig{}, nil)
	// A key that is not the App's: GitHub refuses the JWT, and the error
	// names where the key came from, never the key.
	path := filepath.Join(t.TempDir(), "app.pem")
	require.NoError(t, os.WriteFile(path, []byte(keyPEM), 0o600))
	require.NoError(t, w.sim.AddRepo("octo/one", githubsim.RepoOptions{}))
	id, err := w.sim.AddInstallation("octo/one")
	require.NoError(t, err)
	is, err := w.sim.OpenIssue("octo/one", "dana", "a", "")
	require.NoError(t, err)
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		MaxAttempts: 1, API: integrations.GitHubAPIConfig{BaseURL: w.sim.URL()},
		App: &integrations.GitHubAppConfig{AppID: 4242, Slug: appSlug, PrivateKeyFile: path, InstallationID: id},
	}}, integrations.Deps{Env: func(string) (string, bool) { return "", false }, Clock: w.clock})
	require.NoError(t, err)
	_, err = set.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:octo/one#" + itoa(is.Number)})
	require.ErrorIs(t, err, integrations.ErrUnauthorized)
	require.Contains(t, err.Error(), path)
	require.NotContains(t, err.Error(), "PRIVATE KEY")

	// The App's own key in the file, the installation given: no lookup.
	require.NoError(t, os.WriteFile(path, []byte(w.pem), 0o600))
	set, err = integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		MaxAttempts: 1, API: integrations.GitHubAPIConfig{BaseURL: w.sim.URL()},
		App: &integrations.GitHubAppConfig{AppID: 4242, Slug: appSlug, PrivateKeyFile: path, InstallationID: id},
	}}, integrations.Deps{Env: func(string) (string, bool) { return "", false }, Clock: w.clock})
	require.NoError(t, err)
	_, err = set.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:octo/one#" + itoa(is.Number)})
	require.NoError(t, err)
	for _, r := range w.sim.Requests() {
		require.False(t, strings.HasSuffix(r.Path, "/installation"), "the given installation is not looked up: %s", r.Path)
	}
}

func TestAppConfigKeepsTheKeyOutOfTheFile(t *testing.T) {
	_, err := integrations.DecodeConfig(map[string]any{"github": map[string]any{"app": map[string]any{
		"appId": 1, "slug": "x", "privateKey": "-----BEGIN RSA PRIVATE KEY-----"}}})
	require.ErrorIs(t, err, integrations.ErrInvalidConfig)
	require.Contains(t, err.Error(), "privateKey")
	require.NotContains(t, err.Error(), "BEGIN")

	_, err = integrations.DecodeConfig(map[string]any{"github": map[string]any{"app": map[string]any{"slug": "x"}}})
	require.ErrorContains(t, err, "integrations.github.app.appId")

	cfg, err := integrations.DecodeConfig(map[string]any{"github": map[string]any{"app": map[string]any{"appId": 7, "slug": "my-app", "privateKeyEnv": "APP_KEY"}}})
	require.NoError(t, err)
	require.Equal(t, []string{"my-app[bot]"}, cfg.SelfLogins())
}
