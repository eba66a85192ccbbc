package natstest

import (
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
)

// PKI is a CA, a certificate for the servers on 127.0.0.1 (good for their
// client port and, as a client of each other, their routes) and a client
// certificate for loopd, made for the test and written as PEM files in Dir.
type PKI struct {
	Dir                    string
	CA                     string // the CA's certificate file
	ServerCert, ServerKey  string
	ClientCert, ClientKey  string
	Pool                   *x509.CertPool
	ServerPair, ClientPair tls.Certificate
}

// NewPKI makes a PKI valid from an hour ago for a day.
func NewPKI(t testing.TB) PKI {
	t.Helper()
	p := PKI{Dir: t.TempDir(), Pool: x509.NewCertPool()}
	must := func(err error) {
		if err != nil {
			t.Helper()
			t.Fatalf("natstest: PKI: %v", err)
		}
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(p.Dir, name)
		must(os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return path
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(err)
	caCert, err := x509.ParseCertificate(caDER)
	must(err)
	p.Pool.AddCert(caCert)
	p.CA = write("ca.pem", "CERTIFICATE", caDER)
	leaf := func(n int64, name string, usage []x509.ExtKeyUsage, ips []net.IP) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(n), Subject: pkix.Name{CommonName: name}, NotBefore: time.Now().Add(-time.Hour),
			NotAfter: time.Now().Add(24 * time.Hour), ExtKeyUsage: usage, IPAddresses: ips, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		must(err)
		kb, err := x509.MarshalECPrivateKey(key)
		must(err)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kb)
	}
	p.ServerCert, p.ServerKey = leaf(2, "server", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, []net.IP{net.ParseIP("127.0.0.1")})
	p.ClientCert, p.ClientKey = leaf(3, "loopd", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil)
	p.ServerPair, err = tls.LoadX509KeyPair(p.ServerCert, p.ServerKey)
	must(err)
	p.ClientPair, err = tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
	must(err)
	return p
}

// ServerTLS is the TLS a server requires of its clients (and its routes'
// peers): its certificate, client certificates from the CA.
func (p PKI) ServerTLS() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.ServerPair}, ClientCAs: p.Pool, RootCAs: p.Pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
}
