package daemon_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// mcpOverSocket is an MCP client session on loopd's control socket,
// closed when the test ends.
func mcpOverSocket(t *testing.T, sock string) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	mc := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	ms, err := mc.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://loopd/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ms.Close() })
	return ms
}

// The reads beside the graph verbs (docs/daemon.md §13) over the real
// control socket of a running loopd with a spawned session: the work items
// as the board shows them, the event log's names, a repository's
// scenarios, instructions and critics, a critic's plan (never its run),
// and the MCP tools beside them — each behind the socket's peer policy and
// recorded as api.request like every other route.
func TestControlPlaneReads(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) { landlockOnly(c) })
	ctx := context.Background()
	n := w.openLabeled()
	ref := w.item(n).String()
	w.eventually("the spawn", func() bool { return w.spawns() == 1 })
	w.waitIdle()
	cl := api.NewSocketClient(w.d.ControlSocket())

	items, err := cl.WorkItems(ctx)
	require.NoError(t, err)
	require.Len(t, items, 1)
	require.Equal(t, ref, items[0].Ref)
	require.True(t, items[0].SessionLive)
	require.NotEmpty(t, items[0].State)
	one, err := cl.WorkItem(ctx, ref)
	require.NoError(t, err)
	require.Equal(t, items[0].Ref, one.Ref)
	_, err = cl.WorkItem(ctx, "github:octo/demo#9999")
	var ae *api.APIError
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, http.StatusNotFound, ae.Status)

	types, err := cl.EventTypes(ctx)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, et := range types {
		seen[et.Name] = et.Count
	}
	require.GreaterOrEqual(t, seen["dispatch.spawned"], 1, "%v", types)

	repo := w.checkout(n)
	q := url.Values{"repo": {repo}}
	var scan loop.ScenarioScan
	require.NoError(t, cl.Do(ctx, "GET", api.RepoScenariosPath, q, nil, &scan))
	require.NotEmpty(t, scan.Globs)
	var in loop.Instructions
	require.NoError(t, cl.Do(ctx, "GET", api.RepoInstructionsPath, q, nil, &in))
	var critics api.RepoCritics
	require.NoError(t, cl.Do(ctx, "GET", api.RepoCriticsPath, q, nil, &critics))
	require.NotNil(t, critics.Critics)
	err = cl.Do(ctx, "GET", api.RepoCriticsPath, url.Values{"repo": {"relative/dir"}}, nil, nil)
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, http.StatusBadRequest, ae.Status)
	err = cl.Do(ctx, "POST", api.RepoCriticsRunPath, nil, api.CriticRunRequest{Repo: repo, WorkItem: "issue-1", Critic: "opus"}, nil)
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, http.StatusForbidden, ae.Status)
	require.Contains(t, ae.Detail, "loopd never runs a critic")

	// An agent's process is refused here as on every route.
	code, body := peerCall(t, true, w.d.ControlSocket(), "GET", api.Prefix+api.WorkItemsPath, nil)
	require.Equal(t, http.StatusForbidden, code, body)
	w.eventually("the reads in the event log", func() bool {
		for _, v := range w.eventField("api.request", "path") {
			if v == api.Prefix+api.WorkItemsPath {
				return true
			}
		}
		return false
	})

	ms := mcpOverSocket(t, w.d.ControlSocket())
	call := func(name string, args map[string]any) map[string]any {
		t.Helper()
		res, err := ms.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		require.NoError(t, err)
		require.False(t, res.IsError, "%s: %v", name, res.Content)
		return res.StructuredContent.(map[string]any)
	}
	listed := call("list_work_items", map[string]any{})
	require.EqualValues(t, 1, listed["count"])
	got := call("get_work_item", map[string]any{"workItem": ref})
	require.Equal(t, ref, got["ref"])
	status := call("daemon_status", map[string]any{})
	require.NotEmpty(t, status["version"])
	pr, err := w.sim.OpenPullRequest(repoFull, human, "Widget", "A widget.")
	require.NoError(t, err)
	linked := call("link_pull_request", map[string]any{"workItem": ref, "pullRequest": "#" + itoa(pr.Number)})
	require.Equal(t, true, linked["linked"], "%v", linked)
	w.eventually("the link recorded", func() bool { return w.count("session.pr_linked") >= 1 })
}
