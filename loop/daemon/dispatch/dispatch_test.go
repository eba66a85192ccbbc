package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/dispatch"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
	"github.com/theloop-dev/theloop/workitem"
)

func openQueue(t *testing.T, dir string) *queue.Queue {
	t.Helper()
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: dir})
	require.NoError(t, err)
	t.Cleanup(q.Close)
	return q
}

func event(item, n int) *ingress.Event {
	return &ingress.Event{
		Event: "issue_comment", Action: "created", Repo: "octo/repo",
		DeliveryID: fmt.Sprintf("d-%d-%d", item, n),
		WorkItems:  []workitem.Ref{{Provider: "github", Owner: "octo", Repo: "repo", Number: item}},
		Source:     ingress.SourceWebhook,
	}
}

type recorder struct {
	mu      sync.Mutex
	seen    map[int][]string
	running atomic.Int32
	peak    atomic.Int32
	perItem map[int]*atomic.Int32
}

func (r *recorder) Handle(ctx context.Context, ev *ingress.Event) error {
	item := ev.WorkItems[0].Number
	r.mu.Lock()
	c := r.perItem[item]
	if c == nil {
		c = &atomic.Int32{}
		r.perItem[item] = c
	}
	r.mu.Unlock()
	if c.Add(1) != 1 {
		return errors.New("two handlers ran at once for one work item")
	}
	defer c.Add(-1)
	n := r.running.Add(1)
	for {
		p := r.peak.Load()
		if n <= p || r.peak.CompareAndSwap(p, n) {
			break
		}
	}
	time.Sleep(time.Millisecond)
	r.running.Add(-1)
	r.mu.Lock()
	r.seen[item] = append(r.seen[item], ev.DeliveryID)
	r.mu.Unlock()
	return nil
}

func runDispatcher(t *testing.T, d *dispatch.Dispatcher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- d.Run(ctx) }()
	return func() { cancel(); require.NoError(t, <-done) }
}

// 200 work items at once, 5 events each, published interleaved: every work
// item sees its events in publish order, no two at once, and no more than
// Parallelism handlers run together.
func TestDispatcher200WorkItemsPerItemOrder(t *testing.T) {
	q := openQueue(t, t.TempDir())
	ctx := context.Background()
	const items, per = 200, 5
	for n := 0; n < per; n++ {
		for i := 1; i <= items; i++ {
			require.NoError(t, q.Put(ctx, event(i, n)))
		}
	}
	rec := &recorder{seen: map[int][]string{}, perItem: map[int]*atomic.Int32{}}
	var handled atomic.Int32
	d, err := dispatch.New(q, rec, dispatch.Config{Parallelism: 4, Observe: func(o dispatch.Observation) {
		if o.Outcome == dispatch.OutcomeHandled {
			handled.Add(1)
		}
		if o.Err != nil {
			t.Errorf("observation %+v", o)
		}
	}})
	require.NoError(t, err)
	stop := runDispatcher(t, d)
	require.Eventually(t, func() bool { return handled.Load() == items*per }, 60*time.Second, 20*time.Millisecond)
	stop()
	for i := 1; i <= items; i++ {
		want := make([]string, per)
		for n := range want {
			want[n] = fmt.Sprintf("d-%d-%d", i, n)
		}
		require.Equal(t, want, rec.seen[i], "work item %d", i)
	}
	require.LessOrEqual(t, rec.peak.Load(), int32(4))
	require.Greater(t, rec.peak.Load(), int32(1), "work items ran in parallel")
	require.Eventually(t, func() bool {
		pending, err := q.Pending(ctx)
		return err == nil && pending == 0
	}, 10*time.Second, 10*time.Millisecond, "every event acknowledged (work-queue stream empty)")
}

func TestPutDuplicateDelivery(t *testing.T) {
	q := openQueue(t, t.TempDir())
	ctx := context.Background()
	require.NoError(t, q.Put(ctx, event(1, 0)))
	err := q.Put(ctx, event(1, 0))
	require.ErrorIs(t, err, ingress.ErrDuplicate)
}

