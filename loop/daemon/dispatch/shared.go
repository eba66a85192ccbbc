package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/theloop-dev/theloop/loop/daemon/lease"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// Shared dispatching: several loopd on one NATS cluster share the work
// items (docs/decisions.md §15).
//
// Design. Every event is published on its work item's subject (package
// queue: <prefix>.events.i.<hash>), so the one replicated events stream
// keeps each item's events in order and apart. Nothing consumes the stream
// as a whole. Each node, every ScanInterval, asks the stream which item
// subjects ("slots") hold events (one stream-info request) and, for a
// slot it does not work on, tries to take the item's lease (package lease:
// KV Create, so one winner; renewed by compare-and-swap on its revision;
// lapsing after the bucket's TTL). The winner alone reads that slot in
// sequence order (queue.NextFor), handles each event exactly as the
// single-node Dispatcher does (handled record, content claim, retries,
// dead letters) and deletes the event from the stream only after its
// effects are recorded. A node holding MaxItems leases declines new items
// (lease.ErrFull): it simply does not take them, and a node with room
// does at its next scan.
//
// The owner keeps the lease while the item has events waiting or
// Holds(item) says so (loopd: the item has a live agent session on this
// node — the session is local, so the item must stay here), and releases
// it otherwise. An items registry (KV bucket <prefix>_items: slot → item
// and owner) lists the items some node owns; every node scans it every
// TTL/2, so an item whose owner died is taken over even if no event
// arrives for it: the new owner finds the registry naming another node,
// calls Takeover (loopd: a new worktree and a session resumed or started
// fresh with the item's artifacts, recorded as session.takeover), and
// reads the slot from its oldest waiting event — the dead owner's
// unfinished event included, whose handled record (if it got that far)
// keeps its effect single.
//
// Why not a consumer per item: on a work-queue stream every consumer's
// replicas must equal the stream's, so each would be a Raft group — one
// per live work item — and a discovery consumer on the whole stream would
// overlap the per-item filters, which work-queue streams refuse. Reading
// by sequence needs no consumer state: the stream itself is the ack
// floor, and it is replicated.
//
// Safety. A worker acts on its item only while its lease is Valid (renewed
// within TTL − Margin); its handler's context is cancelled at the lease's
// deadline, and an event whose handler finished after the deadline is not
// deleted (the next owner finds it handled). The lease's server-side TTL
// outlasts that deadline, so two nodes never work one item at once.

// SharedConfig configures a Shared dispatcher.
type SharedConfig struct {
	// Config: Parallelism, MaxDeliver, Backoff, DrainTimeout, Observe as
	// for the single-node Dispatcher (Key, Owner and LeaseTTL are unused).
	Config
	// Node names this loopd among the cluster's (required, unique).
	Node string
	// MaxItems is this node's capacity: the items (live sessions) it owns
	// at once (0: no cap).
	MaxItems int
	// LeaseTTL is how long an item's lease outlives a dead owner (default
	// 15 s): the failover time is about this.
	LeaseTTL time.Duration
	// ScanInterval is how often the node looks for items with waiting
	// events (default 500 ms): the latency of a new item's first event.
	ScanInterval time.Duration
	// Holds reports whether the item must stay owned by this node after
	// its events are handled (a live session). Nil: never.
	Holds func(item string) bool
	// SessionOf names the item's agent conversation on this node ("" when
	// none), kept in the items registry so a node taking the item over can
	// try to resume it. Nil: none.
	SessionOf func(item string) string
	// Takeover runs when this node takes over an item another node owned
	// (its lease lapsed), before the item's waiting events are handled.
	// An error is observed and the events are handled anyway.
	Takeover func(ctx context.Context, t Takeover) error
	// Lost runs when this node lost an item's lease while it still
	// worked on it (renewals failed for a TTL: a partition, a stall): the
	// item is someone else's now, so loopd stops its session here.
	Lost func(item string)
	// Own receives the ownership log: every acquisition and release.
	Own func(Ownership)
	// Declines, when set, hears of each item this node starts to decline
	// for capacity (open true) and of each it stops declining (open
	// false: a node took it — this one or another — or its events are
	// gone). Called from the scan, never concurrently.
	Declines func(d Declined, open bool)
	// Now is the clock of Declined.Since (required); loopd passes
	// its own so the "needs you" list and the event log agree.
	Now func() time.Time
}

// Declined is an item this node declines for capacity: events wait in its
// slot, its lease looks free, and this node holds MaxItems items already.
// It waits for a node with room (or for this one to free a place).
type Declined struct {
	// Item is the work item ref ("" when its first event names none).
	Item, Slot string
	// Node is this node; MaxItems its capacity.
	Node     string
	MaxItems int
	// Since is the first scan that declined it.
	Since time.Time
}

