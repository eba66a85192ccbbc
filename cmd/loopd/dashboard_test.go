package main

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop/api/login"
)

// TestRunServesTheDashboardBehindALoginFile runs the built loopd with a
// dashboard: the login file appears under the state root (0600), a URL
// minted from it logs a browser in (what `loopctl dashboard` does), and
// SIGTERM removes the file. With --dashboard off there is none.
func TestRunServesTheDashboardBehindALoginFile(t *testing.T) {
	bin := loopdBinary(t)
	start := func(dash string) (*exec.Cmd, string) {
		base := shortdir.New(t) // holds the state root and its control socket
		state := filepath.Join(base, "state")
		cfg := filepath.Join(base, "cfg.yaml")
		require.NoError(t, os.WriteFile(cfg, []byte("webhooks:\n  ghWebhook:\n    port: 0\nrepositories: [octo/demo]\n"), 0o600))
		cmd := exec.Command(bin, "run", "--state-root", state, "--config", cfg, "--dashboard", dash, "--dashboard-operator", "dana")
		cmd.Dir = base
		cmd.Env = append(os.Environ(), "HOME="+base, "THE_LOOP_GH_WEBHOOK_SECRET=s", "GH_TOKEN=x", "THE_LOOP_DASHBOARD_GH_TOKEN=y")
		var logs lockedBuffer
		addr := startListening(t, cmd, &logs)
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		require.Eventually(t, func() bool {
			res, err := http.Get("http://" + addr + "/healthz")
			if err == nil {
				res.Body.Close()
			}
			return err == nil
		}, 30*time.Second, 20*time.Millisecond, "loopd did not start")
		return cmd, state
	}

	cmd, state := start("127.0.0.1:0")
	loginPath := filepath.Join(state, login.File)
	require.Eventually(t, func() bool { _, err := os.Stat(loginPath); return err == nil }, 30*time.Second, 20*time.Millisecond, "login file")
	fi, err := os.Stat(loginPath)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	u, err := login.URL(state, time.Now())
	require.NoError(t, err)
	jar, _ := cookiejar.New(nil)
	res, err := (&http.Client{Jar: jar}).Get(u)
	require.NoError(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, string(body), `id="board"`)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
	_, err = os.Stat(loginPath)
	require.ErrorIs(t, err, os.ErrNotExist, "the login file goes with the daemon")

	cmd, state = start("off")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait())
	_, err = os.Stat(filepath.Join(state, login.File))
	require.ErrorIs(t, err, os.ErrNotExist)
}
