package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/natstest"
	"github.com/theloop-dev/theloop/loop/daemon/lease"
)

// ownershipLog records when each node worked on each item; overlapping
// intervals on one item would be two owners at once.
type ownershipLog struct {
	mu  sync.Mutex
	ivs map[string][]interval
}

type interval struct {
	node       string
	start, end time.Time
}

func (o *ownershipLog) add(item, node string, start, end time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ivs[item] = append(o.ivs[item], interval{node, start, end})
}

// node is one loopd's lease side: it keeps trying to own items and "works"
// on an item only while its lease is Valid.
type node struct {
	name   string
	m      *lease.Manager
	nc     *nats.Conn
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   atomic.Int64
}

// completed is the durable record of finished items every node reads (in
// loopd: the queue's acknowledgement).
type completed struct{ m sync.Map }

func (c *completed) has(item string) bool { _, ok := c.m.Load(item); return ok }

// mark records item done by node; a second completion is a double effect.
func (c *completed) mark(item, node string) (first bool) {
	_, loaded := c.m.LoadOrStore(item, node)
	return !loaded
}

func startNode(t *testing.T, url, name string, items []string, ttl time.Duration, capacity int, log *ownershipLog, fin *completed, doubles *atomic.Int64) *node {
	nc, err := nats.Connect(url, nats.Name(name))
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var m *lease.Manager
	require.Eventually(t, func() bool {
		m, err = lease.Open(ctx, js, lease.Config{Node: name, TTL: ttl, MaxItems: capacity, Replicas: 3, Now: time.Now})
		return err == nil
	}, 30*time.Second, 200*time.Millisecond, "open the lease bucket: %v", err)
	n := &node{name: name, m: m, nc: nc, cancel: cancel}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for ctx.Err() == nil {
			for _, item := range items {
				if ctx.Err() != nil {
					return
				}
				if fin.has(item) {
					continue
				}
				l, err := m.Acquire(ctx, item)
				if err != nil {
					continue
				}
				if fin.has(item) { // finished between the check and the lease
					_ = l.Release(ctx)
					continue
				}
				// Work on the item for a while, only while the lease holds.
				start := time.Now()
				end := start
				for i := 0; i < 5 && ctx.Err() == nil && l.Valid(); i++ {
					time.Sleep(2 * time.Millisecond)
					end = time.Now()
				}
				if ctx.Err() == nil && l.Valid() {
					log.add(item, name, start, time.Now())
					if !fin.mark(item, name) {
						doubles.Add(1)
					}
					n.done.Add(1)
					_ = l.Release(ctx)
				} else {
					log.add(item, name, start, end)
					if ctx.Err() == nil {
						_ = l.Release(ctx) // lost: stop counting it
					} // else: killed mid-work, holding it
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return n
}

// kill is a node dying mid-flight: no release, no more renewals.
func (n *node) kill() {
	n.cancel()
	n.wg.Wait()
	n.m.Close()
	n.nc.Close()
}

// TestThreeNodesShareItemsAndTakeOverADeadNodesItems: a 3-server NATS
// cluster, 3 nodes, 300 work items. One node dies mid-flight holding
// leases; its items lapse and the others take them over. Every item is
// worked to the end, and the ownership log shows no item held by two nodes
// at once.
func TestThreeNodesShareItemsAndTakeOverADeadNodesItems(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server NATS cluster")
	}
	urls := natstest.Cluster(t, 3)
	items := make([]string, 300)
	for i := range items {
		items[i] = fmt.Sprintf("github:octo/demo#%d", i+1)
	}
	const ttl = 2 * time.Second
	log := &ownershipLog{ivs: map[string][]interval{}}
	fin := &completed{}
	var doubles atomic.Int64
	nodes := []*node{
		startNode(t, urls[0], "a", items, ttl, 20, log, fin, &doubles),
		startNode(t, urls[1], "b", items, ttl, 20, log, fin, &doubles),
		startNode(t, urls[2], "c", items, ttl, 20, log, fin, &doubles),
	}
	// Let work start, then kill c while it holds a lease mid-work.
	var orphans []string
	require.Eventually(t, func() bool {
		orphans = nodes[2].m.Items()
		return len(orphans) > 0 && nodes[2].done.Load() > 5
	}, 60*time.Second, time.Millisecond)
	killedAt := time.Now()
	nodes[2].kill()
	orphans = nodes[2].m.Items() // what it held when it died (no release)

	count := func() int {
		n := 0
		for _, item := range items {
			if fin.has(item) {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return count() == len(items) }, 120*time.Second, 50*time.Millisecond, "every item is worked to the end")
	took := time.Since(killedAt)
	nodes[0].kill()
	nodes[1].kill()
	require.Zero(t, doubles.Load(), "no item finished twice")

	// The dead node's items moved to a live node, once its lease lapsed.
	var failover time.Duration
	for _, item := range orphans {
		v, _ := fin.m.Load(item)
		require.NotEqual(t, "c", v, "%s was finished by a live node", item)
		for _, iv := range log.ivs[item] {
			if iv.node != "c" && iv.start.After(killedAt) {
				failover = max(failover, iv.start.Sub(killedAt))
			}
		}
	}
	require.NotZero(t, failover)
	// No item was ever worked by two nodes at once.
	for item, ivs := range log.ivs {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].start.Before(ivs[j].start) })
		for i := 1; i < len(ivs); i++ {
			require.False(t, ivs[i].start.Before(ivs[i-1].end), "%s: %s worked from %s while %s worked until %s", item,
				ivs[i].node, ivs[i].start.Format("15:04:05.000"), ivs[i-1].node, ivs[i-1].end.Format("15:04:05.000"))
		}
	}
	perNode := map[string]int64{}
	var total int64
	for _, nd := range nodes {
		perNode[nd.name] = nd.done.Load()
		total += nd.done.Load()
	}
	require.Equal(t, int64(len(items)), total, "each item finished exactly once")
	require.Positive(t, perNode["a"])
	require.Positive(t, perNode["b"])
	t.Logf("items finished per node: %v; c died holding %v; failover (kill → a live node starts the orphan) %s with lease TTL %s; all %d items done %s after the kill",
		perNode, orphans, failover.Round(time.Millisecond), ttl, len(items), took.Round(time.Millisecond))
}

