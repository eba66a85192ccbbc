package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	xrun "github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/sessions"
)

// The real Gemini CLI as loopd starts it: interactive, in a tmux pane, with
// the command line sessions.Gemini gives loopd (--session-id, --skip-trust)
// and the workspace prepared as loopd prepares it (the checkout in the
// CLI's trusted-folders file), the assignment typed into the pane. The
// project's AfterAgent hook must load and hold the agent at its node: the
// gate's reason comes back as the next turn until the attempts are spent,
// then the CLI waits for its user again instead of looping.
func TestGateInRealGeminiCLIInteractiveInTmux(t *testing.T) {
	gemini := realCLI(t, "gemini", "gemini-cli")
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("tmux is not on PATH; .ci/run installs it")
	}
	const session = "loop-github-octo-demo-42" // a name loopd's runner pastes into
	sc := gateScenario{name: "it gives up after 3 attempts", start: atDesignBlock, wantTurns: 4}

	home := t.TempDir()
	root := projectRepo(t, "gemini", sc.start, home)
	srv := geminiStandIn(t, nil)
	g := &sessions.Gemini{TrustedFolders: sessions.GeminiTrustedFoldersFile(func(string) string { return "" }, home)}
	_, err = g.PrepareEnvironment(root)
	require.NoError(t, err)
	args, err := g.Interactive("0b4e7a52-6f0e-4d55-9a59-3f2a4c8e1d10")
	require.NoError(t, err)
	writeFile(t, filepath.Join(home, ".gemini", "settings.json"), `{"security": {"auth": {"selectedType": "gemini-api-key"}}, "general": {"disableAutoUpdate": true}, "privacy": {"usageStatisticsEnabled": false}, "ui": {"hideTips": true, "hideBanner": true}}`)

	// A tmux server of the test's own (a short socket path: sun_path).
	sockDir, err := os.MkdirTemp("", "lg-tmux-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "s")
	tm := func(a ...string) (string, error) {
		out, err := exec.Command(tmux, append([]string{"-S", sock}, a...)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { _, _ = tm("kill-server") })
	env := append(gateEnv(home),
		"GOOGLE_GEMINI_BASE_URL="+srv.url,
		"GEMINI_API_KEY=standin-key",
		"GEMINI_CLI_NO_RELAUNCH=true",
		"GEMINI_TELEMETRY_ENABLED=false",
		"TERM=xterm-256color",
	)
	// The harness's environment exactly (env -i): tmux's own copy of
	// the client's environment would put the test's PATH first.
	newArgs := append([]string{"-f", "/dev/null", "new-session", "-d", "-s", session, "-x", "200", "-y", "50", "-c", root, "--", "env", "-i"}, env...)
	newArgs = append(newArgs, gemini)
	newArgs = append(newArgs, append(args, "-m", "gemini-2.5-pro")...)
	out, err := tm(newArgs...)
	require.NoError(t, err, out)

	screen := func() string {
		s, _ := tm("capture-pane", "-p", "-t", session)
		return s
	}
	waitFor := func(what string, limit time.Duration, ok func() bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		for !ok() {
			select {
			case <-ctx.Done():
				t.Fatalf("gave up waiting for %s; the pane:\n%s", what, screen())
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	// The input box is up when the CLI has drawn its prompt.
	waitFor("the CLI's input box", 2*time.Minute, func() bool { return strings.Contains(screen(), "Type your message") })
	// loopd's own delivery (sessions.Manager.deliverLive): a bracketed
	// paste through the runner, the text seen on the screen, the harness's
	// pause (Gemini drops an Enter that comes within 40 ms of a paste),
	// then Enter.
	runner, err := sessions.NewTmux(sessions.TmuxConfig{Binary: tmux, SocketPath: sock}, xrun.Exec{})
	require.NoError(t, err)
	rc, err := runner.DeliverWith(context.Background(), session, "WORK-ON-THE-ITEM: finish the current node of "+fixtureItem+".", g.SubmitGap())
	require.NoError(t, err)
	require.True(t, rc.Submitted)
	waitFor("the attempts to be spent", 3*time.Minute, func() bool { return len(srv.Turns()) >= sc.wantTurns })
	// Then nothing more: the CLI is back at its input box, not looping.
	time.Sleep(3 * time.Second)
	turns := srv.Turns()
	checkTurns(t, sc, turns, screen())
	alive, _ := tm("has-session", "-t", session)
	require.Empty(t, strings.TrimSpace(alive), "the CLI stays up, waiting for its user")
}
