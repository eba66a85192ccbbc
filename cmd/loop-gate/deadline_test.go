package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/plugin"
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
// never exit 2, which Claude Code reads as "block": loop-gate ends with
// SIGABRT, and run as installed — the plugin's command line, through a
// shell — the hook answers exit 1 (plugin.CrashGuard), a non-blocking
// error, with no answer on stdout and the runtime's message on stderr.
func TestFatalErrorIsNotExitTwo(t *testing.T) {
	root := writeRepo(t, atDesignBlock)
	p := filepath.Join(root, ".the-loop", "harness-config.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte("x: \""+strings.Repeat("a", 900_000)+"\"\n"), 0o644))
	// And a design.md just under the artifact cap, of short lines: the
	// check's line and section work on it needs far more memory than the
	// heap the process had mapped when its cap was set, so running out is
	// certain — not left to when the runtime happens to map more.
	design := filepath.Join(root, "docs", "specs", fixtureItem, "design.md")
	old, err := os.ReadFile(design)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(design, append(old, []byte(strings.Repeat("- a\n", (15<<20)/4))...), 0o644))
	g := newGate(t)
	g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
	g.env["THE_LOOP_GATE_MEMORY_LIMIT_MB"] = "5"
	g.workDir = t.TempDir() // where a core file would land
	r := g.run(claudePayload(root), "claude")
	require.Equal(t, 128+int(syscall.SIGABRT), r.code, r.stderr)
	r = g.runAsInstalled(claudePayload(root), "claude")
	require.Equal(t, 1, r.code, r.stderr)
	require.Empty(t, r.stdout)
	// The runtime's own words vary with where the cap is hit ("out of
	// memory", "cannot allocate memory", a thread it could not start).
	require.Contains(t, r.stderr, "fatal error:")
	require.Contains(t, r.stderr, "loop-gate died (status 134); the agent may stop")
	left, err := os.ReadDir(g.workDir)
	require.NoError(t, err)
	require.Empty(t, left, "no core file")
}

// A panic on a goroutine of the check — which no recover on the check's own
// goroutine can catch — is not exit 2 either.
func TestGoroutinePanicIsNotExitTwo(t *testing.T) {
	g := newGate(t)
	g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
	g.env["THE_LOOP_GATE_FAULT"] = "goroutine-panic"
	r := g.withBinary(faultBinary(t)).runAsInstalled(claudePayload(writeRepo(t, atDesignBlock)), "claude")
	require.Equal(t, 1, r.code, r.stderr)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "injected fault on another goroutine")
}

// crashingGate is a program that runs loop-gate under an address-space
// limit of its own (ulimit -v, the hook alone), so small that the Go
// runtime dies before main: "failed to reserve page summary memory",
// exit 2. Named loop-gate in a directory of its own, to put first on PATH.
func crashingGate(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "loop-gate")
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\necho ran >> \"$0.ran\"\nulimit -v 60000 || exit 99\nexec "+shellQuoted(gateBinary)+" \"$@\"\n"), 0o755))
	return p
}

func shellQuoted(p string) string {
	return strings.TrimSuffix(plugin.GateCommand(p, "x"), " x"+plugin.CrashGuard)
}

// When the Go runtime dies before main — which no code in loop-gate can
// catch — the harness still never sees exit 2 (a block, with the stack
// trace as its reason, to Claude Code, Codex and Gemini): the installed
// command line maps it to exit 1, a non-blocking error, with a line on
// stderr. The gate's real block, an exit 0 with its answer on stdout,
// passes through the same command line untouched.
func TestRuntimeDeathBeforeMainIsNotABlock(t *testing.T) {
	crash := crashingGate(t)
	root := writeRepo(t, atDesignBlock)
	for _, h := range []struct {
		harness  string
		payload  []byte
		decision string
	}{
		{"claude", claudePayload(root), "block"},
		{"codex", codexPayload(root), "block"},
		{"gemini", geminiPayload(root), "deny"},
		{"cursor", cursorPayload(root, "completed"), ""},
	} {
		t.Run(h.harness, func(t *testing.T) {
			g := newGate(t)
			g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
			r := g.withBinary(crash).run(h.payload, h.harness)
			require.Equal(t, 2, r.code, "the crash is real, and before main: %s", r.stderr)
			require.Contains(t, r.stderr, "fatal error:")
			require.NotContains(t, r.stderr, "loop-gate:", "nothing of loop-gate's own ran")

			r = g.withBinary(crash).runAsInstalled(h.payload, h.harness)
			require.Equal(t, 1, r.code, r.stderr)
			require.Empty(t, r.stdout)
			require.Contains(t, r.stderr, "loop-gate died (status 2); the agent may stop")

			r = g.runAsInstalled(h.payload, h.harness)
			require.Equal(t, 0, r.code, "the block passes the guard: %s", r.stderr)
			if h.decision == "" {
				require.Contains(t, r.stdout, "followup_message")
				return
			}
			var a struct {
				Decision string `json:"decision"`
				Reason   string `json:"reason"`
			}
			decodeStrict(t, r.stdout, &a)
			require.Equal(t, h.decision, a.Decision)
		})
	}
}

// A check that hangs, deaf to its own deadline (the fault build's "hang"),
// is answered for at the deadline: the agent may stop, exit 0.
func TestHungCheckIsStoppedAtTheDeadline(t *testing.T) {
	g := newGate(t)
	g.env["THE_LOOP_GATE_TIMEOUT_SECONDS"] = "1"
	g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
	g.env["THE_LOOP_GATE_FAULT"] = "hang"
	r := g.withBinary(faultBinary(t)).runAsInstalled(claudePayload(writeRepo(t, atDesignBlock)), "claude")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "did not finish within 4s")
}
