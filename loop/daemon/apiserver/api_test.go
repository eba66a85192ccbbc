package apiserver_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
)

func privateDir(t testing.TB) string {
	t.Helper()
	// Short whatever $TMPDIR is, so the socket path stays under the limit.
	return shortdir.New(t)
}

func serve(t testing.TB, ln net.Listener, h http.Handler) {
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

func mux(b apiserver.Backend) http.Handler {
	m := http.NewServeMux()
	a, err := apiserver.New(apiserver.Config{Clock: graph.SystemClock{}}, b)
	if err != nil {
		panic(err) // a test helper: the clock is given
	}
	m.Handle(api.Prefix+"/", a)
	return m
}

func TestSocketIsPrivateAndSingle(t *testing.T) {
	sock := filepath.Join(privateDir(t), api.SocketName)
	ln, err := apiserver.ListenUnix(sock)
	require.NoError(t, err)
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeSocket)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "the control socket is 0600")
	serve(t, ln, mux(apiserver.Backend{}))

	_, err = apiserver.ListenUnix(sock)
	require.ErrorContains(t, err, "another process is listening", "a live socket is never taken over")

	var health api.Health
	require.NoError(t, api.NewSocketClient(sock).Do(context.Background(), "GET", "/health", nil, nil, &health))
	require.True(t, health.OK)

	// A stale socket (nothing listening) is replaced.
	stale := filepath.Join(privateDir(t), api.SocketName)
	l2, err := net.Listen("unix", stale)
	require.NoError(t, err)
	l2.(*net.UnixListener).SetUnlinkOnClose(false)
	l2.Close()
	l3, err := apiserver.ListenUnix(stale)
	require.NoError(t, err)
	l3.Close()

	// A path too long for a unix socket names the fix.
	_, err = apiserver.ListenUnix("/tmp/" + strings.Repeat("x", 120) + "/loopd.sock")
	require.ErrorContains(t, err, "use a shorter state root")

	// A regular file in the way is not removed.
	file := filepath.Join(privateDir(t), api.SocketName)
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))
	_, err = apiserver.ListenUnix(file)
	require.ErrorContains(t, err, "not a socket")
}

func TestTCPRequiresTheTokenAndSendsNoCORS(t *testing.T) {
	_, err := apiserver.ListenTCP("127.0.0.1:0", "")
	require.ErrorIs(t, err, apiserver.ErrNoToken)

	ln, err := apiserver.ListenTCP("127.0.0.1:0", "s3cret")
	require.NoError(t, err)
	serve(t, ln, apiserver.RequireToken("s3cret", mux(apiserver.Backend{})))
	base := "http://" + ln.Addr().String()

	for _, tc := range []struct {
		name, method, auth string
		want               int
	}{
		{"no token", "GET", "", 401},
		{"wrong token", "GET", "Bearer nope", 401},
		{"token without Bearer", "GET", "s3cret", 401},
		{"preflight", "OPTIONS", "", 401},
		{"right token", "GET", "Bearer s3cret", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, base+api.Prefix+"/health", nil)
			req.Header.Set("Origin", "https://evil.example")
			req.Header.Set("Access-Control-Request-Method", "POST")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, tc.want, resp.StatusCode)
			for k := range resp.Header {
				require.False(t, strings.HasPrefix(strings.ToLower(k), "access-control-"), "no CORS header: %s", k)
			}
		})
	}
	var health api.Health
	require.NoError(t, api.NewTCPClient(base, "s3cret", nil).Do(context.Background(), "GET", "/health", nil, nil, &health))
	err = api.NewTCPClient(base, "nope", nil).Do(context.Background(), "GET", "/health", nil, nil, &health)
	var ae *api.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 401, ae.Status)
}

