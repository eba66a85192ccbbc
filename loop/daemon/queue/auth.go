package queue

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
)

// A queue on another machine is reached over the network, and anything that
// can publish on its subjects can put events behind the webhook's HMAC. So
// an external server (Config.URL) is reached with credentials — a .creds
// file (JWT and nkey seed), an nkey seed file, or a user and password — and
// TLS, and a URL that is not on this machine without credentials is refused
// unless the operator says Insecure. The secrets themselves come from files
// or the environment (the daemon reads them; loop/daemon/config.go), never
// from the configuration file.

// Auth authenticates to an external NATS server. At most one of CredsFile,
// NKeySeedFile and User is set.
type Auth struct {
	// CredsFile is a NATS .creds file (a user JWT and its nkey seed).
	CredsFile string
	// NKeySeedFile holds a user nkey seed ("SU...").
	NKeySeedFile string
	// User and Password: a user and its password.
	User, Password string
}

// Set reports whether any credential is configured.
func (a Auth) Set() bool { return a.CredsFile != "" || a.NKeySeedFile != "" || a.User != "" }

// TLS is the client side of TLS to an external server: CAFile verifies the
// server (else the system roots); CertFile and KeyFile are a client
// certificate, for a server that verifies clients. TLS is used when any is
// set, or the URL's scheme is tls://.
type TLS struct {
	CAFile, CertFile, KeyFile string
}

func (t TLS) set() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// ErrUnauthenticated: a queue URL off this machine without credentials.
var ErrUnauthenticated = errors.New("queue: an external NATS server needs credentials")

// CheckRemote validates the settings of an external server (nil without
// URL): one kind of credential, a password with a user, a client
// certificate with its key, and credentials for a URL off this machine
// unless Insecure. Open checks the same before it dials.
func (c Config) CheckRemote() error {
	if c.URL == "" {
		return nil
	}
	return c.checkRemote()
}

// checkRemote validates the external server's settings (Config.URL set).
func (c Config) checkRemote() error {
	n := 0
	for _, s := range []string{c.Auth.CredsFile, c.Auth.NKeySeedFile, c.Auth.User} {
		if s != "" {
			n++
		}
	}
	if n > 1 {
		return errors.New("queue: set one of queue.credsFile, queue.nkeySeedFile and queue.user, not several")
	}
	if c.Auth.User != "" && c.Auth.Password == "" {
		return errors.New("queue: queue.user needs a password: queue.passwordFile or queue.passwordEnv")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return errors.New("queue: queue.tls.certFile and queue.tls.keyFile go together (a client certificate and its key)")
	}
	if c.Auth.Set() || c.Insecure {
		return nil
	}
	for _, u := range strings.Split(c.URL, ",") {
		if !loopbackURL(u) {
			return fmt.Errorf("%w: queue.url %s is not on this machine, and anything that reaches it could publish events behind the webhook's signature — set queue.credsFile, queue.nkeySeedFile, or queue.user with queue.passwordFile/passwordEnv (and queue.tls), or queue.insecure: true to run without", ErrUnauthenticated, clipURL(u))
		}
	}
	return nil
}

// loopbackURL reports whether a NATS URL names this machine.
func loopbackURL(raw string) bool {
	raw = strings.TrimSpace(raw)
	if !strings.Contains(raw, "://") {
		raw = "nats://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// clipURL drops a URL's user information (a password in a URL must not
// reach a log) for messages.
func clipURL(raw string) string {
	if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
		u.User = nil
		return u.String()
	}
	return raw
}

// remoteOptions are the connection options for an external server.
func (c Config) remoteOptions() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case c.Auth.CredsFile != "":
		opts = append(opts, nats.UserCredentials(c.Auth.CredsFile))
	case c.Auth.NKeySeedFile != "":
		o, err := nats.NkeyOptionFromSeed(c.Auth.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("queue: queue.nkeySeedFile %s: %w", c.Auth.NKeySeedFile, err)
		}
		opts = append(opts, o)
	case c.Auth.User != "":
		opts = append(opts, nats.UserInfo(c.Auth.User, c.Auth.Password))
	}
	if c.TLS.CAFile != "" {
		opts = append(opts, nats.RootCAs(c.TLS.CAFile))
	}
	if c.TLS.CertFile != "" {
		opts = append(opts, nats.ClientCert(c.TLS.CertFile, c.TLS.KeyFile))
	}
	if c.TLS.set() {
		opts = append(opts, nats.Secure())
	}
	return opts, nil
}