func TestSameContentUnderTwoDeliveriesHasOneEffect(t *testing.T) {
	q := openQueue(t, t.TempDir())
	ctx := context.Background()
	a, b := event(1, 0), event(1, 1)
	for _, e := range []*ingress.Event{a, b} {
		e.Comments = []ingress.Comment{{ID: "77", Author: "dana", Body: "Approved", UpdatedAt: "2026-01-01T00:00:00Z"}}
		require.NoError(t, q.Put(ctx, e))
	}
	var calls atomic.Int32
	var dup atomic.Int32
	d, err := dispatch.New(q, dispatch.HandlerFunc(func(context.Context, *ingress.Event) error { calls.Add(1); return nil }),
		dispatch.Config{Observe: func(o dispatch.Observation) {
			if o.Outcome == dispatch.OutcomeDuplicateContent {
				dup.Add(1)
			}
		}})
	require.NoError(t, err)
	stop := runDispatcher(t, d)
	require.Eventually(t, func() bool { return dup.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
	stop()
	require.Equal(t, int32(1), calls.Load())
}

// A handler failing every time: the event is retried MaxDeliver times, then
// dead-lettered; later events of the same work item wait for it; a replay
// after the cause is fixed handles it.
func TestDeadLetterAndReplay(t *testing.T) {
	q := openQueue(t, t.TempDir())
	ctx := context.Background()
	require.NoError(t, q.Put(ctx, event(1, 0)))
	require.NoError(t, q.Put(ctx, event(1, 1)))
	var broken atomic.Bool
	broken.Store(true)
	var mu sync.Mutex
	var order []string
	h := dispatch.HandlerFunc(func(_ context.Context, ev *ingress.Event) error {
		if ev.DeliveryID == "d-1-0" && broken.Load() {
			return errors.New("github answered 502")
		}
		mu.Lock()
		order = append(order, ev.DeliveryID)
		mu.Unlock()
		return nil
	})
	var dead, handled atomic.Int32
	d, err := dispatch.New(q, h, dispatch.Config{MaxDeliver: 3, Backoff: func(int) time.Duration { return time.Millisecond },
		Observe: func(o dispatch.Observation) {
			switch o.Outcome {
			case dispatch.OutcomeDeadLettered:
				dead.Add(1)
			case dispatch.OutcomeHandled:
				handled.Add(1)
			}
		}})
	require.NoError(t, err)
	stop := runDispatcher(t, d)
	require.Eventually(t, func() bool { return handled.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, int32(1), dead.Load())
	stop()
	require.Equal(t, []string{"d-1-1"}, order, "the later event waited for the failing one")

	letters, err := q.DeadLetters(ctx)
	require.NoError(t, err)
	require.Len(t, letters, 1)
	require.Equal(t, "d-1-0", letters[0].DeliveryID)
	require.Equal(t, 3, letters[0].Attempts)
	require.Contains(t, letters[0].Reason, "502")

	broken.Store(false)
	require.NoError(t, q.Replay(ctx, letters[0].Seq))
	d2, err := dispatch.New(q, h, dispatch.Config{Observe: func(o dispatch.Observation) {
		if o.Outcome == dispatch.OutcomeHandled {
			handled.Add(1)
		}
	}})
	require.NoError(t, err)
	stop = runDispatcher(t, d2)
	require.Eventually(t, func() bool { return handled.Load() == 2 }, 10*time.Second, 10*time.Millisecond)
	stop()
	require.Equal(t, []string{"d-1-1", "d-1-0"}, order)
	letters, err = q.DeadLetters(ctx)
	require.NoError(t, err)
	require.Empty(t, letters)
}

// Events kept before a shutdown (nothing dispatched) are handled exactly
// once after the queue is reopened from the same directory; a handled
// event whose ack was lost is not handled again.
func TestRestartHandlesKeptEventsOnce(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	q := openQueue(t, dir)
	require.NoError(t, q.Put(ctx, event(1, 0)))
	require.NoError(t, q.Put(ctx, event(1, 1)))
	// d-1-0's effects were durable but the ack never happened.
	require.NoError(t, q.MarkHandled(ctx, "d-1-0"))
	q.Close()

	q = openQueue(t, dir)
	var mu sync.Mutex
	var got []string
	var outcomes atomic.Int32
	d, err := dispatch.New(q, dispatch.HandlerFunc(func(_ context.Context, ev *ingress.Event) error {
		mu.Lock()
		got = append(got, ev.DeliveryID)
		mu.Unlock()
		return nil
	}), dispatch.Config{Observe: func(dispatch.Observation) { outcomes.Add(1) }})
	require.NoError(t, err)
	stop := runDispatcher(t, d)
	require.Eventually(t, func() bool { return outcomes.Load() == 2 }, 10*time.Second, 10*time.Millisecond)
	stop()
	require.Equal(t, []string{"d-1-1"}, got)
}

// A drain: the running handler finishes and is acknowledged; the event
// queued behind it is left for the next run.
func TestDrainAcksOnlyFinishedWork(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	q := openQueue(t, dir)
	require.NoError(t, q.Put(ctx, event(1, 0)))
	require.NoError(t, q.Put(ctx, event(1, 1)))
	started := make(chan struct{})
	release := make(chan struct{})
	var got []string
	d, err := dispatch.New(q, dispatch.HandlerFunc(func(_ context.Context, ev *ingress.Event) error {
		if ev.DeliveryID == "d-1-0" {
			close(started)
			<-release
		}
		got = append(got, ev.DeliveryID)
		return nil
	}), dispatch.Config{})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- d.Run(rctx) }()
	<-started
	cancel()
	time.Sleep(50 * time.Millisecond)
	close(release)
	require.NoError(t, <-done)
	require.Equal(t, []string{"d-1-0"}, got)
	require.Eventually(t, func() bool {
		pending, err := q.Pending(ctx)
		return err == nil && pending == 1
	}, 10*time.Second, 10*time.Millisecond, "the finished event acknowledged, the queued one kept")
}

// An event dropped without effect is acknowledged without a handled
// record: a later redelivery is judged afresh.
func TestNoEffectAcksWithoutHandledRecord(t *testing.T) {
	q := openQueue(t, t.TempDir())
	ctx := context.Background()
	require.NoError(t, q.Put(ctx, event(1, 0)))
	var dropped atomic.Int32
	d, err := dispatch.New(q, dispatch.HandlerFunc(func(context.Context, *ingress.Event) error { return dispatch.ErrNoEffect }),
		dispatch.Config{Observe: func(o dispatch.Observation) {
			if o.Outcome == dispatch.OutcomeDropped {
				dropped.Add(1)
			}
		}})
	require.NoError(t, err)
	stop := runDispatcher(t, d)
	require.Eventually(t, func() bool { return dropped.Load() == 1 }, 10*time.Second, 10*time.Millisecond)
	stop()
	done, err := q.Handled(ctx, "d-1-0")
	require.NoError(t, err)
	require.False(t, done)
	require.Eventually(t, func() bool { n, err := q.Pending(ctx); return err == nil && n == 0 }, 10*time.Second, 10*time.Millisecond)
}

// A handler cut short by shutdown (its context cancelled after the drain
// timeout) is not dead-lettered: it stays on the stream for the next start.
func TestShutdownNeverDeadLetters(t *testing.T) {
	q := openQueue(t, t.TempDir())
	ctx := context.Background()
	require.NoError(t, q.Put(ctx, event(1, 0)))
	started := make(chan struct{})
	d, err := dispatch.New(q, dispatch.HandlerFunc(func(hctx context.Context, _ *ingress.Event) error {
		close(started)
		<-hctx.Done()
		return hctx.Err()
	}), dispatch.Config{MaxDeliver: 1, DrainTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- d.Run(rctx) }()
	<-started
	cancel()
	require.NoError(t, <-done)
	letters, err := q.DeadLetters(ctx)
	require.NoError(t, err)
	require.Empty(t, letters)
	n, err := q.Pending(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), n)
}

// Two dispatchers on one stream (two loopd on one external NATS): one
// holds the lease and consumes, the other waits; when the holder stops the
// standby takes over and handles what follows.
func TestStandbyTakesOverTheLease(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	require.True(t, ns.ReadyForConnections(10*time.Second))
	ctx := context.Background()
	open := func() *queue.Queue {
		q, err := queue.Open(ctx, queue.Config{URL: ns.ClientURL()})
		require.NoError(t, err)
		t.Cleanup(q.Close)
		return q
	}
	qa, qb := open(), open()
	var mu sync.Mutex
	by := map[string]string{}
	handler := func(name string) dispatch.Handler {
		return dispatch.HandlerFunc(func(_ context.Context, ev *ingress.Event) error {
			mu.Lock()
			by[ev.DeliveryID] = name
			mu.Unlock()
			return nil
		})
	}
	da, err := dispatch.New(qa, handler("a"), dispatch.Config{Owner: "a", LeaseTTL: 900 * time.Millisecond})
	require.NoError(t, err)
	db, err := dispatch.New(qb, handler("b"), dispatch.Config{Owner: "b", LeaseTTL: 900 * time.Millisecond})
	require.NoError(t, err)
	actx, acancel := context.WithCancel(ctx)
	adone := make(chan error, 1)
	go func() { adone <- da.Run(actx) }()
	require.NoError(t, qa.Put(ctx, event(1, 0)))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return by["d-1-0"] == "a" }, 10*time.Second, 10*time.Millisecond)

	bctx, bcancel := context.WithCancel(ctx)
	bdone := make(chan error, 1)
	go func() { bdone <- db.Run(bctx) }()
	require.NoError(t, qa.Put(ctx, event(1, 1)))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return by["d-1-1"] == "a" }, 10*time.Second, 10*time.Millisecond, "the holder keeps consuming")

	acancel()
	require.NoError(t, <-adone)
	require.NoError(t, qa.Put(ctx, event(1, 2)))
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return by["d-1-2"] == "b" }, 10*time.Second, 10*time.Millisecond, "the standby took over")
	bcancel()
	require.NoError(t, <-bdone)
}