func TestCapacityAndOwnership(t *testing.T) {
	opts := &server.Options{JetStream: true, StoreDir: t.TempDir(), DontListen: true, NoLog: true, NoSigs: true}
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	require.True(t, s.ReadyForConnections(10*time.Second))
	nc, err := nats.Connect("", nats.InProcessServer(s))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx := context.Background()
	a, err := lease.Open(ctx, js, lease.Config{Node: "a", TTL: time.Second, MaxItems: 2, Now: time.Now})
	require.NoError(t, err)
	defer a.Close()
	b, err := lease.Open(ctx, js, lease.Config{Node: "b", TTL: time.Second, Now: time.Now})
	require.NoError(t, err)
	defer b.Close()

	l1, err := a.Acquire(ctx, "github:o/r#1")
	require.NoError(t, err)
	_, err = a.Acquire(ctx, "github:o/r#2")
	require.NoError(t, err)
	_, err = a.Acquire(ctx, "github:o/r#3")
	require.ErrorIs(t, err, lease.ErrFull, "a full node declines new items")
	_, err = b.Acquire(ctx, "github:o/r#1")
	require.ErrorIs(t, err, lease.ErrHeld)
	owner, err := b.Owner(ctx, "github:o/r#1")
	require.NoError(t, err)
	require.Equal(t, "a", owner)

	// A renewal is a compare-and-swap on the holder's revision.
	require.NoError(t, l1.Renew(ctx))
	require.True(t, l1.Valid())
	_, err = b.Acquire(ctx, "github:o/r#1")
	require.ErrorIs(t, err, lease.ErrHeld)

	// Release hands it over at once.
	require.NoError(t, l1.Release(ctx))
	lb, err := b.Acquire(ctx, "github:o/r#1")
	require.NoError(t, err)
	require.True(t, lb.Valid())
	// The old holder's stale lease cannot be renewed.
	require.True(t, errors.Is(l1.Renew(ctx), lease.ErrLost))
}
