package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/internal/natstest"
	"github.com/theloop-dev/theloop/loop/daemon/dispatch"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// clusterWorld is what the nodes of the shared test have in common: the
// durable effects (in loopd: the handled bucket, the session registry, the
// GitHub comments) and the ownership log.
type clusterWorld struct {
	mu sync.Mutex
	// effect: delivery id → node that had the effect (first).
	effect map[string]string
	// order: item → event indexes in the order their effects happened.
	order map[int][]int
	// rehandled: deliveries handled again after their effect (a crash
	// between the effect and its handled record), by node.
	rehandled []rehandle
	// own: the ownership log, every node's lines.
	own []dispatch.Ownership
	// takeovers: item → the nodes it was taken from, in order (a survivor
	// that stalls past its lease on a busy machine loses an item it took
	// from the dead node, and the other survivor takes it from it).
	takeovers map[string][]string
	// running: item → nodes handling it right now (more than one is a
	// double owner).
	running map[int]int
	doubles atomic.Int64
}

type rehandle struct{ id, node string }

// sharedNode is one loopd of the test: its queue connection, its shared
// dispatcher and its (simulated) live sessions.
type sharedNode struct {
	name   string
	q      *queue.Queue
	s      *dispatch.Shared
	cancel context.CancelFunc
	done   chan error
	dead   atomic.Bool

	mu       sync.Mutex
	sessions map[string]bool // work item → a live session here
}

func (n *sharedNode) holds(item string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sessions[item]
}

const eventsPerItem = 3

// Handle is the node's handler: event 0 of an item opens its session
// here, the last one closes it; every effect is recorded once per
// delivery (the idempotence loopd's intake gets from its markers).
func (n *sharedNode) handler(w *clusterWorld) dispatch.Handler {
	return dispatch.HandlerFunc(func(ctx context.Context, ev *ingress.Event) error {
		if n.dead.Load() {
			return errors.New("node is dead") // a crashed process has no effects
		}
		item := ev.WorkItems[0].Number
		var idx int
		_, _ = fmt.Sscanf(ev.DeliveryID[strings.LastIndexByte(ev.DeliveryID, '-')+1:], "%d", &idx)
		w.mu.Lock()
		w.running[item]++
		if w.running[item] > 1 {
			w.doubles.Add(1)
		}
		w.mu.Unlock()
		time.Sleep(5 * time.Millisecond) // the work
		w.mu.Lock()
		w.running[item]--
		if _, done := w.effect[ev.DeliveryID]; done {
			w.rehandled = append(w.rehandled, rehandle{ev.DeliveryID, n.name})
		} else {
			w.effect[ev.DeliveryID] = n.name
			w.order[item] = append(w.order[item], idx)
		}
		w.mu.Unlock()
		ref := ev.WorkItems[0].String()
		n.mu.Lock()
		if n.dead.Load() {
			n.mu.Unlock()
			return errors.New("node is dead")
		}
		switch idx {
		case 0:
			n.sessions[ref] = true
		case eventsPerItem - 1:
			delete(n.sessions, ref)
		}
		n.mu.Unlock()
		return nil
	})
}

