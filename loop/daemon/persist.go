package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// When loopd cannot persist.
//
// A full disk (or a failing one) stops the embedded queue's store: NATS
// keeps the write error for the stream and takes no event again until the
// stream is loaded anew. loopd could restart the embedded server in the
// process, but every part that talks to it (the dispatcher's consumer, the
// leases, the outbox, the KV buckets) would have to be rebuilt on the new
// connection — a second start-up path, used only after a disk filled.
// Restarting the process uses the one start-up path there is, the one
// that recovers the store after a kill -9. So:
//
//   - while the store cannot write, loopd stays up and says so: webhooks
//     are answered 503 at once (GitHub keeps them for a later retry or the
//     reconcile pass finds them), GET /healthz answers 503, the systemd
//     watchdog is not pinged, theloop_queue_up is 0, and the control
//     socket still answers with the reason;
//   - it probes the store's directory every StoreProbeInterval; as soon as
//     a write succeeds it exits with ErrRestartToRecover (cmd/loopd: exit
//     75), and the service manager (Restart=on-failure) starts it again
//     with the store reopened. Under systemd the withheld watchdog also
//     restarts it while the disk stays full; each start finds the store as
//     it is on disk, nothing acknowledged is lost.
//
// The event log holds the lines it cannot write (loop.EventLog) and writes
// them when space returns; while it cannot write, the daemon is not
// healthy either.

// StoreProbeInterval is how often loopd checks whether a failed store can
// write again.
const StoreProbeInterval = time.Second

// ErrRestartToRecover is what Run returns when the queue's store failed a
// write and the disk has room again: only a restart reopens the store.
var ErrRestartToRecover = errors.New("daemon: the queue's store failed a write and has room again; restart loopd to reopen it")

// watchStore waits for q's store to fail, reports it, then waits for the
// store directory to take a write again; the error it sends is Run's.
// Nothing is sent when ctx ends first.
func watchStore(ctx context.Context, q *queue.Queue, logf func(string, ...any), emit emitFunc) <-chan error {
	out := make(chan error, 1)
	failed := q.StoreFailed()
	if failed == nil {
		return out
	}
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-failed:
		}
		cause := q.Persisting()
		logf("the queue cannot persist: %v; webhooks are answered 503 and /healthz fails until there is room again, then loopd exits (code 75) so the service manager restarts it", cause)
		emit("queue.store_failed", graph.LevelError, graph.Field{Key: "error", Value: fmt.Sprint(cause)})
		t := time.NewTicker(StoreProbeInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if q.WritableAgain() == nil {
					logf("the queue's store has room again: exiting so that loopd restarts with the store reopened")
					out <- fmt.Errorf("%w (first failure: %v)", ErrRestartToRecover, cause)
					return
				}
			}
		}
	}()
	return out
}

// persistHealth is nil while loopd can persist: the queue's store, the
// event log and the audit log all write.
func persistHealth(q *queue.Queue, elog, audit *loop.EventLog) error {
	if q != nil {
		if err := q.Persisting(); err != nil {
			return err
		}
	}
	if err := elog.Err(); err != nil {
		return err
	}
	return audit.Err()
}
