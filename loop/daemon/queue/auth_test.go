package queue_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// testPKI is a CA, a server certificate for 127.0.0.1 and a client
// certificate, made for the test and written as PEM files.
type testPKI struct {
	dir                       string
	ca, serverCert, serverKey string
	clientCert, clientKey     string
	pool                      *x509.CertPool
	serverPair                tls.Certificate
}

func newPKI(t *testing.T) testPKI {
	t.Helper()
	p := testPKI{dir: t.TempDir(), pool: x509.NewCertPool()}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(p.dir, name)
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return path
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	p.pool.AddCert(caCert)
	p.ca = write("ca.pem", "CERTIFICATE", caDER)
	leaf := func(n int64, name string, usage x509.ExtKeyUsage, ips []net.IP) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(n), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		require.NoError(t, err)
		kb, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kb)
	}
	p.serverCert, p.serverKey = leaf(2, "server", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	p.clientCert, p.clientKey = leaf(3, "loopd", x509.ExtKeyUsageClientAuth, nil)
	p.serverPair, err = tls.LoadX509KeyPair(p.serverCert, p.serverKey)
	require.NoError(t, err)
	return p
}

// A real nats-server that requires a user and password and TLS with a
// client certificate: loopd's queue works with the right ones and is
// refused without them.
func TestExternalServerWithCredentialsAndTLS(t *testing.T) {
	pki := newPKI(t)
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true,
		Username: "loopd", Password: "s3cret-pass",
		TLS: true, TLSVerify: true, TLSTimeout: 5,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pki.serverPair}, ClientCAs: pki.pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}})
	require.NoError(t, err)
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	require.True(t, ns.ReadyForConnections(10*time.Second))
	url := "tls://" + ns.Addr().String()
	good := queue.Config{URL: url, Auth: queue.Auth{User: "loopd", Password: "s3cret-pass"},
		TLS: queue.TLS{CAFile: pki.ca, CertFile: pki.clientCert, KeyFile: pki.clientKey}}

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
		{"another CA", func(c *queue.Config) { c.TLS.CAFile = pki.clientCert }},
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
