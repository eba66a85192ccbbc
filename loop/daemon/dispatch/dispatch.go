// Package dispatch consumes loopd's durable event queue and runs a Handler
// for each event: strictly in order per work item, in parallel across work
// items (bounded), acknowledging an event only after its handler returned
// and its completion was recorded.
//
// Guarantees, given a Handler that is idempotent:
//   - An event is acknowledged only after Handle succeeded and the delivery
//     was recorded as handled, or after it was moved to the dead-letter
//     stream. A crash anywhere before leaves it unacknowledged: it is
//     delivered again after a restart, and the handled record (or the
//     handler's own idempotence) keeps the effect single.
//   - Events with the same key (the first work item) are handled one at a
//     time in stream order, retries included: a failing event holds its
//     work item's later events back until it succeeds or is dead-lettered.
//   - A delivery id already handled, and a content identity already claimed
//     by another delivery, are acknowledged without calling Handle.
//   - Run returns after its context is cancelled and every running handler
//     has returned (a drain); events queued behind them are left
//     unacknowledged for the next run.
//
// Dispatcher consumes the whole queue on one node. Shared (shared.go)
// shares the work items among several nodes of one NATS cluster, with the
// same guarantees per item, each item leased to one node at a time.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// Handler applies one event's effects. It must be idempotent: after a crash
// the same event may be handled again.
type Handler interface {
	Handle(ctx context.Context, ev *ingress.Event) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, ev *ingress.Event) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, ev *ingress.Event) error { return f(ctx, ev) }

// Triager is implemented by a Handler that can tell, cheaply and before
// anything else, that an event will be dropped without effect (no work
// item, not armed, ...). The dispatcher asks it first: an event it answers
// ErrNoEffect for is acknowledged as dropped without calling Handle and
// without reading or writing the delivery and content dedup records — two
// round trips to the queue and a write, most of the dispatcher's cost for
// the bulk of repository activity, which concerns no armed work item.
//
// Triage must have no effect beyond logging, and must answer ErrNoEffect
// only for an event Handle would drop at that moment (nil when unsure:
// Handle then decides, after the dedup records). At most one effect per
// delivery and per content identity still holds: a dropped event has none.
// A change dropped this way is judged afresh if it arrives again under
// another delivery id, as a redelivery of a dropped event already is.
// Errors other than ErrNoEffect are retried like Handle's.
type Triager interface {
	Triage(ctx context.Context, ev *ingress.Event) error
}

// ErrNoEffect is what a Handler returns for an event it dropped without any
// effect (a policy said no): the event is acknowledged without a handled
// record, so a redelivery is judged afresh rather than skipped.
var ErrNoEffect = errors.New("dispatch: dropped without effect")

// Permanent wraps an error a retry cannot fix: the event is dead-lettered at
// once.
func Permanent(err error) error { return permanentError{err} }

type permanentError struct{ error }

func (p permanentError) Unwrap() error { return p.error }

// Outcome names what happened to one event.
type Outcome string

const (
	OutcomeHandled          Outcome = "handled"
	OutcomeDropped          Outcome = "dropped"
	OutcomeAlreadyHandled   Outcome = "already-handled"
	OutcomeDuplicateContent Outcome = "duplicate-content"
	OutcomeRetry            Outcome = "retry"
	OutcomeDeadLettered     Outcome = "dead-lettered"
	OutcomeAbandoned        Outcome = "abandoned"
	// OutcomeConsumerFailed: the stream consumer stopped handing out
	// events before shutdown (Err says why); restart loopd.
	OutcomeConsumerFailed Outcome = "consumer-failed"
	// OutcomePaced: webhooks began arriving in a burst that leaves the
	// receiver short of time, and the dispatcher paces itself until it
	// ends (Config.BurstPause); OutcomeUnpaced: the burst is over. Neither
	// carries an event.
	OutcomePaced   Outcome = "paced"
	OutcomeUnpaced Outcome = "unpaced"
)