func TestMissingPartsAnswer503AndBodiesAreBounded(t *testing.T) {
	sock := filepath.Join(privateDir(t), api.SocketName)
	ln, err := apiserver.ListenUnix(sock)
	require.NoError(t, err)
	serve(t, ln, mux(apiserver.Backend{}))
	c := api.NewSocketClient(sock)
	ctx := context.Background()
	var ae *api.APIError
	for _, p := range []string{"/sessions", "/queue", "/queue/dead", "/status", "/events"} {
		_, err := c.Raw(ctx, "GET", p, nil, nil)
		require.ErrorAs(t, err, &ae, p)
		require.Equal(t, 503, ae.Status, p)
	}
	_, err = c.Raw(ctx, "GET", "/events/stream", nil, nil)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 404, ae.Status, "no stream configured")

	sock2 := filepath.Join(privateDir(t), api.SocketName)
	ln2, err := apiserver.ListenUnix(sock2)
	require.NoError(t, err)
	serve(t, ln2, mux(apiserver.Backend{Graphs: &apiserver.Graphs{}}))
	_, err = api.NewSocketClient(sock2).Raw(ctx, "POST", "/check", nil, map[string]string{"repo": strings.Repeat("x", 100<<10)})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 413, ae.Status)
}

func TestEventsQueryAndLiveStream(t *testing.T) {
	dir := privateDir(t)
	logPath := filepath.Join(dir, "events.jsonl")
	el, err := loop.OpenEventLog(logPath, "loopd", loop.EventLogOptions{})
	require.NoError(t, err)
	stream := apiserver.NewStream(apiserver.StreamConfig{MaxSubscribers: 1, KeepAlive: time.Hour})
	emit := func(name, item string) {
		e := graph.LogEvent{Time: time.Now(), Name: name, Level: graph.LevelInfo, Fields: []graph.Field{{Key: "work_item", Value: item}}}
		el.Emit(e)
		stream.Emit(e)
	}
	emit("graph.started", "github:acme/widgets#42")
	emit("graph.advanced", "github:acme/widgets#7")

	sock := filepath.Join(dir, api.SocketName)
	ln, err := apiserver.ListenUnix(sock)
	require.NoError(t, err)
	serve(t, ln, mux(apiserver.Backend{EventLogPath: logPath, Stream: stream}))
	c := api.NewSocketClient(sock)
	ctx := context.Background()

	var got []map[string]any
	require.NoError(t, c.Do(ctx, "GET", "/events", map[string][]string{"workItem": {"issue-42"}}, nil, &got))
	require.Len(t, got, 1)
	require.Equal(t, "graph.started", got[0]["event"])
	require.NoError(t, c.Do(ctx, "GET", "/events", map[string][]string{"event": {"graph."}, "limit": {"1"}}, nil, &got))
	require.Len(t, got, 1)
	require.Equal(t, "graph.advanced", got[0]["event"])
	_, err = c.Raw(ctx, "GET", "/events", map[string][]string{"since": {"yesterday-ish"}}, nil)
	require.ErrorContains(t, err, "400")

	// The live stream: only the subscribed work item's events, as log lines.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, _ := http.NewRequestWithContext(sctx, "GET", "http://loopd"+api.Prefix+"/events/stream?workItem=issue-42", nil)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	r := bufio.NewReader(resp.Body)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(line, ":"), "a comment opens the stream")
	require.Eventually(t, func() bool { return stream.Subscribers() == 1 }, 5*time.Second, 10*time.Millisecond)

	// A second subscriber is over the limit: 503 with Retry-After.
	_, err = c.Raw(ctx, "GET", "/events/stream", nil, nil)
	var ae *api.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 503, ae.Status)

	emit("graph.blocked", "github:acme/widgets#7")
	emit("graph.parked", "github:acme/widgets#42")
	var frame []string
	for {
		l, err := r.ReadString('\n')
		require.NoError(t, err)
		if l == "\n" && len(frame) > 0 {
			break
		}
		if l != "\n" {
			frame = append(frame, strings.TrimSpace(l))
		}
	}
	require.Equal(t, "event: log", frame[1])
	require.Contains(t, frame[2], `"event":"graph.parked"`, "the other work item's event is not streamed")
	rec, err := loop.ParseEventLine([]byte(strings.TrimPrefix(frame[2], "data: ")))
	require.NoError(t, err, "each frame is an event-log line")
	require.Equal(t, "graph.parked", rec.Event)
}
