package ingress

import (
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
)

// Deduper remembers the keys of events the Sink has kept — delivery ids and
// content keys — for a window, bounded in size (oldest forgotten first). It
// is the receiver's fast path for redeliveries; the daemon's queue dedups
// again on DeliveryID (Nats-Msg-Id) and ContentKey, which is what makes
// dedup survive a restart. A key is marked only after the Sink kept the
// event, so a delivery answered 503 is not remembered and its redelivery
// is processed. Safe for concurrent use; no goroutines.
//
// The Deduper owns its clock: every part that marks or asks (the router,
// the receiver, the poller) reads time through it, so a world assembled
// with one clock cannot have one part judge the window by another's time.
type Deduper struct {
	mu     sync.Mutex
	clock  graph.Clock
	window time.Duration
	seen   map[string]int64 // key → unix nanos when marked
	ring   []string         // insertion order, len == cap when full
	next   int
	full   bool
}

// NewDeduper returns a Deduper holding at most size keys for window, as
// clock tells time (nil: graph.SystemClock).
func NewDeduper(size int, window time.Duration, clock graph.Clock) *Deduper {
	if size <= 0 {
		size = DefaultDedupSize
	}
	if window <= 0 {
		window = DefaultDedupWindow
	}
	if clock == nil {
		clock = graph.SystemClock{}
	}
	return &Deduper{clock: clock, window: window, seen: make(map[string]int64, min(size, 4096)), ring: make([]string, size)}
}

// Clock is the clock the Deduper judges its window by.
func (d *Deduper) Clock() graph.Clock { return d.clock }

// Seen reports whether key was marked within the window before now.
func (d *Deduper) Seen(key string) bool {
	if key == "" {
		return false
	}
	now := d.clock.Now()
	d.mu.Lock()
	at, ok := d.seen[key]
	d.mu.Unlock()
	return ok && now.UnixNano()-at < int64(d.window)
}

// Mark remembers key as of now.
func (d *Deduper) Mark(key string) {
	if key == "" {
		return
	}
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.seen[key]; ok {
		d.seen[key] = now.UnixNano()
		return
	}
	if old := d.ring[d.next]; d.full || old != "" {
		delete(d.seen, old)
	}
	d.ring[d.next] = key
	d.seen[key] = now.UnixNano()
	d.next++
	if d.next == len(d.ring) {
		d.next, d.full = 0, true
	}
}

// Forget removes key, so a redelivery is processed again.
func (d *Deduper) Forget(key string) {
	d.mu.Lock()
	delete(d.seen, key)
	d.mu.Unlock()
}

// Len is the number of keys held.
func (d *Deduper) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen)
}