// Observation reports one step of the dispatcher.
type Observation struct {
	Outcome    Outcome
	Key        string
	DeliveryID string
	Seq        uint64
	Attempt    int
	Err        error
}

// Config tunes a Dispatcher.
type Config struct {
	// Parallelism bounds handlers running at once (default 4,
	// routing.maxConcurrentDispatches).
	Parallelism int
	// MaxDeliver is how many attempts an event gets before it is
	// dead-lettered (default 5).
	MaxDeliver int
	// Backoff is the wait before attempt n+1 (default 1s·2^(n-1), ≤ 1 min).
	Backoff func(attempt int) time.Duration
	// Key orders events: equal keys run one at a time in order (default
	// the first work item's ref, else the repository).
	Key func(ev *ingress.Event) string
	// DrainTimeout bounds how long Run waits for running handlers after its
	// context is cancelled before cancelling theirs (default 30 s).
	DrainTimeout time.Duration
	// Observe, when set, receives every outcome (synchronously).
	Observe func(Observation)
	// Owner names this dispatcher in the queue's lease (default the host
	// name). A restarted dispatcher with the same owner takes its lease
	// back at once; another owner waits as a standby until it expires.
	Owner string
	// LeaseTTL is how long the lease outlives a dead holder (default
	// queue.DefaultLeaseTTL).
	LeaseTTL time.Duration
	// BurstPause paces the single-node dispatcher in a webhook burst that
	// leaves the receiver short of time (burst.go): it then hands out
	// burstBatch events, waits this long, and so on until the burst ends
	// (default DefaultBurstPause: up to 50 events a second; negative:
	// never pace). A webhook that waits too long for its 202 is lost, an
	// event the queue holds is only late: the backlog waits in the queue
	// and is drained when the burst ends.
	BurstPause time.Duration
}

// DefaultKey orders by the first work item, else the repository, else the
// delivery (no ordering constraint).
func DefaultKey(ev *ingress.Event) string {
	if len(ev.WorkItems) > 0 {
		return ev.WorkItems[0].String()
	}
	if ev.Repo != "" {
		return "repo:" + ev.Repo
	}
	return "delivery:" + ev.DeliveryID
}

func defaultBackoff(n int) time.Duration {
	d := time.Second << min(n-1, 6)
	return min(d, time.Minute)
}

// Dispatcher runs handlers over a queue.
type Dispatcher struct {
	q   *queue.Queue
	h   Handler
	cfg Config

	sem chan struct{}

	mu     sync.Mutex
	keys   map[string]*keyQueue
	wg     sync.WaitGroup
	hctx   context.Context
	stopCh chan struct{}

	// Burst pacing (fetching goroutine only): the meter, and the events
	// handed out since the last pause.
	meter  burstMeter
	handed int
}

type keyQueue struct {
	msgs []*queue.Message
}

// New returns a Dispatcher. It starts nothing until Run.
func New(q *queue.Queue, h Handler, cfg Config) (*Dispatcher, error) {
	if q == nil || h == nil {
		return nil, errors.New("dispatch: a queue and a handler are required")
	}
	if cfg.Parallelism <= 0 {
		cfg.Parallelism = 4
	}
	if cfg.MaxDeliver <= 0 {
		cfg.MaxDeliver = 5
	}
	if cfg.Backoff == nil {
		cfg.Backoff = defaultBackoff
	}
	if cfg.Key == nil {
		cfg.Key = DefaultKey
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 30 * time.Second
	}
	if cfg.Owner == "" {
		cfg.Owner, _ = os.Hostname()
	}
	if cfg.BurstPause == 0 {
		cfg.BurstPause = DefaultBurstPause
	}
	return &Dispatcher{q: q, h: h, cfg: cfg, sem: make(chan struct{}, cfg.Parallelism), keys: map[string]*keyQueue{}}, nil
}