func startSharedNode(t *testing.T, url, name string, w *clusterWorld, ttl time.Duration, capacity int) *sharedNode {
	t.Helper()
	var q *queue.Queue
	var err error
	require.Eventually(t, func() bool {
		q, err = queue.Open(context.Background(), queue.Config{URL: url, Replicas: 3, Prefix: "T"})
		return err == nil
	}, 60*time.Second, 250*time.Millisecond, "open the queue on the cluster: %v", err)
	n := &sharedNode{name: name, q: q, done: make(chan error, 1), sessions: map[string]bool{}}
	var s *dispatch.Shared
	require.Eventually(t, func() bool {
		s, err = dispatch.NewShared(context.Background(), q, n.handler(w), dispatch.SharedConfig{
			Config: dispatch.Config{Parallelism: 8, MaxDeliver: 1000, Backoff: func(int) time.Duration { return 50 * time.Millisecond }, DrainTimeout: 5 * time.Second},
			Node:   name, MaxItems: capacity, LeaseTTL: ttl, ScanInterval: 100 * time.Millisecond, Now: time.Now,
			Holds: n.holds,
			Takeover: func(ctx context.Context, tk dispatch.Takeover) error {
				w.mu.Lock()
				w.takeovers[tk.Item] = append(w.takeovers[tk.Item], tk.From)
				_, closed := w.effect[fmt.Sprintf("d-%s-%d", strings.TrimPrefix(tk.Item, "github:octo/repo#"), eventsPerItem-1)]
				w.mu.Unlock()
				// loopd respawns the session here (resume or fresh) —
				// unless the item is closed (its close event was handled
				// before the owner died without releasing it).
				if !closed {
					n.mu.Lock()
					n.sessions[tk.Item] = true
					n.mu.Unlock()
				}
				return nil
			},
			Lost: func(item string) {
				n.mu.Lock()
				delete(n.sessions, item) // loopd stops the session
				n.mu.Unlock()
			},
			Own: func(o dispatch.Ownership) {
				w.mu.Lock()
				w.own = append(w.own, o)
				w.mu.Unlock()
			},
		})
		return err == nil
	}, 60*time.Second, 250*time.Millisecond, "open the lease buckets: %v", err)
	n.s = s
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() { n.done <- s.Run(ctx) }()
	return n
}

// kill is the node's process dying: from now on it has no effect on the
// world (its handler refuses, its NATS connection is gone, so nothing it
// would write reaches the cluster and its leases are not renewed).
// It returns the work items the node had live sessions of at that
// instant (what the survivors must take over), read together with the
// death: what its shutdown does afterwards (lost-lease callbacks) does not
// count.
func (n *sharedNode) kill() (time.Time, []string) {
	n.mu.Lock()
	n.dead.Store(true)
	var live []string
	for it := range n.sessions {
		live = append(live, it)
	}
	n.mu.Unlock()
	at := time.Now()
	n.q.Close()
	n.cancel()
	<-n.done
	sort.Strings(live)
	return at, live
}

func (n *sharedNode) stop(t *testing.T) {
	n.cancel()
	require.NoError(t, <-n.done)
	n.q.Close()
}

