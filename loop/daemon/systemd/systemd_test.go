package systemd_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop/daemon/systemd"
)

// notifySocket listens on a unixgram socket as systemd does and returns
// the datagrams it receives.
func notifySocket(t *testing.T) <-chan string {
	t.Helper()
	dir := shortdir.New(t)
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	ch := make(chan string, 256)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(ch)
				return
			}
			ch <- string(buf[:n])
		}
	}()
	return ch
}

func next(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no datagram from the notifier")
		return ""
	}
}

func TestReadyWatchdogStopping(t *testing.T) {
	ch := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "100000") // 100 ms: pings every 50 ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	var healthy atomic.Bool
	healthy.Store(true)
	ready := make(chan struct{})
	n := systemd.Start(context.Background(), ready, systemd.Options{
		Health: func(context.Context) error {
			if healthy.Load() {
				return nil
			}
			return errors.New("queue down")
		},
		Status: func() string { return "2 sessions\nignored" },
	})
	select {
	case m := <-ch:
		t.Fatalf("nothing may be sent before ready; got %q", m)
	case <-time.After(100 * time.Millisecond):
	}
	close(ready)
	require.Equal(t, "READY=1\nSTATUS=2 sessions", next(t, ch))
	require.Equal(t, "WATCHDOG=1\nSTATUS=2 sessions", next(t, ch))
	require.Equal(t, "WATCHDOG=1\nSTATUS=2 sessions", next(t, ch))

	// Unhealthy: no ping, a status saying why.
	healthy.Store(false)
	for {
		m := next(t, ch)
		if strings.HasPrefix(m, "STATUS=unhealthy") {
			require.Equal(t, "STATUS=unhealthy: queue down", m)
			break
		}
	}
	healthy.Store(true)
	for next(t, ch) != "WATCHDOG=1\nSTATUS=2 sessions" {
	}

	n.Stopping()
	for {
		m := next(t, ch)
		if m == "STOPPING=1" {
			break
		}
	}
	n.Close()
	select {
	case m := <-ch:
		t.Fatalf("nothing after STOPPING; got %q", m)
	case <-time.After(150 * time.Millisecond):
	}
}

func TestNoWatchdogForAnotherPIDAndNoSocketIsANoOp(t *testing.T) {
	ch := notifySocket(t)
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", "1")
	ready := make(chan struct{})
	close(ready)
	n := systemd.Start(context.Background(), ready, systemd.Options{})
	require.Equal(t, "READY=1", next(t, ch))
	select {
	case m := <-ch:
		t.Fatalf("the watchdog is another process's; got %q", m)
	case <-time.After(200 * time.Millisecond):
	}
	n.Close()
	require.Equal(t, "STOPPING=1", next(t, ch))

	t.Setenv("NOTIFY_SOCKET", "")
	n = systemd.Start(context.Background(), ready, systemd.Options{})
	n.Close()
}
