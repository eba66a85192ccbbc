package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop/api"
)

// The built loopd under a stand-in for systemd: NOTIFY_SOCKET is a unixgram
// socket the test reads. loopd says READY=1 once it listens (and its
// control socket answers, 0600), pings the watchdog, logs JSON lines (its
// stderr is not a terminal), and says STOPPING=1 on SIGTERM.
func TestSystemdNotifyAndControlSocketOfTheBinary(t *testing.T) {
	bin := loopdBinary(t)
	dir := shortdir.New(t)
	notify := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notify, Net: "unixgram"})
	require.NoError(t, err)
	defer conn.Close()
	msgs := make(chan string, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(buf[:n])
		}
	}()
	state := filepath.Join(dir, "state")
	cmd := exec.Command(bin, "run", "--state-root", state, "--insecure-accept-unsigned")
	cmd.Dir = dir
	cfg := filepath.Join(dir, "cli-config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("webhooks:\n  ghWebhook:\n    port: 0\n"), 0o600))
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notify, "WATCHDOG_USEC=400000", "THE_LOOP_CLI_CONFIG="+cfg, "HOME="+dir, "THE_LOOP_GH_WEBHOOK_SECRET=")
	logb := &syncBuffer{}
	cmd.Stderr, cmd.Stdout = logb, logb
	require.NoError(t, cmd.Start())
	// WATCHDOG_PID is unset, so the watchdog is ours (sd_watchdog_enabled).
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
		t.Logf("loopd output:\n%s", logb.String())
	})
	wait := func(want string) string {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case m := <-msgs:
				if strings.HasPrefix(m, want) {
					return m
				}
			case <-deadline:
				t.Fatalf("no %q from loopd", want)
			}
		}
	}
	ready := wait("READY=1")
	require.Contains(t, ready, "STATUS=0 live session(s), 0 queued, 0 dead")
	wait("WATCHDOG=1")

	sock := filepath.Join(state, api.SocketName)
	fi, err := os.Stat(sock)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	var st api.Status
	require.NoError(t, api.NewSocketClient(sock).Do(context.Background(), "GET", "/status", nil, nil, &st))
	require.Equal(t, state, st.StateRoot)
	require.Equal(t, cmd.Process.Pid, st.PID)

	// SIGHUP: the soft policy is reloaded; a bad file keeps the running one.
	require.NoError(t, os.WriteFile(cfg, []byte("webhooks:\n  ghWebhook:\n    port: 0\nrouting:\n  authorizedUsers: [erin]\n"), 0o600))
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool {
		return strings.Contains(logb.String(), `"msg":"configuration reloaded","applied":["routing.authorizedUsers"]`)
	}, 30*time.Second, 20*time.Millisecond, logb.String())
	require.NoError(t, os.WriteFile(cfg, []byte("routing:\n  authorisedUsers: [erin]\n"), 0o600))
	require.NoError(t, cmd.Process.Signal(syscall.SIGHUP))
	require.Eventually(t, func() bool { return strings.Contains(logb.String(), "reload failed; the running configuration stays") }, 30*time.Second, 20*time.Millisecond, logb.String())
	require.Contains(t, logb.String(), "did you mean routing.authorizedUsers?")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	wait("STOPPING=1")
	require.NoError(t, cmd.Wait())
	_, err = os.Stat(sock)
	require.True(t, os.IsNotExist(err), "the socket is removed on a clean stop")

	// Every log line is a JSON record (journald stores them whole).
	lines := strings.Split(strings.TrimSpace(logb.String()), "\n")
	require.NotEmpty(t, lines)
	var sawListening bool
	for _, l := range lines {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec), "not JSON: %s", l)
		if rec["msg"] == "listening" {
			sawListening = true
			require.Equal(t, sock, rec["controlSocket"])
		}
	}
	require.True(t, sawListening)
}

// syncBuffer is a bytes.Buffer safe for the child's writer and the test's
// reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
