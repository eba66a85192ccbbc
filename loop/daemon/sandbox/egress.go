package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	harnesses "github.com/theloop-dev/theloop/harness"
)

// The world's network (docs/decisions.md §22): a network namespace of its
// own, whose loopback is not the host's — loopd's webhook port, dashboard,
// NATS and every other service on the host's 127.0.0.1 are not there. The
// harness reaches its model provider through loopd's egress proxy: HTTP
// CONNECT (and plain absolute-form HTTP) on a unix socket in the world's
// net/ directory, which the keeper inside bridges to ProxyListen on the
// world's own loopback, with HTTPS_PROXY and HTTP_PROXY pointing there.
// The proxy opens a connection only to an allowed host:port; every refusal
// is logged with the host.

// ProxyListen is where the bridge listens inside a world.
const ProxyListen = "127.0.0.1:3128"

// ProxyEnv are the variables that send a harness through the bridge.
func ProxyEnv() []string {
	u := "http://" + ProxyListen
	return []string{"HTTPS_PROXY=" + u, "HTTP_PROXY=" + u, "https_proxy=" + u, "http_proxy=" + u, "NO_PROXY=", "no_proxy="}
}

// HarnessHosts are the API hosts each harness reaches by default (its
// descriptor's Egress).
var HarnessHosts = func() map[string][]string {
	out := map[string][]string{}
	for _, d := range harnesses.All() {
		out[d.Name] = d.Egress
	}
	return out
}()

// Allowlist decides which host:port a world may reach. An entry is a host
// (any port 443 or 80), host:port, or *.suffix.
type Allowlist []string

// Allows reports whether host:port is allowed.
func (a Allowlist) Allows(host string, port int) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, e := range a {
		e = strings.ToLower(strings.TrimSpace(e))
		h, p, err := net.SplitHostPort(e)
		if err != nil {
			h, p = e, ""
		}
		if p == "" && port != 443 && port != 80 {
			continue
		}
		if p != "" && p != strconv.Itoa(port) {
			continue
		}
		if suf, ok := strings.CutPrefix(h, "*."); ok {
			if strings.HasSuffix(host, "."+suf) {
				return true
			}
			continue
		}
		if h == host {
			return true
		}
	}
	return false
}

// Egress is loopd's proxy for the worlds. Its zero value refuses
// everything; a world's listener is opened with Serve.
type Egress struct {
	// Log is told every refused connection (and, when non-nil, every
	// allowed one with allowed true).
	Log func(world, host string, port int, allowed bool)
	// Dial opens an allowed connection (nil: net.Dialer).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	mu        sync.Mutex
	listeners map[string]net.Listener
	wg        sync.WaitGroup
}

// Serve listens on the world's proxy socket (replacing a stale one) and
// serves it with allow until Close or Stop(socket).
func (e *Egress) Serve(socket, world string, allow Allowlist) error {
	_ = os.Remove(socket)
	l, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("sandbox: the egress proxy for %s: %w", world, err)
	}
	e.mu.Lock()
	if e.listeners == nil {
		e.listeners = map[string]net.Listener{}
	}
	if old := e.listeners[socket]; old != nil {
		old.Close()
	}
	e.listeners[socket] = l
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				e.handle(c, world, allow)
			}()
		}
	}()
	return nil
}

// Stop closes one world's listener.
func (e *Egress) Stop(socket string) {
	e.mu.Lock()
	l := e.listeners[socket]
	delete(e.listeners, socket)
	e.mu.Unlock()
	if l != nil {
		l.Close()
	}
}

// Close closes every listener (open tunnels end with their peers).
func (e *Egress) Close() error {
	e.mu.Lock()
	for s, l := range e.listeners {
		l.Close()
		delete(e.listeners, s)
	}
	e.mu.Unlock()
	return nil
}

const maxProxyHeader = 32 << 10

func (e *Egress) handle(c net.Conn, world string, allow Allowlist) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReaderSize(io.LimitReader(c, maxProxyHeader), 4096)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	hostport := req.Host
	if req.Method != http.MethodConnect {
		if req.URL == nil || req.URL.Host == "" || req.URL.Scheme != "http" {
			writeStatus(c, http.StatusBadRequest, "the egress proxy takes CONNECT or an absolute http:// URL")
			return
		}
		hostport = req.URL.Host
	}
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		host, portStr = hostport, map[bool]string{true: "443", false: "80"}[req.Method == http.MethodConnect]
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || host == "" {
		writeStatus(c, http.StatusBadRequest, "unreadable host")
		return
	}
	ok := allow.Allows(host, port)
	if e.Log != nil {
		e.Log(world, host, port, ok)
	}
	if !ok {
		writeStatus(c, http.StatusForbidden, fmt.Sprintf("theloop's sandbox does not allow %s:%d (add it to routing.sandbox.allowHosts)", host, port))
		return
	}
	dial := e.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 15 * time.Second}).DialContext
	}
	up, err := dial(context.Background(), "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		writeStatus(c, http.StatusBadGateway, "connecting: "+err.Error())
		return
	}
	defer up.Close()
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		// Bytes the client sent after the CONNECT head belong upstream.
		if n := br.Buffered(); n > 0 {
			b, _ := br.Peek(n)
			if _, err := up.Write(b); err != nil {
				return
			}
		}
		pipe(c, up)
		return
	}
	// A plain HTTP request: forward it as origin-form, one request per
	// connection.
	req.RequestURI = ""
	req.Header.Del("Proxy-Connection")
	req.Header.Del("Proxy-Authorization")
	req.Close = true
	if err := req.Write(up); err != nil {
		return
	}
	_, _ = io.Copy(c, up)
}

func writeStatus(c net.Conn, code int, msg string) {
	body := msg + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", code, http.StatusText(code), len(body), body)
}

// pipe copies both ways until either side ends.
func pipe(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}

// runBridge listens on listen inside the world and joins every connection
// to the proxy's unix socket. It runs in the keeper for the world's life.
func runBridge(listen, socket string) error {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				time.Sleep(10 * time.Millisecond)
				continue
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("unix", socket)
				if err != nil {
					return
				}
				defer up.Close()
				pipe(c, up)
			}()
		}
	}()
	return nil
}