// Run takes the queue's dispatcher lease (waiting as a standby while
// another owner holds it), consumes until ctx is cancelled or the lease is
// lost, then drains: running handlers finish (their context is cancelled
// only after DrainTimeout), nothing queued behind them is started or
// acknowledged. It returns nil after a cancellation and an error wrapping
// queue.ErrLeaseLost when the lease was lost. Run may be called once.
func (d *Dispatcher) Run(ctx context.Context) (err error) {
	lease, err := d.q.AcquireLease(ctx, d.cfg.Owner, d.cfg.LeaseTTL)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	defer lease.Release()
	cons, err := d.q.Consume(ctx)
	if err != nil {
		if ctx.Err() != nil {
			// Stopped before the first fetch: nothing was handed out, so
			// nothing is left to drain — a clean stop, as above.
			return nil
		}
		return err
	}
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	d.hctx = hctx
	d.stopCh = make(chan struct{})

	fetchDone := make(chan struct{})
	go func() {
		defer close(fetchDone)
		for {
			m, err := cons.Next()
			if err != nil {
				if !d.stopping() {
					d.observe(Observation{Outcome: OutcomeConsumerFailed, Err: err})
				}
				return
			}
			d.enqueue(m)
			d.pace()
		}
	}()
	select {
	case <-ctx.Done():
	case <-lease.Lost:
		err = fmt.Errorf("dispatch: stopping: %w", queue.ErrLeaseLost)
	}
	close(d.stopCh)
	cons.Stop()
	<-fetchDone

	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d.cfg.DrainTimeout):
		hcancel()
		<-done
	}
	d.mu.Lock()
	for k, kq := range d.keys {
		for _, m := range kq.msgs {
			d.observe(Observation{Outcome: OutcomeAbandoned, Key: k, DeliveryID: deliveryOf(m), Seq: m.Seq})
		}
	}
	d.keys = map[string]*keyQueue{}
	d.mu.Unlock()
	return err
}

func deliveryOf(m *queue.Message) string {
	if m.Event != nil {
		return m.Event.DeliveryID
	}
	return ""
}

func (d *Dispatcher) observe(o Observation) {
	if d.cfg.Observe != nil {
		d.cfg.Observe(o)
	}
}

// pace is called after each event handed out: in a burst (burst.go) it
// waits BurstPause after every burstBatch events, or until the dispatcher
// stops. Only the fetching goroutine calls it.
func (d *Dispatcher) pace() {
	if d.cfg.BurstPause <= 0 {
		return
	}
	puts, wait := d.q.PutLoad()
	if d.meter.update(time.Now(), puts, wait) {
		if d.meter.burst {
			d.observe(Observation{Outcome: OutcomePaced})
		} else {
			d.observe(Observation{Outcome: OutcomeUnpaced})
		}
	}
	if !d.meter.burst {
		d.handed = 0
		return
	}
	if d.handed++; d.handed < burstBatch {
		return
	}
	d.handed = 0
	t := time.NewTimer(d.cfg.BurstPause)
	defer t.Stop()
	select {
	case <-t.C:
	case <-d.stopCh:
	}
}

func (d *Dispatcher) stopping() bool {
	select {
	case <-d.stopCh:
		return true
	default:
		return false
	}
}

