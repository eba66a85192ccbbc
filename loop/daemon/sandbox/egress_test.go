package sandbox_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
)

func TestAllowlist(t *testing.T) {
	a := sandbox.Allowlist{"api.anthropic.com", "127.0.0.1:8080", "*.googleapis.com"}
	for _, tc := range []struct {
		host string
		port int
		want bool
	}{
		{"api.anthropic.com", 443, true},
		{"API.Anthropic.com.", 443, true},
		{"api.anthropic.com", 22, false},
		{"evil-api.anthropic.com", 443, false},
		{"127.0.0.1", 8080, true},
		{"127.0.0.1", 4222, false},
		{"generativelanguage.googleapis.com", 443, true},
		{"googleapis.com", 443, false},
		{"googleapis.com.evil", 443, false},
	} {
		require.Equal(t, tc.want, a.Allows(tc.host, tc.port), "%s:%d", tc.host, tc.port)
	}
}

// The proxy answers whatever a world sends it without panicking, and opens
// a connection only to an allowed host.
func FuzzEgressRequest(f *testing.F) {
	for _, s := range []string{
		"CONNECT api.anthropic.com:443 HTTP/1.1\r\nHost: api.anthropic.com:443\r\n\r\n",
		"GET http://127.0.0.1:1/x HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n",
		"GET /relative HTTP/1.1\r\nHost: x\r\n\r\n",
		"CONNECT [::1]:443 HTTP/1.1\r\n\r\n",
		"CONNECT :0 HTTP/1.1\r\n\r\n",
		"\x00\x01garbage",
	} {
		f.Add(s)
	}
	dir, err := os.MkdirTemp("", "egf")
	require.NoError(f, err)
	f.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "p")
	var mu sync.Mutex
	var opened []string
	eg2 := &sandbox.Egress{Log: func(_, host string, port int, allowed bool) {
		if allowed {
			mu.Lock()
			opened = append(opened, host)
			mu.Unlock()
		}
	}}
	// Nothing leaves the machine: an allowed dial fails at once.
	eg2.Dial = func(context.Context, string, string) (net.Conn, error) { return nil, io.EOF }
	require.NoError(f, eg2.Serve(sock, "fuzz", sandbox.Allowlist{"api.anthropic.com"}))
	f.Cleanup(func() { eg2.Close() })
	f.Fuzz(func(t *testing.T, req string) {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.WriteString(c, req)
		if cw, ok := c.(*net.UnixConn); ok {
			_ = cw.CloseWrite()
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatalf("a request was tunnelled: %q", req)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, h := range opened {
			if !strings.EqualFold(strings.TrimSuffix(h, "."), "api.anthropic.com") {
				t.Fatalf("opened a connection to %s", h)
			}
		}
	})
}
