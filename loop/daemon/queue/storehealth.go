package queue

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// A store that cannot write.
//
// When the embedded server's file store fails a write (ENOSPC above all,
// also EIO or a permission error), NATS keeps that error for the stream:
// every later publish to it fails — unanswered, so Put would wait out its
// whole timeout — until the stream is loaded again, which in practice means
// the server restarts. Stream information is still served from memory, so
// nothing that only reads (Stats, the watchdog, theloop_queue_up) noticed:
// loopd answered 503 to every webhook forever while saying it was fine.
//
// The server reports such a write on its log and nowhere else a client can
// see, so the embedded server's log is watched (storeWatch). The first
// report marks the queue as unable to persist: Put refuses at once with
// ErrUnavailable, Stats fails (so does everything that asks whether the
// queue works), and StoreFailed is closed so the daemon can restart once
// the space is back (see WaitWritable). Against an external server
// (queue.url) the store is that server's to keep; its refusals reach Put
// as errors and its operator as its own health.

// ErrCannotPersist marks a queue whose store has failed a write and needs a
// restart to write again.
var ErrCannotPersist = errors.New("queue: the store cannot write")

// storeHealth holds the first store write error the server reported.
type storeHealth struct {
	mu     sync.Mutex
	err    error
	at     time.Time
	failed chan struct{}
}

func newStoreHealth() *storeHealth { return &storeHealth{failed: make(chan struct{})} }

func (h *storeHealth) fail(msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return
	}
	h.err = fmt.Errorf("%w: %s", ErrCannotPersist, msg)
	h.at = time.Now()
	close(h.failed)
}

func (h *storeHealth) get() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// storeWatch is the embedded server's logger: it discards everything (the
// server ran with NoLog before) except the reports of a failed store
// write, which mark the queue.
type storeWatch struct{ h *storeHealth }

// storeFailureMarks are the phrases nats-server logs when a file store
// write failed and the stream stopped taking messages.
var storeFailureMarks = []string{
	"Critical write error",
	"failed to store a msg",
	"no space left on device",
	"permission denied while writing",
	"out of resources",
}

func (w storeWatch) Errorf(format string, v ...any) { w.check(format, v...) }
func (w storeWatch) Warnf(format string, v ...any)  { w.check(format, v...) }
func (w storeWatch) Fatalf(format string, v ...any) { w.check(format, v...) }
func (storeWatch) Noticef(string, ...any)           {}
func (storeWatch) Debugf(string, ...any)            {}
func (storeWatch) Tracef(string, ...any)            {}

func (w storeWatch) check(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	for _, m := range storeFailureMarks {
		if strings.Contains(msg, m) {
			w.h.fail(msg)
			return
		}
	}
}

var _ server.Logger = storeWatch{}

// Persisting reports nil while the store writes, else an error wrapping
// ErrCannotPersist with what the server reported.
func (q *Queue) Persisting() error { return q.health.get() }

// StoreFailed is closed when the embedded store reports a failed write
// (never, against an external server).
func (q *Queue) StoreFailed() <-chan struct{} {
	if q.health == nil {
		return nil
	}
	return q.health.failed
}

// probeSize is what WritableAgain writes: enough that a file system with
// only a few blocks left (where the store's next block would not fit) is
// not taken for one with room again.
const probeSize = 1 << 20

// WritableAgain reports whether the store directory takes a write again: it
// writes, syncs and removes a probe file of probeSize bytes. The daemon
// restarts the queue (by restarting itself) only once this holds.
func (q *Queue) WritableAgain() error {
	if q.cfg.StoreDir == "" {
		return nil
	}
	f, err := os.CreateTemp(q.cfg.StoreDir, ".probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	defer os.Remove(name)
	buf := make([]byte, 64<<10)
	for n := 0; n < probeSize; n += len(buf) {
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
