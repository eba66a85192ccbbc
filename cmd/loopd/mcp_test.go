package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
)

// mcpRepo is a repository whose issue-42 waits at phase-selection.
func mcpRepo(t *testing.T) string {
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

// `loopd mcp` on stdio, driven by the SDK's client through pipes.
func TestMCPOnStdio(t *testing.T) {
	repo := mcpRepo(t)
	tickets := graphtest.NewTickets()
	state := t.TempDir()
	cfgPath := filepath.Join(state, "cli-config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("state:\n  root: "+state+"\n"), 0o644))
	e, _, errb := testEnv(t, map[string]string{"THE_LOOP_CLI_CONFIG": cfgPath})
	e.Getwd = func() (string, error) { return repo, nil }
	e.Clock = graphtest.NewClock(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC))
	e.Integrations = func(map[string]any, graph.Sink) (graph.Integrations, []string, error) { return tickets, nil, nil }
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	e.Stdin, e.Stdout = inR, outW
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"loopd", "mcp"}, e)
		outW.Close()
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	sess, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	require.NoError(t, err)
	tools, err := sess.ListTools(context.Background(), nil)
	require.NoError(t, err)
	require.Len(t, tools.Tools, 6)
	res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "check", Arguments: map[string]any{"repo": repo, "workItem": "issue-42", "recompute": true}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	require.Equal(t, "phase-selection", res.StructuredContent.(map[string]any)["currentNode"])
	res, err = sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"workItem": "github:acme/widgets#42", "question": "Which backend?"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	require.Len(t, tickets.Comments("github:acme/widgets#42"), 1)
	require.NoError(t, sess.Close())
	inW.Close()
	require.Equal(t, exitOK, <-done, "stderr: %s", errb)
}

// The built binary as a harness spawns it (mcp.CommandTransport).
func TestMCPBinaryAsAHarnessSpawnsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds loopd")
	}
	bin := loopdBinary(t)
	repo := mcpRepo(t)
	cmd := exec.Command(bin, "mcp")
	cmd.Env = append(cmd.Environ(), "HOME="+t.TempDir(), "THE_LOOP_CLI_CONFIG=")
	cmd.Dir = repo
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	sess, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err)
	defer sess.Close()
	res, err := sess.CallTool(context.Background(), &mcp.CallToolParams{Name: "graph_status", Arguments: map[string]any{"repo": repo, "workItem": "issue-42"}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	require.Equal(t, "issue-42", res.StructuredContent.(map[string]any)["workItem"])
}
