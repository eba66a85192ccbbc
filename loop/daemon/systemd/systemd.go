// Package systemd tells systemd how loopd is doing (Type=notify): READY=1
// once the daemon listens and dispatches, WATCHDOG=1 at half the
// WatchdogSec interval while the daemon is healthy (so a wedged loopd is
// restarted), STOPPING=1 when it starts draining. Outside systemd
// (NOTIFY_SOCKET unset) every call is a no-op. It uses
// github.com/coreos/go-systemd/v22/daemon, which speaks the sd_notify
// datagram protocol without linking libsystemd.
package systemd

import (
	"context"
	"fmt"
	"sync"
	"time"

	sd "github.com/coreos/go-systemd/v22/daemon"
)

// Notifier reports readiness, liveness and shutdown. Close stops its
// goroutine.
type Notifier struct {
	health func(context.Context) error
	status func() string

	stopOnce sync.Once
	stop     chan struct{}
	done     chan struct{}
}

// Options tunes a Notifier.
type Options struct {
	// Health reports whether the daemon works (nil: always). A failing
	// check withholds the watchdog ping, so systemd restarts the service
	// once WatchdogSec passes.
	Health func(context.Context) error
	// Status, when set, is sent as STATUS= with each ping (one line).
	Status func() string
}

// Start sends READY=1 when ready is closed, then pings the watchdog if
// systemd asked for one (WATCHDOG_USEC for this pid). ctx ending before
// ready sends nothing.
func Start(ctx context.Context, ready <-chan struct{}, opts Options) *Notifier {
	n := &Notifier{health: opts.Health, status: opts.Status, stop: make(chan struct{}), done: make(chan struct{})}
	go n.run(ctx, ready)
	return n
}

func (n *Notifier) run(ctx context.Context, ready <-chan struct{}) {
	defer close(n.done)
	select {
	case <-ready:
	case <-ctx.Done():
		return
	case <-n.stop:
		return
	}
	msg := sd.SdNotifyReady
	if n.status != nil {
		msg += "\nSTATUS=" + oneLine(n.status())
	}
	_, _ = sd.SdNotify(false, msg)
	interval, err := sd.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.stop:
			return
		case <-t.C:
			if n.health != nil {
				hctx, cancel := context.WithTimeout(ctx, interval/2)
				err := n.health(hctx)
				cancel()
				if err != nil {
					_, _ = sd.SdNotify(false, "STATUS="+oneLine(fmt.Sprintf("unhealthy: %v", err)))
					continue
				}
			}
			msg := sd.SdNotifyWatchdog
			if n.status != nil {
				msg += "\nSTATUS=" + oneLine(n.status())
			}
			_, _ = sd.SdNotify(false, msg)
		}
	}
}

// Stopping stops the watchdog pings, waits for the goroutine, then sends
// STOPPING=1 (the daemon is draining): nothing is sent after it. It is
// idempotent.
func (n *Notifier) Stopping() {
	n.stopOnce.Do(func() {
		close(n.stop)
		<-n.done
		_, _ = sd.SdNotify(false, sd.SdNotifyStopping)
	})
}

// Close is Stopping: it ends the goroutine, STOPPING=1 sent once.
func (n *Notifier) Close() { n.Stopping() }

func oneLine(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\r' {
			return s[:i]
		}
	}
	return s
}
