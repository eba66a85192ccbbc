package queue_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/internal/natstest"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// A real nats-server that requires a user and password and TLS with a
// client certificate: loopd's queue works with the right ones and is
// refused without them.
func TestExternalServerWithCredentialsAndTLS(t *testing.T) {
	pki := natstest.NewPKI(t)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Username: "loopd", Password: "s3cret-pass",
		TLS: true, TLSVerify: true, TLSTimeout: 5,
		TLSConfig: pki.ServerTLS()})
	require.NoError(t, err)
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	require.True(t, ns.ReadyForConnections(10*time.Second))
	url := "tls://" + ns.Addr().String()
	good := queue.Config{URL: url, Auth: queue.Auth{User: "loopd", Password: "s3cret-pass"},
		TLS: queue.TLS{CAFile: pki.CA, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}}

	ctx := context.Background()
	q, err := queue.Open(ctx, good)
	require.NoError(t, err)
	ev := &ingress.Event{Event: "issues", Action: "labeled", DeliveryID: "auth-1", Repo: "o/r", Source: ingress.SourceWebhook}
	require.NoError(t, q.Put(ctx, ev))
	cons, err := q.Consume(ctx)
	require.NoError(t, err)
	m, err := cons.Next()
	require.NoError(t, err)
	require.Equal(t, "auth-1", m.Event.DeliveryID)
	require.NoError(t, m.Ack(ctx))
	cons.Stop()
	q.Close()

	for _, tc := range []struct {
		name string
		edit func(*queue.Config)
	}{
		{"wrong password", func(c *queue.Config) { c.Auth.Password = "guess" }},
		{"no credentials", func(c *queue.Config) { c.Auth = queue.Auth{} }},
		{"no client certificate", func(c *queue.Config) { c.TLS.CertFile, c.TLS.KeyFile = "", "" }},
		{"another CA", func(c *queue.Config) { c.TLS.CAFile = pki.ClientCert }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := good
			tc.edit(&c)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			q, err := queue.Open(ctx, c)
			if err == nil {
				q.Close()
			}
			require.Error(t, err)
		})
	}
}

// A queue.url off this machine without credentials is refused before
// anything is dialled; queue.insecure: true, or credentials, lift that.
func TestRemoteQueueNeedsCredentials(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  queue.Config
		err  string
	}{
		{"remote, no credentials", queue.Config{URL: "nats://10.255.255.1:4222"}, "needs credentials"},
		{"a cluster list, one remote", queue.Config{URL: "nats://127.0.0.1:4222,nats://nats-2.example:4222"}, "needs credentials"},
		{"two kinds of credentials", queue.Config{URL: "nats://10.255.255.1:4222", Auth: queue.Auth{CredsFile: "a.creds", User: "u", Password: "p"}}, "not several"},
		{"a user without password", queue.Config{URL: "nats://10.255.255.1:4222", Auth: queue.Auth{User: "u"}}, "needs a password"},
		{"a certificate without its key", queue.Config{URL: "nats://10.255.255.1:4222", Insecure: true, TLS: queue.TLS{CertFile: "c.pem"}}, "go together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := queue.Open(ctx, tc.cfg)
			require.ErrorContains(t, err, tc.err)
		})
	}
	_, err := queue.Open(context.Background(), queue.Config{URL: "nats://10.255.255.1:4222"})
	require.ErrorIs(t, err, queue.ErrUnauthenticated)
}

// A 3-server nats-server cluster (JetStream, replicas 3) that requires TLS
// with client certificates on its client ports and on the routes between
// its servers, and authentication — a user with a password, or an nkey:
// loopd's queue works with either credential and is refused without one,
// with a wrong one, without its client certificate and without TLS.
func TestClusterWithCredentialsAndTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server NATS cluster")
	}
	pki := natstest.NewPKI(t)
	pub, seedFile := nkeyUser(t)
	_, strangerFile := nkeyUser(t)

	urls := natstest.ClusterWith(t, 3, func(_ int, o *server.Options) {
		o.Users = []*server.User{{Username: "loopd", Password: "s3cret-pass"}}
		o.Nkeys = []*server.NkeyUser{{Nkey: pub}}
		o.TLS, o.TLSVerify, o.TLSTimeout, o.TLSConfig = true, true, 5, pki.ServerTLS()
		o.Cluster.TLSConfig, o.Cluster.TLSTimeout = pki.ServerTLS(), 5
	})
	url := strings.Join(urls, ",")
	tlsOK := queue.TLS{CAFile: pki.CA, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}

	for _, tc := range []struct {
		name string
		auth queue.Auth
	}{
		{"user and password", queue.Auth{User: "loopd", Password: "s3cret-pass"}},
		{"nkey seed file", queue.Auth{NKeySeedFile: seedFile}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q *queue.Queue
			var err error
			// The streams need the cluster's JetStream settled.
			require.Eventually(t, func() bool {
				q, err = queue.Open(context.Background(), queue.Config{URL: url, Replicas: 3, Auth: tc.auth, TLS: tlsOK})
				return err == nil
			}, 60*time.Second, 250*time.Millisecond, "open: %v", err)
			defer q.Close()
			ctx := context.Background()
			id := "cluster-" + strings.ReplaceAll(tc.name, " ", "-")
			require.NoError(t, q.Put(ctx, &ingress.Event{Event: "issues", Action: "labeled", DeliveryID: id, Repo: "o/r", Source: ingress.SourceWebhook}))
			cons, err := q.Consume(ctx)
			require.NoError(t, err)
			defer cons.Stop()
			for {
				m, err := cons.Next()
				require.NoError(t, err)
				require.NoError(t, m.Ack(ctx))
				if m.Event.DeliveryID == id {
					break
				}
			}
		})
	}

	for _, tc := range []struct {
		name string
		cfg  queue.Config
	}{
		{"no credentials", queue.Config{URL: url, TLS: tlsOK}},
		{"wrong password", queue.Config{URL: url, Auth: queue.Auth{User: "loopd", Password: "guess"}, TLS: tlsOK}},
		{"an nkey the cluster does not know", queue.Config{URL: url, Auth: queue.Auth{NKeySeedFile: strangerFile}, TLS: tlsOK}},
		{"no client certificate", queue.Config{URL: url, Auth: queue.Auth{User: "loopd", Password: "s3cret-pass"}, TLS: queue.TLS{CAFile: pki.CA}}},
		{"no TLS", queue.Config{URL: url, Auth: queue.Auth{User: "loopd", Password: "s3cret-pass"}}},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			q, err := queue.Open(ctx, tc.cfg)
			if err == nil {
				q.Close()
			}
			require.Error(t, err)
		})
	}
}

// nkeyUser makes a user nkey: its public key and a file holding its seed.
func nkeyUser(t *testing.T) (pub, seedFile string) {
	t.Helper()
	user, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err = user.PublicKey()
	require.NoError(t, err)
	seed, err := user.Seed()
	require.NoError(t, err)
	seedFile = filepath.Join(t.TempDir(), "user.nk")
	require.NoError(t, os.WriteFile(seedFile, seed, 0o600))
	return pub, seedFile
}