// maxDeclinePeeks bounds the events a scan reads to name newly declined
// items (one stream read each): a backlog of thousands is named over
// several scans, never in one.
const maxDeclinePeeks = 64

// Takeover describes an item taken over from another node.
type Takeover struct {
	Item, Slot string
	// From is the node the items registry named as the owner.
	From string
	// Since is when From took the item.
	Since time.Time
	// Session is From's conversation id for the item ("" when unknown).
	Session string
}

// Ownership is one line of the ownership log.
type Ownership struct {
	Node, Slot, Item string
	// Acquired is true for an acquisition, false for a release (or a
	// loss: Lost).
	Acquired bool
	Lost     bool
	// Revision is the lease's KV revision when acquired, the last one
	// written when released or lost.
	Revision uint64
	// From is the previous owner on a takeover.
	From string
	Time time.Time
}

// registryEntry is the items registry's value.
type registryEntry struct {
	Item    string    `json:"item"`
	Node    string    `json:"node"`
	Since   time.Time `json:"since"`
	Session string    `json:"session,omitempty"`
}

// Shared dispatches a share of the events of a queue shared by several
// nodes. Build it with NewShared, run it with Run.
type Shared struct {
	base   *Dispatcher
	cfg    SharedConfig
	leases *lease.Manager
	items  jetstream.KeyValue

	mu       sync.Mutex
	workers  map[string]*slotWorker
	declined map[string]Declined // by slot; written only by the scan
	wg       sync.WaitGroup
}

type slotWorker struct {
	slot string
	wake chan struct{}
}

// NewShared opens the lease and items buckets on q's connection (with
// q's replicas) and returns a Shared dispatcher.
func NewShared(ctx context.Context, q *queue.Queue, h Handler, cfg SharedConfig) (*Shared, error) {
	if cfg.Node == "" {
		return nil, errors.New("dispatch: SharedConfig.Node is required: set service.node to a name unique among the loopd sharing queue.url")
	}
	base, err := New(q, h, cfg.Config)
	if err != nil {
		return nil, err
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 15 * time.Second
	}
	if cfg.ScanInterval <= 0 {
		cfg.ScanInterval = 500 * time.Millisecond
	}
	if cfg.Now == nil {
		return nil, errors.New("dispatch: SharedConfig.Now is nil: the leases need the daemon's clock")
	}
	if holder, err := q.DispatcherHolder(ctx); err != nil {
		return nil, err
	} else if holder != "" {
		return nil, fmt.Errorf("dispatch: a loopd without service.node (%s) dispatches this whole queue; set service.node on every loopd sharing queue.url, or stop that one", holder)
	}
	js := q.JetStream()
	lm, err := lease.Open(ctx, js, lease.Config{Bucket: q.Prefix() + "_item_leases", Node: cfg.Node, TTL: cfg.LeaseTTL, MaxItems: cfg.MaxItems, Replicas: q.Replicas(),
		// Real time, not cfg.Now: a lease races the bucket's TTL, which
		// NATS keeps on real time.
		Now: time.Now})
	if err != nil {
		return nil, err
	}
	items, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: q.Prefix() + "_items", Description: "theloop: work items some loopd owns (slot → item, node)",
		History: 1, Storage: jetstream.FileStorage, Replicas: q.Replicas(),
	})
	if err != nil {
		lm.Close()
		return nil, fmt.Errorf("dispatch: items registry: %w", err)
	}
	return &Shared{base: base, cfg: cfg, leases: lm, items: items, workers: map[string]*slotWorker{}}, nil
}

// Leases is the node's lease manager (held items, capacity).
func (s *Shared) Leases() *lease.Manager { return s.leases }

// Run scans for items and works the ones this node owns until ctx ends,
// then drains: running handlers finish (cut after DrainTimeout), items
// without Holds are released at once, held ones are left to lapse (or to
// this node when it restarts within the TTL: the same Node re-takes its
// own leases). Run may be called once.
func (s *Shared) Run(ctx context.Context) error {
	d := s.base
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	d.hctx = hctx
	d.stopCh = make(chan struct{})
	defer s.leases.Close()

	regEvery := max(1, int(s.cfg.LeaseTTL/2/s.cfg.ScanInterval))
	t := time.NewTicker(s.cfg.ScanInterval)
	defer t.Stop()
	for n := 0; ; n++ {
		s.scan(ctx, n%regEvery == 0)
		select {
		case <-ctx.Done():
		case <-t.C:
			continue
		}
		break
	}
	close(d.stopCh)
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d.cfg.DrainTimeout):
		hcancel()
		<-done
	}
	return nil
}

