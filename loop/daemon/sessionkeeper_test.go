package daemon_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/sessions"
)

// The registry verbs over the real control socket, with real tmux, real git
// checkouts and the stand-in harness: reset ends the conversation and
// starts a fresh one at the same node pointed at the artifacts (bound in
// graph-state.json); register attaches an outside conversation but never
// one another item holds, never another item's checkout, never a checkout
// of another repository, and a token holder or an agent's process may not
// register at all; close ends the session and keeps the checkout and the
// graph state.
func TestOperatorSessionKeeperVerbs(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) {
		c.Dashboard.Operator = human // the socket's operator is github:dana
		c.Service.Listen = "127.0.0.1:0"
		c.Service.Token = "service-secret"
	})
	ctx := context.Background()
	cl := api.NewSocketClient(w.d.ControlSocket())
	var ae *api.APIError
	status := func(err error) int {
		t.Helper()
		require.True(t, errors.As(err, &ae), "%v", err)
		return ae.Status
	}

	n := w.openLabeled()
	ref := w.item(n).String()
	w.eventually("the session", func() bool { return w.spawns() == 1 })
	w.waitIdle()
	reg, err := sessions.OpenRegistry(sessions.RegistryDir(w.cfg.StateRoot))
	require.NoError(t, err)
	before, err := reg.Get(w.item(n))
	require.NoError(t, err)
	cwd := before.Cwd
	artifact := filepath.Join(cwd, "docs", "specs", "issue-"+itoa(n), "requirements.md")
	require.NoError(t, os.MkdirAll(filepath.Dir(artifact), 0o755))
	require.NoError(t, os.WriteFile(artifact, []byte("# Requirements\n"), 0o644))

	// Reset: a token holder names no person; an agent's process is refused.
	tcp := api.NewTCPClient("http://"+w.d.ControlAddr(), "service-secret", nil)
	require.Equal(t, http.StatusForbidden, status(tcp.Do(ctx, "POST", api.SessionPath(ref, "reset"), nil, api.ResetRequest{}, nil)), ae.Detail)
	code, body := peerCall(t, true, w.d.ControlSocket(), "POST", api.Prefix+api.SessionPath(ref, "reset"), api.ResetRequest{})
	require.Equal(t, http.StatusForbidden, code, body)

	var reset api.SessionResult
	require.NoError(t, cl.Do(ctx, "POST", api.SessionPath(ref, "reset"), nil, api.ResetRequest{NoComment: true}, &reset))
	require.Equal(t, "reset", reset.Effect)
	require.Equal(t, before.SessionID, reset.PreviousSessionID)
	require.NotEqual(t, before.SessionID, reset.HarnessSessionID)
	require.Equal(t, "live", reset.Tmux)
	require.Contains(t, reset.Artifacts, filepath.Join("docs", "specs", "issue-"+itoa(n), "requirements.md"))
	require.Equal(t, 2, w.spawns(), "a fresh conversation, not a resume")
	w.eventually("the fresh conversation to read its seed", func() bool {
		return strings.Contains(w.received(), "was reset (the operator @"+human+" reset the session)") &&
			strings.Contains(w.received(), "requirements.md")
	})
	after, err := reg.Get(w.item(n))
	require.NoError(t, err)
	require.Equal(t, cwd, after.Cwd, "same checkout")
	require.Equal(t, sessions.StatusActive, after.Status)
	require.Equal(t, before.SessionID, after.Fallbacks[len(after.Fallbacks)-1].PreviousSessionID)
	st := w.state(n)
	require.NotNil(t, st.Session)
	require.Equal(t, reset.HarnessSessionID, st.Session.ID, "the new conversation is bound in graph-state.json")
	require.Equal(t, []any{"github:" + human}, w.eventField("session.reset_requested", "actor"))
	require.FileExists(t, artifact, "artifacts kept")

	// Register: a second item, worked in a checkout of its own.
	is, err := w.sim.OpenIssue(repoFull, human, "Another", "Another widget.")
	require.NoError(t, err)
	m := is.Number
	mref := w.item(m).String()
	own := filepath.Join(shortdir.New(t), "own")
	git(t, filepath.Dir(own), "clone", "-q", "file://"+w.remote, own)
	fresh := "4a7c2f1e-9b3d-4e8f-a6b5-0c1d2e3f4a5b"

	refusals := []struct {
		name string
		req  api.RegisterRequest
		want string
	}{
		{"another item's conversation", api.RegisterRequest{HarnessSessionID: reset.HarnessSessionID, Cwd: own, Force: true}, "serves one work item"},
		{"another item's checkout", api.RegisterRequest{HarnessSessionID: fresh, Cwd: cwd, Force: true}, "checkout"},
		{"not a session id", api.RegisterRequest{HarnessSessionID: "../../x", Cwd: own}, "harness session id"},
		{"a relative cwd", api.RegisterRequest{HarnessSessionID: fresh, Cwd: "own"}, "absolute"},
		{"an unknown harness", api.RegisterRequest{Harness: "vim", HarnessSessionID: fresh, Cwd: own}, "vim"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			err := cl.Do(ctx, "POST", api.SessionPath(mref, "register"), nil, tc.req, nil)
			require.Equal(t, http.StatusBadRequest, status(err), ae.Detail)
			require.Contains(t, ae.Detail, tc.want)
		})
	}
	other := filepath.Join(shortdir.New(t), "other")
	require.NoError(t, os.MkdirAll(other, 0o755))
	git(t, other, "init", "-q")
	git(t, other, "remote", "add", "origin", "https://github.com/octo/elsewhere.git")
	err = cl.Do(ctx, "POST", api.SessionPath(mref, "register"), nil, api.RegisterRequest{HarnessSessionID: fresh, Cwd: other}, nil)
	require.Equal(t, http.StatusBadRequest, status(err), ae.Detail)
	require.Contains(t, ae.Detail, "not a checkout of octo/demo")
	require.Equal(t, http.StatusForbidden, status(tcp.Do(ctx, "POST", api.SessionPath(mref, "register"), nil, api.RegisterRequest{HarnessSessionID: fresh, Cwd: own}, nil)), ae.Detail)
	code, body = peerCall(t, true, w.d.ControlSocket(), "POST", api.Prefix+api.SessionPath(mref, "register"), api.RegisterRequest{HarnessSessionID: fresh, Cwd: own})
	require.Equal(t, http.StatusForbidden, code, body)
	_, err = reg.Get(w.item(m))
	require.ErrorIs(t, err, sessions.ErrNoRecord, "no refusal left a record")

	var registered api.SessionResult
	require.NoError(t, cl.Do(ctx, "POST", api.SessionPath(mref, "register"), nil, api.RegisterRequest{HarnessSessionID: fresh, Cwd: own, NoComment: true}, &registered))
	require.Equal(t, "registered", registered.Effect)
	require.Equal(t, sessions.TmuxName(w.item(m)), registered.Session, "the item's own tmux name, never the caller's")
	require.Equal(t, "absent", registered.Tmux)
	rec, err := reg.Get(w.item(m))
	require.NoError(t, err)
	require.Equal(t, fresh, rec.SessionID)
	require.Equal(t, own, rec.Cwd)
	// Registering again over the live record needs force.
	again := "5b8d3a2f-0c4e-4f9a-b7c6-1d2e3f4a5b6c"
	err = cl.Do(ctx, "POST", api.SessionPath(mref, "register"), nil, api.RegisterRequest{HarnessSessionID: again, Cwd: own}, nil)
	require.Equal(t, http.StatusBadRequest, status(err), ae.Detail)
	require.Contains(t, ae.Detail, "force")
	var replaced api.SessionResult
	require.NoError(t, cl.Do(ctx, "POST", api.SessionPath(mref, "register"), nil, api.RegisterRequest{HarnessSessionID: again, Cwd: own, Force: true, NoComment: true}, &replaced))
	require.Equal(t, "replaced", replaced.Effect)
	require.Equal(t, fresh, replaced.PreviousSessionID)

	// Close: the session ends, the checkout and the graph state stay.
	code, body = peerCall(t, true, w.d.ControlSocket(), "POST", api.Prefix+api.SessionPath(ref, "close"), api.CloseRequest{})
	require.Equal(t, http.StatusForbidden, code, body)
	keep := false
	var closed api.SessionResult
	require.NoError(t, cl.Do(ctx, "POST", api.SessionPath(ref, "close"), nil, api.CloseRequest{KeepTmux: &keep}, &closed))
	require.Equal(t, "closed", closed.Effect)
	require.Equal(t, "absent", closed.Tmux)
	require.NotEmpty(t, closed.Announced, "announced on the work item")
	rec, err = reg.Get(w.item(n))
	require.NoError(t, err)
	require.Equal(t, sessions.StatusClosed, rec.Status)
	require.DirExists(t, cwd, "the checkout is kept")
	require.FileExists(t, artifact)
	st = w.state(n)
	require.NotNil(t, st.Session)
	require.False(t, *st.Session.Alive, "graph-state.json says the session is gone")
	require.NotEmpty(t, st.CurrentNode, "the graph state is kept")
	cs, err := w.sim.Comments(repoFull, n)
	require.NoError(t, err)
	require.Contains(t, cs[len(cs)-1].Body, "Session closed from the CLI by github:"+human)
	require.NoError(t, cl.Do(ctx, "POST", api.SessionPath(ref, "close"), nil, api.CloseRequest{NoComment: true}, &closed))
	require.Equal(t, "already-closed", closed.Effect)

	// The operator's MCP tools on the same socket: the same rules.
	ms := mcpOverSocket(t, w.d.ControlSocket())
	steal, err := ms.CallTool(ctx, &mcp.CallToolParams{Name: "register_session", Arguments: map[string]any{"workItem": ref, "harnessSessionId": again, "cwd": own, "force": true}})
	require.NoError(t, err)
	require.True(t, steal.IsError, "another item's conversation, through MCP too")
	require.Contains(t, steal.Content[0].(*mcp.TextContent).Text, "serves one work item")
	mclose, err := ms.CallTool(ctx, &mcp.CallToolParams{Name: "close_session", Arguments: map[string]any{"workItem": mref, "keepTmux": false}})
	require.NoError(t, err)
	require.False(t, mclose.IsError, "%v", mclose.Content)
	require.Equal(t, "closed", mclose.StructuredContent.(map[string]any)["effect"])
	rec, err = reg.Get(w.item(m))
	require.NoError(t, err)
	require.Equal(t, sessions.StatusClosed, rec.Status)
	require.DirExists(t, own)
}
