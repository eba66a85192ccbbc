package mcpserver_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/loop/daemon/mcpserver"
)

func newRepo(t testing.TB) string {
	repo := t.TempDir()
	for rel, content := range map[string]string{
		".the-loop/harness-config.yaml":       "ticketing:\n  github: {owner: acme, repo: widgets}\n",
		"docs/specs/issue-42/requirements.md": "# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nnone\n",
	} {
		p := filepath.Join(repo, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	}
	return repo
}

type world struct {
	repo    string
	tickets *graphtest.Tickets
	graphs  *apiserver.Graphs
	logPath string
	session *mcp.ClientSession
}

// newWorld serves the MCP server over streamable HTTP (a real HTTP server)
// and connects the SDK's own client to it.
func newWorld(t testing.TB) *world {
	w := &world{repo: newRepo(t), tickets: graphtest.NewTickets()}
	clock := graphtest.NewClock(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC))
	w.logPath = filepath.Join(t.TempDir(), "events.jsonl")
	el, err := loop.OpenEventLog(w.logPath, "loopd", loop.EventLogOptions{Clock: clock})
	require.NoError(t, err)
	t.Cleanup(func() { el.Close() })
	w.graphs = &apiserver.Graphs{Integrations: w.tickets, Sink: el, Clock: clock}
	s, err := mcpserver.New(mcpserver.Config{Graphs: w.graphs, EventLogPath: w.logPath, Integrations: w.tickets, Sink: el, Clock: clock, Version: "test"})
	require.NoError(t, err)
	srv := httptest.NewServer(mcpserver.Handler(s))
	t.Cleanup(srv.Close)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	sess, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { sess.Close() })
	w.session = sess
	return w
}

func (w *world) call(t testing.TB, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := w.session.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err)
	return res
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	require.False(t, res.IsError, "tool error: %v", res.Content)
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func asJSON(t *testing.T, v any) map[string]any {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	return m
}

func TestToolsAreListedWithSchemasAndForceSkipAreNot(t *testing.T) {
	w := newWorld(t)
	res, err := w.session.ListTools(context.Background(), nil)
	require.NoError(t, err)
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		require.NotNil(t, tool.InputSchema, tool.Name)
		require.NotNil(t, tool.OutputSchema, tool.Name)
		require.NotEmpty(t, tool.Description, tool.Name)
	}
	slices.Sort(names)
	want := slices.Clone(mcpserver.Tools)
	slices.Sort(want)
	require.Equal(t, want, names)
	for _, n := range names {
		require.NotContains(t, n, "force")
		require.NotContains(t, n, "skip")
	}
	_, err = w.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "graph_force", Arguments: map[string]any{}})
	require.Error(t, err, "force is not a tool")
}

func TestToolsAnswerWhatTheAPIAnswers(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	req := api.GraphRequest{Repo: w.repo, WorkItem: "issue-42"}

	got := structured(t, w.call(t, "check", map[string]any{"repo": w.repo, "workItem": "issue-42", "recompute": true}))
	want, err := w.graphs.Check(ctx, api.CheckRequest{GraphRequest: req, Recompute: true})
	require.NoError(t, err)
	require.Equal(t, asJSON(t, want), got)
	require.Equal(t, "phase-selection", got["currentNode"])

	got = structured(t, w.call(t, "graph_show", map[string]any{}))
	view, err := w.graphs.Show(ctx, api.GraphRequest{}, "")
	require.NoError(t, err)
	require.Equal(t, asJSON(t, view), got)

	got = structured(t, w.call(t, "graph_status", map[string]any{"repo": w.repo, "workItem": "issue-42"}))
	rep, err := w.graphs.Status(ctx, req)
	require.NoError(t, err)
	require.Equal(t, asJSON(t, rep), got)

	got = structured(t, w.call(t, "graph_complete", map[string]any{"repo": w.repo, "workItem": "issue-42"}))
	require.Equal(t, string(graph.StepRefused), got["status"])
	require.Equal(t, "not-started", got["reason"])

	// Errors are tool errors the agent can read, not protocol failures.
	res := w.call(t, "check", map[string]any{"repo": "relative", "workItem": "issue-42"})
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "absolute path")
	res, err = w.session.CallTool(ctx, &mcp.CallToolParams{Name: "check", Arguments: map[string]any{"repo": w.repo, "workItem": "issue-42", "recomptue": true}})
	require.True(t, err != nil || res.IsError, "an unknown argument is refused by the input schema: %v", res)
}

func TestAskPostsAMarkedQuestionAndEventsReadsTheLog(t *testing.T) {
	w := newWorld(t)
	got := structured(t, w.call(t, "ask", map[string]any{"workItem": "github:acme/widgets#42", "question": "Which storage backend?"}))
	require.Equal(t, true, got["posted"])
	comments := w.tickets.Comments("github:acme/widgets#42")
	require.Len(t, comments, 1)
	require.Contains(t, comments[0], "Which storage backend?")
	require.Contains(t, comments[0], "<!-- the-loop:agent-comment -->")

	res := w.call(t, "ask", map[string]any{"workItem": "jira:X-1", "question": "q"})
	require.True(t, res.IsError)
	res = w.call(t, "ask", map[string]any{"workItem": "github:acme/widgets#42", "question": "  "})
	require.True(t, res.IsError)

	got = structured(t, w.call(t, "events", map[string]any{"event": "session.", "workItem": "issue-42"}))
	evs := got["events"].([]any)
	require.Len(t, evs, 1)
	require.Equal(t, "session.awaiting_input", evs[0].(map[string]any)["event"])
	require.True(t, strings.Contains(evs[0].(map[string]any)["question"].(string), "storage"))
}

// BenchmarkToolCallStreamableHTTP is one graph_status call through the SDK
// client over streamable HTTP (loopback TCP), the graph evaluation included.
func BenchmarkToolCallStreamableHTTP(b *testing.B) {
	w := newWorld(b)
	args := map[string]any{"repo": w.repo, "workItem": "issue-42"}
	for b.Loop() {
		res, err := w.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "graph_status", Arguments: args})
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}