// order spreads the nodes' attempts: each walks the slots from its own
// offset, so three nodes scanning at once do not all race for the same
// first item.
func (s *Shared) order(slots []string) []string {
	sort.Strings(slots)
	if len(slots) < 2 {
		return slots
	}
	h := fnv.New32a()
	h.Write([]byte(s.cfg.Node))
	off := int(h.Sum32() % uint32(len(slots)))
	return append(slots[off:len(slots):len(slots)], slots[:off]...)
}

func (s *Shared) scan(ctx context.Context, registry bool) {
	slots, err := s.base.q.Slots(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.base.observe(Observation{Outcome: OutcomeConsumerFailed, Err: err})
		}
		return
	}
	cands := queue.SortedSlots(slots)
	if registry {
		if keys, err := s.items.Keys(ctx); err == nil {
			for _, k := range keys {
				if _, ok := slots[k]; !ok {
					cands = append(cands, k)
				}
			}
		} else if !errors.Is(err, jetstream.ErrNoKeysFound) && ctx.Err() == nil {
			s.base.observe(Observation{Outcome: OutcomeConsumerFailed, Err: fmt.Errorf("items registry: %w", err)})
		}
	}
	full := false
	var declined []string
	for _, slot := range s.order(cands) {
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		w := s.workers[slot]
		s.mu.Unlock()
		if w != nil {
			select {
			case w.wake <- struct{}{}:
			default:
			}
			continue
		}
		if !s.leases.MaybeFree(slot) {
			continue
		}
		_, waiting := slots[slot]
		if full {
			if waiting {
				declined = append(declined, slot)
			}
			continue
		}
		l, err := s.leases.Acquire(ctx, slot)
		switch {
		case errors.Is(err, lease.ErrFull):
			full = true // declined: a node with room takes it
			if waiting {
				declined = append(declined, slot)
			}
			continue
		case err != nil:
			continue // held by a live node (or a passing error: next scan)
		}
		s.start(slot, l)
	}
	s.noteDeclined(ctx, declined)
}

// noteDeclined replaces the declined set with this scan's: a slot
// declined again keeps its Since, a new one is named from its oldest
// event, and one no longer declined (taken, or drained) is dropped.
func (s *Shared) noteDeclined(ctx context.Context, slots []string) {
	s.mu.Lock()
	prev := s.declined
	s.mu.Unlock()
	if len(prev) == 0 && len(slots) == 0 {
		return
	}
	next := make(map[string]Declined, len(slots))
	var opened, closed []Declined
	peeks := 0
	for _, slot := range slots {
		if d, ok := prev[slot]; ok {
			next[slot] = d
			continue
		}
		if peeks >= maxDeclinePeeks {
			continue // named by a later scan
		}
		peeks++
		d := Declined{Slot: slot, Node: s.cfg.Node, MaxItems: s.cfg.MaxItems, Since: s.cfg.Now(), Item: s.itemOf(ctx, slot)}
		next[slot] = d
		opened = append(opened, d)
	}
	for slot, d := range prev {
		if _, ok := next[slot]; !ok {
			closed = append(closed, d)
		}
	}
	s.mu.Lock()
	s.declined = next
	s.mu.Unlock()
	if s.cfg.Declines != nil {
		for _, d := range opened {
			s.cfg.Declines(d, true)
		}
		for _, d := range closed {
			s.cfg.Declines(d, false)
		}
	}
}

// itemOf names the work item of a slot from its oldest waiting event.
func (s *Shared) itemOf(ctx context.Context, slot string) string {
	m, err := s.base.q.NextFor(ctx, slot, 0)
	if err != nil || m.Event == nil {
		return ""
	}
	return queue.ItemRef(m.Event)
}

// Declined lists the items this node declines for capacity now, the
// longest declined first.
func (s *Shared) Declined() []Declined {
	s.mu.Lock()
	out := make([]Declined, 0, len(s.declined))
	for _, d := range s.declined {
		out = append(out, d)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return out[i].Slot < out[j].Slot
	})
	return out
}

func (s *Shared) start(slot string, l *lease.Lease) {
	w := &slotWorker{slot: slot, wake: make(chan struct{}, 1)}
	s.mu.Lock()
	s.workers[slot] = w
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.work(w, l)
		s.mu.Lock()
		delete(s.workers, slot)
		s.mu.Unlock()
	}()
}

