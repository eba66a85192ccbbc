package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Issue 9, item 2: `(echo '{}'; sleep 40) | loop-gate claude` must not wait
// for stdin to close. The gate gives up on the payload after
// DefaultStdinTimeout and lets the agent stop.
func TestStdinLeftOpenDoesNotHoldTheAgent(t *testing.T) {
	g := newGate(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gateBinary, "claude")
	for k, v := range g.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	defer pw.Close()
	cmd.Stdin = pr
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	pr.Close()
	_, err = pw.Write([]byte("{}\n")) // and never close
	require.NoError(t, err)
	require.NoError(t, cmd.Wait(), errOut.String())
	require.NoError(t, ctx.Err(), "loop-gate returned before the test's own deadline")
	require.Empty(t, out.String())
	require.Contains(t, errOut.String(), "did not arrive within")
}

// A fatal error in the check (here: the address-space cap set through
// THE_LOOP_GATE_MEMORY_LIMIT_MB, standing in for running out of memory) is
// never exit 2, which Claude Code reads as "block": the supervising process
// answers 0 and says why.
func TestFatalErrorIsNotExitTwo(t *testing.T) {
	root := writeRepo(t, atDesignBlock)
	p := filepath.Join(root, ".the-loop", "harness-config.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte("x: \""+strings.Repeat("a", 900_000)+"\"\n"), 0o644))
	g := newGate(t)
	g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
	g.env["THE_LOOP_GATE_MEMORY_LIMIT_MB"] = "5"
	r := g.run(claudePayload(root), "claude")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "the check failed (exit status 2); letting the agent stop")
}
