package queue_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// mountSmallFS mounts a tmpfs of size at a new directory, or skips: it
// needs root (or CAP_SYS_ADMIN) on Linux.
func mountSmallFS(t *testing.T, size string) string {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("a full file system needs a tmpfs mount: Linux and root only")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fillFS writes zeros to path until the file system refuses.
func fillFS(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			return
		}
	}
}

// A full disk: Put refuses at once (the receiver answers 503), Stats and
// Persisting say the store cannot write (so /healthz, the watchdog and
// theloop_queue_up do too), StoreFailed is closed; once space is back
// WritableAgain says so, and a reopened queue takes events again and kept
// every event acknowledged before the disk filled.
func TestDiskFullIsVisibleAndAReopenRecovers(t *testing.T) {
	dir := mountSmallFS(t, "16m")
	store := filepath.Join(dir, "queue")
	ctx := context.Background()
	q, err := queue.Open(ctx, queue.Config{StoreDir: store, PublishTimeout: 3 * time.Second})
	require.NoError(t, err)
	defer q.Close()
	payload := []byte(`{"x":"` + strings.Repeat("a", 200<<10) + `"}`)
	put := func(q *queue.Queue, i int) error {
		return q.Put(ctx, &ingress.Event{Event: "issues", DeliveryID: fmt.Sprintf("d-%d", i), Repo: "o/r", Source: ingress.SourceWebhook, Payload: payload})
	}
	require.NoError(t, put(q, 0))
	require.NoError(t, q.Persisting())

	fill := filepath.Join(dir, "fill")
	fillFS(t, fill)
	var putErr error
	for i := 1; i <= 3 && putErr == nil; i++ {
		putErr = put(q, i)
	}
	require.ErrorIs(t, putErr, ingress.ErrUnavailable, "a full disk is a 503, never a 202")
	select {
	case <-q.StoreFailed():
	case <-time.After(5 * time.Second):
		t.Fatal("StoreFailed was not closed after a failed write")
	}
	require.ErrorIs(t, q.Persisting(), queue.ErrCannotPersist)
	_, err = q.Stats(ctx)
	require.ErrorIs(t, err, queue.ErrCannotPersist, "Stats (the watchdog, /healthz, theloop_queue_up) must not say the queue is up")
	start := time.Now()
	err = put(q, 10)
	require.ErrorIs(t, err, ingress.ErrUnavailable)
	require.Less(t, time.Since(start), 2*time.Second, "Put refuses at once, not after the publish timeout")
	require.Error(t, q.WritableAgain(), "the disk is still full")

	require.NoError(t, os.Remove(fill))
	require.NoError(t, q.WritableAgain())
	// Still refused in this run: NATS keeps the write error until the
	// stream is loaded again.
	require.ErrorIs(t, put(q, 11), ingress.ErrUnavailable)
	q.Close()

	q2, err := queue.Open(ctx, queue.Config{StoreDir: store, PublishTimeout: time.Second})
	require.NoError(t, err)
	defer q2.Close()
	require.NoError(t, q2.Persisting())
	require.NoError(t, put(q2, 20), "a reopened store takes events again")
	st, err := q2.Stats(ctx)
	require.NoError(t, err)
	cons, err := q2.Consume(ctx)
	require.NoError(t, err)
	defer cons.Stop()
	var ids []string
	for range st.Depth {
		m, err := cons.Next()
		require.NoError(t, err)
		if m.Event != nil {
			ids = append(ids, m.Event.DeliveryID)
		}
	}
	require.Contains(t, ids, "d-0", "the event acknowledged before the disk filled is kept")
	require.Contains(t, ids, "d-20")
	require.False(t, errors.Is(q2.Persisting(), queue.ErrCannotPersist))
}
