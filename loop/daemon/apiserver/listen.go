package apiserver

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

// ErrNoToken: a TCP listener was asked for without a bearer token.
var ErrNoToken = errors.New("the control plane listens on TCP only with a bearer token: export the token in the variable service.tokenEnv names (default THE_LOOP_SERVICE_TOKEN), or leave service.listen empty to use the unix socket")

// ListenUnix listens on the unix socket path with mode 0600. A stale socket
// file (nothing listening) is removed first; a live one is refused, so two
// daemons never share a socket. The socket's directory should be private
// (the state root is 0700), which closes the window between bind and chmod.
func ListenUnix(path string) (net.Listener, error) {
	// sun_path holds 108 bytes on Linux (104 on the BSDs) with its NUL.
	if len(path) > 103 {
		return nil, fmt.Errorf("control socket %s: the path is %d bytes, longer than a unix socket allows (103); use a shorter state root (--state-root, state.root)", path, len(path))
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("control socket %s: a file that is not a socket is in the way; remove it", path)
		}
		if c, derr := net.Dial("unix", path); derr == nil {
			c.Close()
			return nil, fmt.Errorf("control socket %s: another process is listening on it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("control socket %s: remove the stale socket: %w", path, err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: chmod 0600: %w", path, err)
	}
	return ln, nil
}

// ListenTCP listens on addr; it refuses without a token (ErrNoToken). Wrap
// the handler with RequireToken.
func ListenTCP(addr, token string) (net.Listener, error) {
	if strings.TrimSpace(token) == "" {
		return nil, ErrNoToken
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("control plane on %s (service.listen): %w", addr, err)
	}
	return ln, nil
}

// RequireToken answers 401 to any request without "Authorization: Bearer
// <token>" (compared in constant time) and passes the others on as the
// Caller TokenIdentity. It sets no CORS header and answers no preflight:
// browsers on other origins cannot use the API.
func RequireToken(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if token == "" || subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="loopd"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"detail": "a bearer token is required (Authorization: Bearer $THE_LOOP_SERVICE_TOKEN)"})
			return
		}
		next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), Caller{Identity: TokenIdentity, Transport: "tcp"})))
	})
}
