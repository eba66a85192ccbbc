package daemon_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/sessions"
)

// TestControlPlaneOverTheSocket runs the real daemon (githubsim, real tmux,
// embedded JetStream) and drives its control plane over the unix socket:
// the socket is 0600, status and queue answer, a spawned session is listed,
// paused (events held back), resumed and stopped, and the live stream
// carries the daemon's events.
func TestControlPlaneOverTheSocket(t *testing.T) {
	w := newWorld(t, nil)
	sock := w.d.ControlSocket()
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	c := api.NewSocketClient(sock)
	ctx := context.Background()

	// Subscribe to the live stream before anything happens.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, _ := http.NewRequestWithContext(sctx, "GET", "http://loopd"+api.Prefix+"/events/stream", nil)
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()

	n := w.openLabeled()
	ref := w.item(n).String()
	w.eventually("the session", func() bool { return w.spawns() == 1 })
	w.waitIdle()

	var st api.Status
	require.NoError(t, c.Do(ctx, "GET", "/status", nil, nil, &st))
	require.Equal(t, w.cfg.StateRoot, st.StateRoot)
	require.Equal(t, 1, st.LiveSessions)
	require.NotNil(t, st.Queue)
	require.Zero(t, st.Queue.Depth)
	require.Equal(t, w.d.WebhookURL(), st.Webhook)

	var recs []map[string]any
	require.NoError(t, c.Do(ctx, "GET", "/sessions", url.Values{"status": {"active"}}, nil, &recs))
	require.Len(t, recs, 1)
	require.Equal(t, ref, recs[0]["workItem"].(map[string]any)["ref"])

	var attach map[string]string
	require.NoError(t, c.Do(ctx, "GET", "/sessions/attach", url.Values{"ref": {ref}}, nil, &attach))
	require.Equal(t, w.d.Sessions().AttachCommand(sessions.TmuxName(w.item(n))), attach["command"])

	// /metrics on the same socket, parsed with Prometheus's text parser.
	mresp, err := hc.Get("http://loopd/metrics")
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(mresp.Body)
	mresp.Body.Close()
	require.NoError(t, err)
	sample := func(name, label, value string) float64 {
		f, ok := fams[name]
		require.True(t, ok, name)
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == label && l.GetValue() == value {
					if m.Counter != nil {
						return m.Counter.GetValue()
					}
					return m.Gauge.GetValue()
				}
			}
			if label == "" {
				return m.Gauge.GetValue()
			}
		}
		t.Fatalf("%s{%s=%q} missing", name, label, value)
		return 0
	}
	require.GreaterOrEqual(t, sample("theloop_webhooks_total", "outcome", "accepted"), 2.0, "opened and labeled")
	require.Equal(t, 1.0, sample("theloop_live_sessions", "", ""))
	require.Equal(t, 0.0, sample("theloop_queue_depth", "", ""))
	require.Equal(t, 1.0, sample("theloop_gate_waiting_items", "gate", "phase-selection"), "the item waits at phase selection")
	require.GreaterOrEqual(t, sample("theloop_integration_calls_total", "operation", "github.add-comment"), 1.0, "the announcement")
	hooks := fams["theloop_hook_duration_seconds"]
	require.NotNil(t, hooks, "the graph link's hooks are timed")
	require.NotEmpty(t, hooks.Metric)
	require.GreaterOrEqual(t, fams["theloop_dispatch_latency_seconds"].Metric[0].GetHistogram().GetSampleCount(), uint64(1), "the spawn (a dropped event has no effect to time)")

	// MCP at /mcp on the same socket, through the SDK's client.
	mc := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ms, err := mc.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://loopd/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	mres, err := ms.CallTool(ctx, &mcp.CallToolParams{Name: "graph_status", Arguments: map[string]any{"repo": w.checkout(n), "workItem": fmt.Sprintf("issue-%d", n)}})
	require.NoError(t, err)
	require.False(t, mres.IsError, "%v", mres.Content)
	require.Equal(t, "phase-selection", mres.StructuredContent.(map[string]any)["currentNode"])
	require.NoError(t, ms.Close())

	var res api.ControlResult
	require.NoError(t, c.Do(ctx, "POST", "/sessions/control", nil, api.ControlRequest{Ref: ref, Verb: "pause"}, &res))
	require.Equal(t, "paused", res.Effect)
	require.NotEmpty(t, res.Announced, "announced on the work item: %s", res.AnnounceError)
	cs, err := w.sim.Comments(repoFull, n)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(cs[len(cs)-1].Body, "the-loop pause\n\n_Issued from the CLI by "+osUser(t)+" (effect: paused)._"), cs[len(cs)-1].Body)
	rec, err := c.Raw(ctx, "GET", "/sessions/one", url.Values{"ref": {ref}}, nil)
	require.NoError(t, err)
	require.Contains(t, string(rec), `"status": "paused"`)

	// A comment while paused is held back (dispatch.dropped session-paused).
	_, err = w.sim.Comment(repoFull, n, human, "any news?")
	require.NoError(t, err)
	w.waitIdle()
	require.NotContains(t, w.received(), "any news?")

	res = api.ControlResult{}
	require.NoError(t, c.Do(ctx, "POST", "/sessions/control", nil, api.ControlRequest{Ref: ref, Verb: "resume", NoComment: true}, &res))
	require.Equal(t, "resumed", res.Effect)
	require.Empty(t, res.Announced, "--no-comment")
	require.NoError(t, c.Do(ctx, "POST", "/sessions/control", nil, api.ControlRequest{Ref: ref, Verb: "resume", Actor: osUser(t)}, &res))
	require.Equal(t, "nothing-to-resume", res.Effect)
	require.NoError(t, c.Do(ctx, "POST", "/sessions/control", nil, api.ControlRequest{Ref: ref, Verb: "stop"}, &res))
	require.Equal(t, "stopped", res.Effect)
	require.NoError(t, c.Do(ctx, "GET", "/sessions", url.Values{"status": {"closed"}}, nil, &recs))
	require.Len(t, recs, 1)

	_, err = c.Raw(ctx, "POST", "/sessions/control", nil, api.ControlRequest{Ref: "github:octo/demo#999", Verb: "stop"})
	var ae *api.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, 404, ae.Status)

	var dead []api.DeadLetterView
	require.NoError(t, c.Do(ctx, "GET", "/queue/dead", nil, nil, &dead))
	require.Empty(t, dead)

	// The stream carried the spawn and the operator's control commands.
	var seen []string
	deadline := time.After(10 * time.Second)
	for !strings.Contains(strings.Join(seen, "\n"), `"effect":"stopped"`) {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the stream ended")
			if strings.HasPrefix(l, "data: ") {
				seen = append(seen, l)
			}
		case <-deadline:
			t.Fatalf("the stream did not carry the stop; got:\n%s", strings.Join(seen, "\n"))
		}
	}
	all := strings.Join(seen, "\n")
	require.Contains(t, all, `"event":"session.spawned"`)
	require.Contains(t, all, `"event":"control.command"`)
	require.Contains(t, all, `"via":"cli"`)

	// Events are queryable too, with the control record's source.
	var evs []map[string]any
	require.NoError(t, c.Do(ctx, "GET", "/events", url.Values{"event": {"control.command"}}, nil, &evs))
	require.Len(t, evs, 4, "pause, resume, resume (nothing to resume), stop")
	_ = sessions.StatusClosed
}

