package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	// And a design.md just under the artifact cap, of short lines: the
	// check's line and section work on it needs far more memory than the
	// heap the child had mapped when its cap was set, so running out is
	// certain — not left to when the runtime happens to map more.
	design := filepath.Join(root, "docs", "specs", fixtureItem, "design.md")
	old, err := os.ReadFile(design)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(design, append(old, []byte(strings.Repeat("- a\n", (15<<20)/4))...), 0o644))
	g := newGate(t)
	g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
	g.env["THE_LOOP_GATE_MEMORY_LIMIT_MB"] = "5"
	r := g.run(claudePayload(root), "claude")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "the check failed (exit status 2); letting the agent stop")
}

// A check that hangs (here: the child is stopped with SIGSTOP as soon as it
// exists) is killed at the deadline by the supervising process, which lets
// the agent stop.
func TestHungCheckIsStoppedAtTheDeadline(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("needs /proc to find the child")
	}
	g := newGate(t)
	g.env["THE_LOOP_GATE_TIMEOUT_SECONDS"] = "1"
	g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
	root := writeRepo(t, atDesignBlock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gateBinary, "claude")
	for k, v := range g.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = bytes.NewReader(claudePayload(root))
	cmd.WaitDelay = 5 * time.Second
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	stopped := false
	for i := 0; i < 2000 && !stopped; i++ {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", cmd.Process.Pid))
		for _, f := range tasks {
			data, _ := os.ReadFile(f)
			for _, pid := range strings.Fields(string(data)) {
				n, err := strconv.Atoi(pid)
				if err != nil {
					continue
				}
				// Only once the child has exec'd (its own environment shows
				// the child marker): stopped between clone and exec, it
				// would hold its parent's vfork.
				env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", n))
				if !bytes.Contains(env, []byte("THE_LOOP_GATE_CHILD=1")) {
					continue
				}
				if syscall.Kill(n, syscall.SIGSTOP) == nil {
					stopped = true
				}
			}
		}
		if !stopped {
			time.Sleep(200 * time.Microsecond)
		}
	}
	err := cmd.Wait()
	if !stopped || (err == nil && !strings.Contains(errOut.String(), "did not finish")) {
		t.Skip("the check finished before it could be stopped")
	}
	require.NoError(t, err, errOut.String())
	require.Empty(t, out.String())
	require.Contains(t, errOut.String(), "did not finish within 4s")
}
