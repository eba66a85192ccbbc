package agent_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/shortdir"
	demoagent "github.com/theloop-dev/theloop/loop/demo/agent"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/sessions"
)

// The test binary doubles as the scripted agent: spawned in tmux with
// DEMOAGENT_TEST_RUN=1 it runs demoagent.Run instead of the tests, as
// `loopd demo-agent` does.
func TestMain(m *testing.M) {
	if os.Getenv("DEMOAGENT_TEST_RUN") == "1" {
		err := demoagent.Run(context.Background(), demoagent.Options{ConfigPath: os.Getenv("DEMOAGENT_TEST_CONFIG")})
		if err != nil {
			fmt.Fprintln(os.Stderr, "scripted agent:", err)
			time.Sleep(2 * time.Second)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestAgentInRealTmux spawns the scripted agent in a real tmux session and
// drives it the way the daemon does: sessions.Tmux waits for it to be
// ready, pastes an assignment (bracketed, then Enter) and checks the
// receipt; the agent must take the paste, claim its nodes with the real
// runtime and stop at the human gate.
func TestAgentInRealTmux(t *testing.T) {
	requireTool(t, "tmux")
	w := newWorld(t)
	exe, err := os.Executable()
	require.NoError(t, err)

	cfg := sessions.DefaultTmuxConfig()
	cfg.SocketPath = shortdir.Tmux(t) // killed, and its socket removed, when the test ends
	cfg.Width, cfg.Height = 160, 50
	cfg.ReadySettle = 200 * time.Millisecond
	cfg.TempDir = t.TempDir()
	tm, err := sessions.NewTmux(cfg, run.Exec{})
	require.NoError(t, err)

	ctx := context.Background()
	const name = "loop-demo-widgets-1"
	require.NoError(t, tm.Spawn(ctx, sessions.SpawnSpec{
		Name: name, Cwd: w.dir,
		Env: []string{"THE_LOOP_WORK_ITEM=issue-1", "DEMOAGENT_TEST_RUN=1", "DEMOAGENT_TEST_CONFIG=" + w.config, tokenEnv + "=" + simToken},
		// The harness argv Claude Code would get; the agent ignores it.
		Argv: []string{exe, "--session-id", "0c6f1f4e-1111-4222-8333-444455556666"},
	}))
	require.NoError(t, tm.WaitReady(ctx, name))
	screen, err := tm.Capture(ctx, name)
	require.NoError(t, err)
	require.Contains(t, screen, "waiting for theloop to paste an assignment")

	w.human(t, "the-loop execute\n\n- [ ] brainstorming\n- [ ] capability-docs")
	rc, err := tm.Deliver(ctx, name, "the-loop assignment for issue-1:\n  you are now at node: requirements-definition (phase: requirements-definition)\n  produce: requirements.md|bugfix.md")
	require.NoError(t, err)
	require.True(t, rc.Verified(), "%+v", rc)
	require.True(t, rc.Seen, "the agent echoes the paste, as a TUI does")

	waitNode(t, w, "requirements-approval", func() string { s, _ := tm.Capture(ctx, name); return s })
	waitScreen(t, tm, name, "waits at requirements-approval")

	w.human(t, "Approved")
	_, err = tm.Deliver(ctx, name, "the-loop assignment for issue-1:\n  you are now at node: design (phase: design)")
	require.NoError(t, err)
	waitNode(t, w, "design-approval", func() string { s, _ := tm.Capture(ctx, name); return s })
	waitScreen(t, tm, name, "waits at design-approval")
	final, _ := tm.Capture(ctx, name)
	t.Logf("the agent's screen:\n%s", final)
}

func waitNode(t *testing.T, w *world, node string, screen func() string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for w.current(t) != node {
		if time.Now().After(deadline) {
			t.Fatalf("the work item did not reach %s (at %s); the agent's screen:\n%s", node, w.current(t), screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitScreen(t *testing.T, tm *sessions.Tmux, name, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := tm.Capture(context.Background(), name)
		require.NoError(t, err)
		if strings.Contains(strings.Join(strings.Fields(s), " "), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q never showed; the screen:\n%s", want, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
