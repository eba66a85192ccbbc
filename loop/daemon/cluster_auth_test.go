package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/conf"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/internal/natstest"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// loopd on a 3-server NATS cluster that requires TLS with client
// certificates (client ports and routes) and a user's password: with the
// queue.* keys as an operator writes them — the password from a variable,
// never the file — the daemon starts and serves; without the user, or
// without its client certificate, it does not start.
func TestDaemonOnAClusterWithTLSAndCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server NATS cluster")
	}
	pki := natstest.NewPKI(t)
	urls := natstest.ClusterWith(t, 3, func(_ int, o *server.Options) {
		o.Users = []*server.User{{Username: "loopd", Password: "s3cret-pass"}}
		o.TLS, o.TLSVerify, o.TLSTimeout, o.TLSConfig = true, true, 5, pki.ServerTLS()
		o.Cluster.TLSConfig, o.Cluster.TLSTimeout = pki.ServerTLS(), 5
	})
	sim, err := githubsim.Start(githubsim.Config{Token: "tok", BotLogin: "theloop-bot"})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	require.NoError(t, sim.AddRepo(repoFull, githubsim.RepoOptions{}))

	queueYAML := func(user, tls string) string {
		return fmt.Sprintf("state:\n  root: /unused\nqueue:\n  url: %s\n  replicas: 3\n%s%s", strings.Join(urls, ","), user, tls)
	}
	const user = "  user: loopd\n  passwordEnv: THE_LOOP_NATS_PASSWORD\n"
	tls := fmt.Sprintf("  tls:\n    caFile: %s\n    certFile: %s\n    keyFile: %s\n", pki.CA, pki.ClientCert, pki.ClientKey)
	run := func(t *testing.T, yaml string) (ready bool, err error) {
		qc := configWithPassword(t, yaml, "s3cret-pass")
		cfg := daemon.DefaultConfig()
		cfg.StateRoot = filepath.Join(t.TempDir(), "state")
		cfg.Webhook.Host, cfg.Webhook.Port = "127.0.0.1", 0
		cfg.Secret = []byte(secret)
		cfg.Repositories = []string{repoFull}
		cfg.ReconcileInterval = -1
		cfg.Service.Disabled = true
		cfg.Queue, cfg.QueueAuth = qc.Queue, qc.QueueAuth
		set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
			Transport: integrations.TransportAPI, MaxAttempts: 1, TimeoutSeconds: 10,
			API: integrations.GitHubAPIConfig{BaseURL: sim.URL()},
		}}, integrations.Deps{Env: func(k string) (string, bool) { return "tok", k == "GH_TOKEN" }})
		require.NoError(t, err)
		d, err := daemon.New(cfg, daemon.Deps{Clock: graph.SystemClock{}, Integrations: set, Log: testLog{t}})
		if err != nil {
			return false, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		select {
		case <-d.Ready():
			cancel()
			<-done
			return true, nil
		case err := <-done:
			return false, err
		case <-time.After(90 * time.Second):
			t.Fatal("the daemon neither started nor failed in 90 s")
			return false, nil
		}
	}

	t.Run("with credentials and TLS it serves", func(t *testing.T) {
		var ready bool
		var err error
		// The cluster's JetStream may still be settling its streams.
		for attempt := 0; attempt < 20 && !ready; attempt++ {
			if ready, err = run(t, queueYAML(user, tls)); !ready {
				time.Sleep(500 * time.Millisecond)
			}
		}
		require.True(t, ready, "loopd did not start on the cluster: %v", err)
	})
	for _, tc := range []struct{ name, yaml string }{
		{"without the user it is refused", queueYAML("", tls)},
		{"without its client certificate it is refused", queueYAML(user, fmt.Sprintf("  tls:\n    caFile: %s\n", pki.CA))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ready, err := run(t, tc.yaml)
			require.False(t, ready)
			require.Error(t, err)
			t.Logf("refused: %v", err)
		})
	}
}

// examples/cluster as shipped: its nats-server configuration requires
// authentication and TLS, for clients and for the routes between servers,
// and its loopd configuration loads (every key honoured) with the password
// from the variable it names and loopd's CA and client certificate.
func TestClusterExampleShipsWithCredentialsAndTLS(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "cluster", "README.md"))
	require.NoError(t, err)
	blocks := fencedBlocks(string(b))
	var natsConf, loopdConf string
	for _, bl := range blocks {
		switch {
		case strings.Contains(bl, "server_name: nats-1"):
			natsConf = bl
		case strings.Contains(bl, "queue:") && strings.Contains(bl, "service:"):
			loopdConf = bl
		}
	}
	require.NotEmpty(t, natsConf, "the nats-1.conf block")
	require.NotEmpty(t, loopdConf, "the loopd cli-config.yaml block")

	m, err := conf.Parse(natsConf)
	require.NoError(t, err, "nats-1.conf parses as nats-server reads it")
	authz, _ := m["authorization"].(map[string]any)
	require.NotEmpty(t, authz["users"], "clients authenticate")
	clientTLS, _ := m["tls"].(map[string]any)
	require.Equal(t, true, clientTLS["verify"], "clients present a certificate")
	cluster, _ := m["cluster"].(map[string]any)
	routeTLS, _ := cluster["tls"].(map[string]any)
	require.Equal(t, true, routeTLS["verify"], "the routes are TLS too")

	cfg := configWithPassword(t, loopdConf, "from-the-environment")
	require.Equal(t, "loopd", cfg.QueueAuth.User)
	require.Equal(t, "from-the-environment", cfg.QueueAuth.Password)
	require.NotEmpty(t, cfg.QueueTLS().CAFile)
	require.NotEmpty(t, cfg.QueueTLS().CertFile)
	require.NotEmpty(t, cfg.QueueTLS().KeyFile)
	require.False(t, cfg.Queue.Insecure)
	require.Equal(t, 3, cfg.Cluster().QueueReplicas)
}

// fencedBlocks is the text of every ``` block of a Markdown document.
func fencedBlocks(md string) []string {
	var out []string
	parts := strings.Split(md, "```")
	for i := 1; i < len(parts); i += 2 {
		body := parts[i]
		if nl := strings.IndexByte(body, '\n'); nl >= 0 {
			body = body[nl+1:] // the info string (yaml, …)
		}
		out = append(out, body)
	}
	return out
}

// configWithPassword is loopd's configuration from a cli-config.yaml, with
// $THE_LOOP_NATS_PASSWORD set to password and nothing else in the
// environment.
func configWithPassword(t *testing.T, yaml, password string) daemon.Config {
	t.Helper()
	c, err := loop.ParseCLIConfig("cli-config.yaml", []byte(yaml))
	require.NoError(t, err)
	cfg, _, err := daemon.ConfigFromCLI(c, func(k string) string {
		if k == "THE_LOOP_NATS_PASSWORD" {
			return password
		}
		return ""
	}, t.TempDir())
	require.NoError(t, err)
	return cfg
}