// A dispatcher stopped right after it starts — while it takes its lease or
// creates its consumer — stops cleanly: nothing was handed out, so nothing
// is an error (loopd stopped right after it became ready used to exit 1
// with "queue: consumer: context canceled").
func TestStopDuringStartIsClean(t *testing.T) {
	q := openQueue(t, t.TempDir())
	rec := &recorder{seen: map[int][]string{}, perItem: map[int]*atomic.Int32{}}
	for i := range 40 {
		d, err := dispatch.New(q, rec, dispatch.Config{Parallelism: 1})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		time.Sleep(time.Duration(i%8) * 250 * time.Microsecond)
		cancel()
		require.NoError(t, <-done, "stop %d after %v", i, time.Duration(i%8)*250*time.Microsecond)
	}
}

// triager drops events while armed is false (Triage) and counts Handle
// calls; Triage fails once with a transient error when flaky is set.
type triager struct {
	armed, flaky atomic.Bool
	handled      atomic.Int32
	triaged      atomic.Int32
}

func (h *triager) Triage(context.Context, *ingress.Event) error {
	h.triaged.Add(1)
	if h.flaky.CompareAndSwap(true, false) {
		return errors.New("registry unreadable")
	}
	if !h.armed.Load() {
		return dispatch.ErrNoEffect
	}
	return nil
}