// guard cancels the returned context at the lease's deadline (following
// its renewals).
func guard(parent context.Context, l *lease.Lease) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	go func() {
		for {
			dl := l.Deadline()
			wait := time.Until(dl)
			if dl.IsZero() || wait <= 0 {
				cancel()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
	return ctx, cancel
}

func (s *Shared) own(o Ownership) {
	if s.cfg.Own != nil {
		o.Node = s.cfg.Node
		o.Time = time.Now()
		s.cfg.Own(o)
	}
}

// work owns one slot: it handles the slot's events in order while the
// lease is valid, and gives the item up when nothing holds it here.
func (s *Shared) work(w *slotWorker, l *lease.Lease) {
	d := s.base
	ctx, cancel := guard(d.hctx, l)
	defer func() { cancel() }()
	valid := l.Valid

	var prev registryEntry
	var regRev uint64
	if e, err := s.items.Get(ctx, w.slot); err == nil {
		_ = json.Unmarshal(e.Value(), &prev)
	}
	item := prev.Item
	session := ""
	since := time.Now().UTC()
	s.own(Ownership{Slot: w.slot, Item: item, Acquired: true, Revision: l.Revision(), From: otherNode(prev.Node, s.cfg.Node)})
	register := func() {
		b, _ := json.Marshal(registryEntry{Item: item, Node: s.cfg.Node, Since: since, Session: session})
		if rev, err := s.items.Put(ctx, w.slot, b); err == nil {
			regRev = rev
		}
	}
	register()
	if from := otherNode(prev.Node, s.cfg.Node); from != "" && item != "" && s.cfg.Takeover != nil {
		// A few attempts (a clone or tmux hiccup); then the item's events
		// are handled anyway — the intake spawns when an event may.
		tk := Takeover{Item: item, Slot: w.slot, From: from, Since: prev.Since, Session: prev.Session}
		for attempt := 1; attempt <= 3 && valid() && !d.stopping(); attempt++ {
			err := s.cfg.Takeover(ctx, tk)
			if err == nil {
				break
			}
			d.observe(Observation{Outcome: OutcomeRetry, Key: item, Attempt: attempt, Err: fmt.Errorf("takeover from %s: %w", from, err)})
			select {
			case <-time.After(d.cfg.Backoff(attempt)):
			case <-d.stopCh:
			case <-ctx.Done():
			}
		}
	}

	lost := false
	var next uint64
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	for {
		if !valid() {
			// Past the deadline: late renewals (a stall) or a lapse. A
			// renewal now succeeds only if no other node took the item
			// meanwhile (compare-and-swap on our revision): then nothing
			// happened in between and the work goes on.
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(d.hctx), s.cfg.LeaseTTL/3)
			err := l.Renew(rctx)
			rcancel()
			if err == nil && !d.stopping() {
				cancel()
				ctx, cancel = guard(d.hctx, l)
				continue
			}
			lost = err != nil
			break
		}
		if d.stopping() {
			break
		}
		m, err := d.q.NextFor(ctx, w.slot, next)
		if errors.Is(err, queue.ErrEmpty) {
			if item != "" && s.cfg.Holds != nil && s.cfg.Holds(item) {
				// Keep the item (its session lives here); wait for the
				// next scan to say it has events.
				idle.Reset(s.cfg.ScanInterval * 4)
				select {
				case <-w.wake:
				case <-idle.C:
				case <-d.stopCh:
				case <-ctx.Done():
				}
				next = 0
				continue
			}
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				continue // the loop's checks say why
			}
			select {
			case <-time.After(s.cfg.ScanInterval):
			case <-d.stopCh:
			}
			continue
		}
		if m.Event != nil && item == "" {
			if item = queue.ItemRef(m.Event); item != "" {
				register()
			}
		}
		key := item
		if key == "" {
			key = "slot:" + w.slot
		}
		if !d.process(ctx, key, m, valid) {
			if !valid() && !d.stopping() {
				continue // the loop's top renews or gives up
			}
			break
		}
		next = m.Seq + 1
		if item != "" && s.cfg.SessionOf != nil {
			if sid := s.cfg.SessionOf(item); sid != session {
				session = sid
				register()
			}
		}
	}
	if lost {
		s.own(Ownership{Slot: w.slot, Item: item, Lost: true, Revision: l.Revision()})
		if item != "" && s.cfg.Lost != nil {
			s.cfg.Lost(item)
		}
		_ = l.Release(ctx) // a lost lease: only forgotten, so it stops counting
		return
	}
	keep := item != "" && s.cfg.Holds != nil && s.cfg.Holds(item)
	if keep {
		// Shutting down with a live session here: the lease lapses after
		// the TTL unless this node comes back first.
		s.own(Ownership{Slot: w.slot, Item: item, Revision: l.Revision()})
		return
	}
	// Give the item up: registry first (only our own entry), then the
	// lease. An event arriving meanwhile is found by the next scan.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(d.hctx), 5*time.Second)
	defer rcancel()
	if regRev != 0 {
		_ = s.items.Delete(rctx, w.slot, jetstream.LastRevision(regRev))
	}
	s.own(Ownership{Slot: w.slot, Item: item, Revision: l.Revision()})
	_ = l.Release(rctx)
}

func otherNode(prev, me string) string {
	if prev == me {
		return ""
	}
	return prev
}