// TestSharedThreeNodesFailover is the multi-node proof of issue 14 at the
// dispatch level: an in-process 3-server NATS cluster (streams and buckets
// with 3 replicas), three loopd dispatchers (the real queue, leases, items
// registry and Shared dispatcher; the handler is a counting stand-in for
// loopd's intake that opens a "session" on an item's first event and
// closes it on its last), 300 work items of 3 events each published
// through all three nodes. One node is killed mid-flight holding items
// with live sessions and waiting events: its items are taken over after
// the lease TTL, every event has its effect exactly once and in per-item
// order, and the ownership log shows no item owned by two nodes at once.
func TestSharedThreeNodesFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server NATS cluster")
	}
	urls := natstest.Cluster(t, 3)
	const items = 300
	const ttl = 2 * time.Second
	const capacity = 70 // 3×70 ≥ the live items at once; a full node declines
	w := &clusterWorld{effect: map[string]string{}, order: map[int][]int{}, takeovers: map[string][]string{}, running: map[int]int{}}
	nodes := []*sharedNode{
		startSharedNode(t, urls[0], "a", w, ttl, capacity),
		startSharedNode(t, urls[1], "b", w, ttl, capacity),
		startSharedNode(t, urls[2], "c", w, ttl, capacity),
	}
	ev := func(item, idx int) *ingress.Event {
		e := event(item, idx)
		e.DeliveryID = fmt.Sprintf("d-%d-%d", item, idx)
		return e
	}
	// Any node takes webhooks: event idx of item k enters through node
	// (k+idx)%3. Events of one item are published in order, with the
	// items interleaved, over a few seconds.
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		for idx := range eventsPerItem {
			for k := 1; k <= items; k++ {
				n := nodes[(k+idx)%3]
				if n.dead.Load() {
					n = nodes[(k+idx+1)%3]
					if n.dead.Load() {
						n = nodes[(k+idx+2)%3]
					}
				}
				if err := n.q.Put(context.Background(), ev(k, idx)); err != nil && !errors.Is(err, ingress.ErrDuplicate) {
					// The node died between the check and the put: another
					// takes the retry, as GitHub's redelivery would.
					k--
					continue
				}
				if k%25 == 0 {
					time.Sleep(100 * time.Millisecond)
				}
			}
		}
	}()

	// Kill c mid-flight: while it holds items with live sessions.
	c := nodes[2]
	require.Eventually(t, func() bool {
		w.mu.Lock()
		byC := 0
		for _, n := range w.effect {
			if n == "c" {
				byC++
			}
		}
		w.mu.Unlock()
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.sessions) >= 10 && byC >= 100
	}, 120*time.Second, 5*time.Millisecond)
	killedAt, orphans := c.kill()
	<-pubDone

	total := items * eventsPerItem
	require.Eventually(t, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.effect) == total
	}, 180*time.Second, 50*time.Millisecond, "every event has its effect")
	// Drain: the survivors release every item (no session stays open).
	if !assert.Eventually(t, func() bool {
		return nodes[0].s.Leases().Held() == 0 && nodes[1].s.Leases().Held() == 0
	}, 30*time.Second, 50*time.Millisecond, "the survivors release every item") {
		for _, n := range nodes[:2] {
			n.mu.Lock()
			t.Logf("%s holds %v with sessions %v", n.name, n.s.Leases().Items(), n.sessions)
			n.mu.Unlock()
		}
		w.mu.Lock()
		t.Logf("takeovers %v", w.takeovers)
		w.mu.Unlock()
		t.FailNow()
	}
	nodes[0].stop(t)
	nodes[1].stop(t)

	w.mu.Lock()
	defer w.mu.Unlock()
	require.Zero(t, w.doubles.Load(), "an item was handled on two nodes at once")
	// Exactly once, in order, per item.
	for k := 1; k <= items; k++ {
		require.Equal(t, []int{0, 1, 2}, w.order[k], "item %d: effects in per-item order, once each", k)
	}
	// A second handling only ever follows a crash or a lost lease: the
	// first node's effect whose handled record it did not get to write
	// (the handler's idempotence keeps the effect single).
	lostBy := map[string]bool{} // node + slot
	for _, o := range w.own {
		if o.Lost {
			lostBy[o.Node+" "+o.Slot] = true
		}
	}
	for _, r := range w.rehandled {
		var item, idx int
		_, err := fmt.Sscanf(r.id, "d-%d-%d", &item, &idx)
		require.NoError(t, err)
		first := w.effect[r.id]
		slot := queue.SlotOf(fmt.Sprintf("github:octo/repo#%d", item))
		// The same node again: its handler's context was cut at the
		// lease's deadline (a stall) before the handled record.
		require.True(t, first == "c" || first == r.node || lostBy[first+" "+slot], "%s handled again by %s though %s, which had its effect, neither died nor lost the lease", r.id, r.node, first)
	}

	// The ownership log: per slot, intervals from acquisition to release
	// (or loss) never overlap. The dead node's intervals end at its death
	// (after it, its process has no effect: the handler refuses and its
	// connection is closed).
	type iv struct {
		node       string
		start, end time.Time
	}
	open := map[string]map[string]time.Time{} // slot → node → since
	ivs := map[string][]iv{}
	slotItem := map[string]string{}
	acquiredAfterKill := map[string]time.Time{} // slot → first acquisition by a survivor after the kill
	held := map[string]int{}
	for _, o := range w.own {
		if o.Acquired {
			held[o.Node]++
			require.LessOrEqual(t, held[o.Node], capacity, "%s owned more items than its capacity", o.Node)
		} else {
			held[o.Node]--
		}
		if o.Item != "" {
			slotItem[o.Slot] = o.Item
		}
		if open[o.Slot] == nil {
			open[o.Slot] = map[string]time.Time{}
		}
		if o.Acquired {
			_, dup := open[o.Slot][o.Node]
			require.False(t, dup, "%s acquired %s twice without a release", o.Node, o.Slot)
			open[o.Slot][o.Node] = o.Time
			if o.Node != "c" && o.Time.After(killedAt) {
				if _, ok := acquiredAfterKill[o.Slot]; !ok {
					acquiredAfterKill[o.Slot] = o.Time
				}
			}
			continue
		}
		start, ok := open[o.Slot][o.Node]
		require.True(t, ok, "%s released %s it had not acquired", o.Node, o.Slot)
		end := o.Time
		if o.Node == "c" && end.After(killedAt) {
			end = killedAt
		}
		ivs[o.Slot] = append(ivs[o.Slot], iv{o.Node, start, end})
		delete(open[o.Slot], o.Node)
	}
	for slot, nodesOpen := range open {
		for node, since := range nodesOpen {
			require.Equal(t, "c", node, "%s still holds %s at the end", node, slot)
			ivs[slot] = append(ivs[slot], iv{node, since, killedAt})
		}
	}
	for slot, list := range ivs {
		sort.Slice(list, func(i, j int) bool { return list[i].start.Before(list[j].start) })
		for i := 1; i < len(list); i++ {
			require.False(t, list[i].start.Before(list[i-1].end), "%s (%s): %s owned it from %s while %s owned it until %s", slot, slotItem[slot],
				list[i].node, list[i].start.Format("15:04:05.000"), list[i-1].node, list[i-1].end.Format("15:04:05.000"))
		}
	}

	// The dead node's items with live sessions were taken over, recorded.
	require.NotEmpty(t, orphans)
	var failovers []time.Duration
	for _, it := range orphans {
		require.Contains(t, w.takeovers[it], "c", "%s, live on c when it died, was taken over (Takeover from c)", it)
		slot := queue.SlotOf(it)
		at, ok := acquiredAfterKill[slot]
		require.True(t, ok, "%s acquired by a survivor after the kill", it)
		failovers = append(failovers, at.Sub(killedAt))
	}
	// A takeover from a survivor follows that survivor's losing the lease
	// (a stall past the TTL under load), never a live owner's.
	for it, froms := range w.takeovers {
		for _, from := range froms {
			if from != "c" {
				require.True(t, lostBy[from+" "+queue.SlotOf(it)], "%s taken over from %s, which neither died nor lost its lease", it, from)
			}
		}
	}
	slices.Sort(failovers)
	perNode := map[string]int{}
	for _, n := range w.effect {
		perNode[n]++
	}
	require.Positive(t, perNode["c"], "c worked before it died")
	t.Logf("effects per node %v; %d rehandled after the crash; c died with %d live items; failover (kill → a survivor owns the item) min %s, median %s, max %s with lease TTL %s and scan 100ms",
		perNode, len(w.rehandled), len(orphans), failovers[0].Round(time.Millisecond), failovers[len(failovers)/2].Round(time.Millisecond), failovers[len(failovers)-1].Round(time.Millisecond), ttl)
}