func (h *triager) Handle(context.Context, *ingress.Event) error { h.handled.Add(1); return nil }

// An event the handler's Triage drops is acknowledged without Handle and
// without dedup records: the same change under another delivery id, once
// the item is armed, has its one effect; a third delivery of it is a
// duplicate. A Triage error other than ErrNoEffect is retried.
func TestTriageDropsWithoutDedupRecords(t *testing.T) {
	q := openQueue(t, t.TempDir())
	ctx := context.Background()
	evs := []*ingress.Event{event(1, 0), event(1, 1), event(1, 2)}
	for _, e := range evs {
		e.Comments = []ingress.Comment{{ID: "77", Author: "dana", Body: "Approved", UpdatedAt: "2026-01-01T00:00:00Z"}}
	}
	h := &triager{}
	h.flaky.Store(true)
	outcomes := make(chan dispatch.Outcome, 10)
	d, err := dispatch.New(q, h, dispatch.Config{Backoff: func(int) time.Duration { return time.Millisecond },
		Observe: func(o dispatch.Observation) { outcomes <- o.Outcome }})
	require.NoError(t, err)
	stop := runDispatcher(t, d)
	defer stop()
	next := func() dispatch.Outcome {
		select {
		case o := <-outcomes:
			return o
		case <-time.After(10 * time.Second):
			t.Fatal("no outcome")
			return ""
		}
	}
	require.NoError(t, q.Put(ctx, evs[0]))
	require.Equal(t, dispatch.OutcomeRetry, next())
	require.Equal(t, dispatch.OutcomeDropped, next())
	require.Equal(t, int32(0), h.handled.Load())
	done, err := q.Handled(ctx, evs[0].DeliveryID)
	require.NoError(t, err)
	require.False(t, done)

	h.armed.Store(true)
	require.NoError(t, q.Put(ctx, evs[1]))
	require.Equal(t, dispatch.OutcomeHandled, next())
	require.NoError(t, q.Put(ctx, evs[2]))
	require.Equal(t, dispatch.OutcomeDuplicateContent, next())
	require.Equal(t, int32(1), h.handled.Load())
}

