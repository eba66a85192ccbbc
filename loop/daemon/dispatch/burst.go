package dispatch

import (
	"math"
	"runtime"
	"time"
)

// Burst pacing (Config.BurstPause, docs/daemon.md §6.5).
//
// On a small machine the single-node dispatcher and the webhook receiver
// compete for the same cores, and their failures are not alike: a webhook
// that waits too long for its 202 is lost (GitHub does not redeliver),
// while an event the queue holds is only late. So when webhooks arrive in
// a burst and the receiver is short of time, the dispatcher hands out
// events in small batches with a pause between them, and drains the
// backlog once the burst is over.
//
// Two signals, both read from the queue (its Puts), decide it, smoothed
// over ~burstSmoothing so that one stalled window neither starts nor ends
// a burst:
//   - the arrival rate: burstRate webhooks a second or more (no person's
//     comments arrive that fast);
//   - the receiver's backlog: on average more webhooks waiting for the
//     store to keep them than the process has cores (GOMAXPROCS, at least
//     2), counted by Little's law: the Puts' summed wait over a window,
//     divided by the window. A machine with cores to spare keeps this low
//     at any rate, and its dispatcher is not paced; a receiver that has
//     the cores busy raises it. On this 2-core VM, 8 clients as fast as
//     they are answered (~7k webhooks/s) keep it at 2.5-5 (median of the
//     windows 2.7), a steady 2,000 a second at 0.3 (90% of the windows
//     under 1): BenchmarkWebhookHTTP/with-dispatcher-at-2k/s was paced
//     5-10% of the run at a threshold of 2, 18-52% at 1.
//
// Both windows are closed only when the dispatcher hands out an event, so
// an idle dispatcher measures nothing, and its first window after a quiet
// spell spans the spell: a lone event is never paced.
const (
	burstRate      = 1000
	burstWindow    = 5 * time.Millisecond
	burstSmoothing = 50 * time.Millisecond
	// burstBatch is how many events are handed out between two pauses.
	// Handing them out together costs less per event than one at a time
	// (the workers' wake-ups and the acks go in one go); handing out more
	// shows in the receiver's tail: BenchmarkWebhookHTTP/with-dispatcher,
	// 20,000 webhooks, four rounds side by side, p99 4.2-4.7 ms at 5 per
	// pause against 4.7-5.3 ms at 20 (6.6-7.2k against 6.3-7.4k req/s).
	burstBatch = 5
)

// DefaultBurstPause is Config.BurstPause's default: with burstBatch
// events per pause, up to 50 events a second in a burst. The rate in a
// burst hardly changes when a given event is handled: the backlog grows
// by thousands a second either way and is drained at full speed after.
const DefaultBurstPause = 100 * time.Millisecond

// burstMeter measures the two signals window by window. The fetching
// goroutine alone uses it.
type burstMeter struct {
	at      time.Time
	puts    uint64
	wait    uint64
	rate    float64 // smoothed webhooks per second
	waiting float64 // smoothed webhooks waiting for the store
	burst   bool
	// waitingAt is the backlog that makes a burst (0: burstWaiting()).
	waitingAt float64
}

// burstWaiting is the receiver's backlog that makes a burst: the
// process's cores, at least 2.
func burstWaiting() float64 { return float64(max(runtime.GOMAXPROCS(0), 2)) }

// update closes the window at now, given the queue's counters (Puts
// begun, total nanoseconds finished Puts took), once burstWindow has
// passed. It reports whether a burst started or ended.
func (m *burstMeter) update(now time.Time, puts, waitNanos uint64) (changed bool) {
	if m.at.IsZero() {
		m.at, m.puts, m.wait = now, puts, waitNanos
		return false
	}
	dt := now.Sub(m.at)
	if dt < burstWindow {
		return false
	}
	// Counters only grow; a smaller one (a new queue) restarts the window.
	if puts < m.puts || waitNanos < m.wait {
		m.at, m.puts, m.wait = now, puts, waitNanos
		return false
	}
	rate := float64(puts-m.puts) / dt.Seconds()
	waiting := float64(waitNanos-m.wait) / float64(dt)
	a := 1 - math.Exp(-float64(dt)/float64(burstSmoothing))
	m.rate += a * (rate - m.rate)
	m.waiting += a * (waiting - m.waiting)
	m.at, m.puts, m.wait = now, puts, waitNanos
	if m.waitingAt == 0 {
		m.waitingAt = burstWaiting()
	}
	was := m.burst
	m.burst = m.rate >= burstRate && m.waiting >= m.waitingAt
	return m.burst != was
}