// TestSharedRefusesBesideAWholeQueueDispatcher: a node sharing the queue
// must not start while a single-node dispatcher consumes all of it.
func TestSharedRefusesBesideAWholeQueueDispatcher(t *testing.T) {
	q := openQueue(t, t.TempDir())
	d, err := dispatch.New(q, dispatch.HandlerFunc(func(context.Context, *ingress.Event) error { return nil }), dispatch.Config{Owner: "solo"})
	require.NoError(t, err)
	stop := runDispatcher(t, d)
	defer stop()
	require.Eventually(t, func() bool {
		h, err := q.DispatcherHolder(context.Background())
		return err == nil && h == "solo"
	}, 10*time.Second, 10*time.Millisecond)
	_, err = dispatch.NewShared(context.Background(), q, dispatch.HandlerFunc(func(context.Context, *ingress.Event) error { return nil }), dispatch.SharedConfig{Node: "a", Now: time.Now})
	require.ErrorContains(t, err, "service.node")
}

// TestSharedFullNodeDeclines: a node at capacity leaves new items in the
// stream and says which it declines (Declined, the Declines hook); a node
// with room takes them, and the decline ends.
func TestSharedFullNodeDeclines(t *testing.T) {
	q := openQueue(t, t.TempDir())
	var mu sync.Mutex
	handledBy := map[string]string{}
	holds := map[string]bool{}
	var declines []string // "+item@node" opened, "-item@node" ended
	since := time.Date(2026, 5, 4, 8, 0, 0, 0, time.UTC)
	mk := func(name string) (*dispatch.Shared, func()) {
		s, err := dispatch.NewShared(context.Background(), q, dispatch.HandlerFunc(func(_ context.Context, ev *ingress.Event) error {
			mu.Lock()
			defer mu.Unlock()
			handledBy[ev.DeliveryID] = name
			holds[ev.WorkItems[0].String()] = true // a session that stays
			return nil
		}), dispatch.SharedConfig{Node: name, MaxItems: 2, LeaseTTL: 2 * time.Second, ScanInterval: 20 * time.Millisecond,
			Holds: func(item string) bool { mu.Lock(); defer mu.Unlock(); return holds[item] },
			Now:   func() time.Time { return since },
			Declines: func(d dispatch.Declined, open bool) {
				mu.Lock()
				defer mu.Unlock()
				sign := "-"
				if open {
					sign = "+"
				}
				declines = append(declines, sign+d.Item+"@"+d.Node)
			}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		return s, func() { cancel(); require.NoError(t, <-done) }
	}
	a, stopA := mk("a")
	defer stopA()
	for i := 1; i <= 3; i++ {
		require.NoError(t, q.Put(context.Background(), event(i, 0)))
	}
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(handledBy) == 2 }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(200 * time.Millisecond) // ten scans: a stays full
	mu.Lock()
	require.Len(t, handledBy, 2, "a full node declines the third item")
	mu.Unlock()
	require.Equal(t, 2, a.Leases().Held())
	n, err := q.Pending(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(1), n, "the declined item's event waits in the stream")
	var third string
	mu.Lock()
	for i := 1; i <= 3; i++ {
		if ref := event(i, 0).WorkItems[0].String(); !holds[ref] {
			third = ref
		}
	}
	mu.Unlock()
	require.NotEmpty(t, third)
	require.Equal(t, []dispatch.Declined{{Item: third, Slot: queue.SlotOf(third), Node: "a", MaxItems: 2, Since: since}}, a.Declined(),
		"the full node names the item it declines, since its first decline")
	mu.Lock()
	require.Equal(t, []string{"+" + third + "@a"}, declines, "one opening, however many scans decline it")
	mu.Unlock()

	_, stopB := mk("b")
	defer stopB()
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(handledBy) == 3 }, 10*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	byB := 0
	for _, n := range handledBy {
		if n == "b" {
			byB++
		}
	}
	require.Equal(t, 1, byB, "the node with room took the declined item")
	mu.Unlock()
	require.Eventually(t, func() bool { return len(a.Declined()) == 0 }, 10*time.Second, 10*time.Millisecond, "taken: no longer declined")
	mu.Lock()
	require.Equal(t, []string{"+" + third + "@a", "-" + third + "@a"}, declines)
}
