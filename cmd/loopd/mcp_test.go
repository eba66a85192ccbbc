package main

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph/graphtest"
)

// `loopctl mcp` on stdio, driven by the SDK's client through pipes.
func TestMCPOnStdio(t *testing.T) {
	repo := newRepo(t)
	tickets := graphtest.NewTickets()
	f, _ := testFactory(t, repo, tickets)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	f.IO.In, f.IO.Out = inR, outW
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"loopctl", "mcp"}, f)
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
	require.Equal(t, exitOK, <-done)
}

// The built binary as a harness spawns it (mcp.CommandTransport).
func TestMCPBinaryAsAHarnessSpawnsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds loopctl")
	}
	bin := filepath.Join(t.TempDir(), "loopctl")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	repo := newRepo(t)
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