func (d *Dispatcher) enqueue(m *queue.Message) {
	key := "undecodable"
	if m.Event != nil {
		key = d.cfg.Key(m.Event)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	kq, running := d.keys[key]
	if running {
		kq.msgs = append(kq.msgs, m)
		return
	}
	d.keys[key] = &keyQueue{msgs: []*queue.Message{m}}
	d.wg.Add(1)
	go d.work(key)
}

// work handles key's events one at a time until its queue is empty.
func (d *Dispatcher) work(key string) {
	defer d.wg.Done()
	for {
		d.mu.Lock()
		kq := d.keys[key]
		if kq == nil || len(kq.msgs) == 0 || d.stopping() {
			if kq != nil && len(kq.msgs) == 0 {
				delete(d.keys, key)
			}
			d.mu.Unlock()
			return
		}
		m := kq.msgs[0]
		d.mu.Unlock()

		if !d.process(d.hctx, key, m, nil) {
			return // stopping: leave the rest unacknowledged
		}
		d.mu.Lock()
		kq.msgs = kq.msgs[1:]
		d.mu.Unlock()
	}
}

// process handles one message to a final outcome. It returns false when the
// dispatcher stopped — or valid (the shared path's lease) turned false —
// before the message was finished (left unacked).
func (d *Dispatcher) process(ctx context.Context, key string, m *queue.Message, valid func() bool) bool {
	obs := Observation{Key: key, DeliveryID: deliveryOf(m), Seq: m.Seq}
	if m.DecodeErr != nil {
		return d.kill(ctx, m, obs, 1, m.DecodeErr)
	}
	ev := m.Event
	// Attempts made in earlier runs count towards MaxDeliver.
	attempt := int(max(m.NumDelivered, 1)) - 1
	for {
		select {
		case d.sem <- struct{}{}:
		case <-d.stopCh:
			return false
		}
		if valid != nil && !valid() {
			<-d.sem
			return false
		}
		attempt++
		obs.Attempt = attempt
		outcome, err := d.once(ctx, ev)
		<-d.sem
		if err == nil {
			if valid != nil && !valid() {
				// Recorded handled: the next owner acknowledges it
				// without effect. Only an owner deletes.
				return false
			}
			if ackErr := m.Ack(ctx); ackErr != nil {
				// The effects are durable and recorded handled: a
				// redelivery will be acknowledged without effect.
				obs.Err = fmt.Errorf("ack: %w", ackErr)
			}
			obs.Outcome = outcome
			d.observe(obs)
			return true
		}
		if d.stopping() || (valid != nil && !valid()) {
			// A handler cut short by shutdown is neither retried nor
			// dead-lettered: left unacknowledged, it runs again at the next
			// start.
			return false
		}
		var perm permanentError
		if attempt >= d.cfg.MaxDeliver || errors.As(err, &perm) {
			return d.kill(ctx, m, obs, attempt, err)
		}
		obs.Outcome, obs.Err = OutcomeRetry, err
		d.observe(obs)
		select {
		case <-time.After(d.cfg.Backoff(attempt)):
		case <-d.stopCh:
			return false
		}
	}
}

func (d *Dispatcher) once(ctx context.Context, ev *ingress.Event) (Outcome, error) {
	if t, ok := d.h.(Triager); ok {
		if err := t.Triage(ctx, ev); errors.Is(err, ErrNoEffect) {
			return OutcomeDropped, nil
		} else if err != nil {
			return "", err
		}
	}
	done, err := d.q.Handled(ctx, ev.DeliveryID)
	if err != nil {
		return "", err
	}
	if done {
		return OutcomeAlreadyHandled, nil
	}
	if ck := ev.ContentKey(); ck != "" {
		mine, err := d.q.ClaimContent(ctx, ck, ev.DeliveryID)
		if err != nil {
			return "", err
		}
		if !mine {
			return OutcomeDuplicateContent, nil
		}
	}
	if err := d.h.Handle(ctx, ev); err != nil {
		if errors.Is(err, ErrNoEffect) {
			return OutcomeDropped, nil
		}
		return "", err
	}
	if err := d.q.MarkHandled(ctx, ev.DeliveryID); err != nil {
		return "", err
	}
	return OutcomeHandled, nil
}

func (d *Dispatcher) kill(ctx context.Context, m *queue.Message, obs Observation, attempts int, cause error) bool {
	obs.Attempt, obs.Err = attempts, cause
	for {
		err := d.q.Kill(ctx, m, attempts, cause.Error())
		if err == nil {
			obs.Outcome = OutcomeDeadLettered
			d.observe(obs)
			return true
		}
		select {
		case <-time.After(time.Second):
		case <-d.stopCh:
			return false
		}
	}
}