// A burst of webhooks (Puts from more goroutines than the process has
// cores, at well over a thousand a second) paces the dispatcher: with an
// hour's BurstPause it hands out the events that came before it measured
// the burst, one batch more, and then waits, so the rest of the burst stays
// in the queue — and a stop during the pause returns at once, leaving them
// there for the next run, which handles each exactly once. Lone events
// are never paced.
func TestBurstPacesTheDispatcherAndLosesNothing(t *testing.T) {
	q := openQueue(t, t.TempDir())
	ctx := context.Background()
	var handled sync.Map // delivery id → times handled
	count := func(ev *ingress.Event) {
		v, _ := handled.LoadOrStore(ev.DeliveryID, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
	}
	total := func() (n int) {
		handled.Range(func(_, v any) bool { n += int(v.(*atomic.Int32).Load()); return true })
		return n
	}
	h := dispatch.HandlerFunc(func(_ context.Context, ev *ingress.Event) error { count(ev); return nil })

	var paced atomic.Int32
	d, err := dispatch.New(q, h, dispatch.Config{BurstPause: time.Hour, Observe: func(o dispatch.Observation) {
		if o.Outcome == dispatch.OutcomePaced {
			paced.Add(1)
		}
	}})
	require.NoError(t, err)
	stop := runDispatcher(t, d)
	// A lone event after a quiet spell is handed out at once.
	require.NoError(t, q.Put(ctx, event(1, 0)))
	require.Eventually(t, func() bool { return total() == 1 }, 10*time.Second, 5*time.Millisecond, "a lone event is handled")
	time.Sleep(20 * time.Millisecond) // the next rate window sees no burst
	require.NoError(t, q.Put(ctx, event(1, 1)))
	require.Eventually(t, func() bool { return total() == 2 }, 10*time.Second, 5*time.Millisecond, "a second lone event is not paced")

	// As many webhooks waiting for the store as the receiver's goroutines
	// under load: more than the process has cores.
	const burst = 1000
	putters := max(8, 4*runtime.GOMAXPROCS(0))
	start := time.Now()
	var wg sync.WaitGroup
	var next atomic.Int32
	errs := make(chan error, putters)
	for range putters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := int(next.Add(1)) - 1; n < burst; n = int(next.Add(1)) - 1 {
				if err := q.Put(ctx, event(2+n%10, n)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
	if rate := float64(burst) / time.Since(start).Seconds(); rate < 3000 {
		t.Skipf("the machine put only %.0f events/s, too slow to make a burst of the test's (≥ 3000/s)", rate)
	}
	time.Sleep(100 * time.Millisecond)
	out := total() - 2
	require.Less(t, out, burst/2, "a burst paces the dispatcher (an hour per batch): %d of %d handed out", out, burst)
	require.Equal(t, int32(1), paced.Load(), "the burst's start is observed once (dispatch.paced)")
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("a dispatcher pausing for a burst did not stop")
	}

	// The next run (no burst now) handles the rest, each once.
	d2, err := dispatch.New(q, h, dispatch.Config{})
	require.NoError(t, err)
	stop2 := runDispatcher(t, d2)
	defer stop2()
	require.Eventually(t, func() bool { return total() >= 2+burst }, 30*time.Second, 10*time.Millisecond, "the burst's events are all handled")
	handled.Range(func(k, v any) bool {
		require.Equal(t, int32(1), v.(*atomic.Int32).Load(), "delivery %s handled once", k)
		return true
	})
	require.Equal(t, 2+burst, total())
}