// TCP is opt-in and needs the bearer token; the socket stays.
func TestControlPlaneOnTCPNeedsTheToken(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) {
		c.Service.Listen = "127.0.0.1:0"
		c.Service.Token = "s3cret"
	})
	addr := w.d.ControlAddr()
	require.NotEmpty(t, addr)
	resp, err := http.Get("http://" + addr + api.Prefix + "/status")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	resp, err = http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "metrics too")
	var st api.Status
	require.NoError(t, api.NewTCPClient("http://"+addr, "s3cret", nil).Do(context.Background(), "GET", "/status", nil, nil, &st))
	require.Equal(t, w.cfg.StateRoot, st.StateRoot)
	require.NoError(t, api.NewSocketClient(w.d.ControlSocket()).Do(context.Background(), "GET", "/status", nil, nil, &st))
	w.eventually("api.request in the event log", func() bool { return w.count("api.request") >= 2 })
	// Let the dispatcher take its consumer before the world stops (a stop
	// while it starts is reported as an error by Run).
	w.openLabeled()
	w.eventually("the session", func() bool { return w.spawns() == 1 })
}

func TestTCPWithoutATokenRefusesToStart(t *testing.T) {
	requireTools(t)
	cfg := daemon.DefaultConfig()
	cfg.StateRoot = shortdir.New(t)
	cfg.Webhook.Host, cfg.Webhook.Port = "127.0.0.1", 0
	cfg.InsecureAcceptUnsigned = true
	cfg.ReconcileInterval = -1
	cfg.ClaudeEnv = &sessions.ClaudeEnvironment{}
	cfg.Service.Listen = "127.0.0.1:0"
	d, err := daemon.New(cfg, daemon.Deps{Clock: graph.SystemClock{}, Log: testLog{t}})
	require.NoError(t, err)
	err = d.Run(context.Background())
	require.ErrorIs(t, err, apiserver.ErrNoToken)
}
