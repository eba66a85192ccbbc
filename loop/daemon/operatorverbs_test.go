package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/sessions"
)

// The operator's session verbs over the real control socket, with real
// tmux and the stand-in harness: start acts as the ticket's keyword (the
// queue, the control record with source cli, the announcement), reply
// reaches the pane marked as the operator's and the event log names who
// said what, a reply carrying a control keyword is refused, transcript
// and the pane stream read the pane, an agent's process is refused, and a
// caller who names no authorized GitHub user may not start or reply.
func TestOperatorSessionVerbs(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) {
		c.Routing.SpawnOnUnmatched = daemon.SpawnAlways
		c.Routing.RequireStartCommand = true
		c.Dashboard.Operator = human // the socket's operator is github:dana
		c.Service.Listen = "127.0.0.1:0"
		c.Service.Token = "service-secret"
	})
	ctx := context.Background()
	cl := api.NewSocketClient(w.d.ControlSocket())
	is, err := w.sim.OpenIssue(repoFull, human, "Add a widget", "Please add a widget.")
	require.NoError(t, err)
	n := is.Number
	ref := w.item(n).String()
	w.waitIdle()
	require.Zero(t, w.spawns(), "armed but awaiting a start command")

	// A token holder names no person: refused like a stranger's keyword.
	tcp := api.NewTCPClient("http://"+w.d.ControlAddr(), "service-secret", nil)
	err = tcp.Do(ctx, "POST", api.SessionPath(ref, "start"), nil, api.OperatorRequest{}, nil)
	var ae *api.APIError
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, http.StatusForbidden, ae.Status, ae.Detail)
	require.Contains(t, ae.Detail, "needs an authorized GitHub user")

	// An agent's process is refused on the new routes too.
	code, body := peerCall(t, true, w.d.ControlSocket(), "POST", api.Prefix+api.SessionPath(ref, "start"), api.OperatorRequest{})
	require.Equal(t, http.StatusForbidden, code, body)
	require.Contains(t, body, "is inside an agent session")

	var started api.ControlResult
	require.NoError(t, cl.Do(ctx, "POST", api.SessionPath(ref, "start"), nil, api.OperatorRequest{}, &started))
	require.Equal(t, "queued", started.Effect)
	require.True(t, strings.HasPrefix(started.Queued, "cli-start-"), started.Queued)
	w.eventually("the session", func() bool { return w.spawns() == 1 })
	w.waitIdle()
	require.Contains(t, w.eventField("control.command", "via"), any("cli"), "recorded like the keyword, source cli")
	cs, err := w.sim.Comments(repoFull, n)
	require.NoError(t, err)
	announced := false
	for _, c := range cs {
		announced = announced || strings.HasPrefix(c.Body, "the-loop start") && strings.Contains(c.Body, "github:"+human)
	}
	require.True(t, announced, "the start is announced on the ticket")

	// A reply carrying a control keyword is refused, and nothing is pasted.
	err = cl.Do(ctx, "POST", api.SessionPath(ref, "reply"), nil, api.ReplyRequest{Message: "ok\nThe-Loop   stop"}, nil)
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, http.StatusBadRequest, ae.Status, ae.Detail)
	require.Contains(t, ae.Detail, "control keyword")
	require.Zero(t, w.count("session.operator_reply"))

	var rep api.ReplyResult
	require.NoError(t, cl.Do(ctx, "POST", api.SessionPath(ref, "reply"), nil, api.ReplyRequest{Message: "Use the v2 client, please."}, &rep))
	require.Equal(t, "github:"+human, rep.Actor)
	require.True(t, rep.Verified, "the pane showed the reply and it was submitted")
	w.eventually("the harness to read the reply", func() bool {
		return strings.Contains(w.received(), "Use the v2 client, please.") && strings.Contains(w.received(), "from the operator @"+human)
	})
	require.Equal(t, []any{"Use the v2 client, please."}, w.eventField("session.operator_reply", "message"))
	require.Equal(t, []any{"github:" + human}, w.eventField("session.operator_reply", "actor"))
	w.d.FlushLogs() // the log is written in the background
	logged, err := os.ReadFile(w.cfg.EventLog.Path)
	require.NoError(t, err)
	require.Contains(t, string(logged), `"event":"session.operator_reply","level":"info","pid":`)

	var tr api.Transcript
	require.NoError(t, cl.Do(ctx, "GET", api.SessionPath(ref, "transcript"), nil, nil, &tr))
	require.Contains(t, tr.Pane, "Use the v2 client")
	require.True(t, sessions.IsLoopSessionName(tr.Session))

	// The pane stream sends the screen at once, with its escapes.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	data, err := streamFirst(sctx, w.d.ControlSocket(), api.Prefix+api.SessionPath(ref, "pane"), "screen")
	require.NoError(t, err)
	var frame api.PaneFrame
	require.NoError(t, json.Unmarshal([]byte(data), &frame))
	require.Contains(t, frame.Screen, "v2 client")

	// The operator's MCP tools on the same socket: what waits on a human,
	// and a reply; a gate decision is not a verb.
	ms := mcpOverSocket(t, w.d.ControlSocket())
	att, err := ms.CallTool(ctx, &mcp.CallToolParams{Name: "list_attention", Arguments: map[string]any{}})
	require.NoError(t, err)
	require.False(t, att.IsError, "%v", att.Content)
	items := att.StructuredContent.(map[string]any)["items"].([]any)
	require.NotEmpty(t, items)
	require.Equal(t, "gate", items[0].(map[string]any)["kind"], "issue #%d waits at phase selection", n)
	approve, err := ms.CallTool(ctx, &mcp.CallToolParams{Name: "control_session", Arguments: map[string]any{"workItem": ref, "verb": "approve"}})
	require.NoError(t, err)
	require.True(t, approve.IsError, "no gate decision through MCP")
	mrep, err := ms.CallTool(ctx, &mcp.CallToolParams{Name: "control_session", Arguments: map[string]any{"workItem": ref, "verb": "reply", "message": "Green, thanks."}})
	require.NoError(t, err)
	require.False(t, mrep.IsError, "%v", mrep.Content)
	w.eventually("the MCP reply in the harness", func() bool { return strings.Contains(w.received(), "Green, thanks.") })

	// Cleanup, as the keyword: the session ends and its record goes.
	var cleaned api.ControlResult
	require.NoError(t, cl.Do(ctx, "POST", api.SessionPath(ref, "cleanup"), nil, api.OperatorRequest{NoComment: true}, &cleaned))
	require.Equal(t, "queued", cleaned.Effect)
	w.eventually("the record to go", func() bool {
		var r json.RawMessage
		err := cl.Do(ctx, "GET", "/sessions/one", map[string][]string{"ref": {ref}}, nil, &r)
		return errors.As(err, &ae) && ae.Status == http.StatusNotFound
	})
}

// streamFirst opens an SSE stream on the control socket and returns the
// data of the first event named event.
func streamFirst(ctx context.Context, sock, path, event string) (string, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, err := http.NewRequestWithContext(ctx, "GET", "http://loopd"+path, nil)
	if err != nil {
		return "", err
	}
	res, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return "", errors.New(res.Status)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok && name == event {
			return v, nil
		}
	}
	return "", errors.New("stream ended without a " + event + " event")
}
