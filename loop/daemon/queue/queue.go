// Package queue is loopd's durable event pipeline on NATS JetStream
// (docs/decisions.md §15).
//
// A Queue holds three things (on two NATS connections: one publishes, one
// consumes):
//
//   - the events stream (work-queue retention): every routed ingress.Event is
//     published with Nats-Msg-Id = its delivery id, so the server drops a
//     second publish of the same delivery inside the duplicate window;
//   - two key-value buckets: "handled" (delivery id → done, written after a
//     dispatch's effects are durable, so a redelivery after a crash between
//     the effects and the ack changes nothing) and "content" (content identity
//     → the delivery id that claimed it, so one change arriving under two
//     deliveries has one effect);
//   - the dead-letter stream: events that failed MaxDeliver times, kept for
//     an operator to list and replay.
//
// By default the NATS server runs embedded in the process (file store under
// the state root, no listening socket: the connection is in-process). With
// Config.URL set the same code talks to an external server or cluster.
//
// Put implements ingress.Sink: it returns only after the server acknowledged
// the publish (the event is on disk), ErrDuplicate for a delivery already
// kept, and an error wrapping ingress.ErrUnavailable when the server is down,
// slow or full. Consume hands messages to the dispatcher in stream order; the
// dispatcher acknowledges each one only after its effects are durable.
//
// Events are published on per-work-item subjects (items.go). A single
// loopd consumes the stream with one durable consumer (Consume), elected by
// a lease (AcquireLease): a second loopd on the same external stream
// without service.node waits as a standby and takes over when the holder
// stops or dies. The holder recreates the durable consumer when it starts,
// so every event not yet acknowledged is delivered again, in stream order,
// at once (not after an ack timeout). Several loopd sharing the work
// (docs/decisions.md §15, dispatch.Shared) use no consumer: each reads the items it
// leased by sequence (NextFor) and finds items with waiting events with
// Slots. The two modes must not run on one stream at once.
package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/theloop-dev/theloop/ingress"
)

// Names of the JetStream objects a Queue uses (prefixed by Config.Prefix).
const (
	DefaultPrefix          = "THELOOP"
	DefaultMaxAckPending   = 1024
	DefaultDuplicateWindow = 10 * time.Minute
	DefaultKeyTTL          = 7 * 24 * time.Hour
	DefaultAckWait         = time.Hour
	DefaultPublishTimeout  = 5 * time.Second
)

// Header names set on dead letters.
const (
	// HeaderPayloadOffset marks the split wire format: the message data is
	// the event's JSON without its payload, immediately followed by the raw
	// payload bytes, which start at this byte offset. Decoding then never
	// re-scans the (up to 25 MB) payload the receiver already validated.
	// Messages without it are one JSON document (ingress.DecodeEvent).
	HeaderPayloadOffset = "Theloop-Payload-Offset"

	HeaderDeadReason   = "Theloop-Dead-Reason"
	HeaderDeadAttempts = "Theloop-Dead-Attempts"
	HeaderDeadSeq      = "Theloop-Dead-Seq"
)

// Config configures a Queue. The zero value (plus StoreDir) is an embedded
// server.
type Config struct {
	// URL is an external NATS server ("nats://host:4222"); "" embeds one.
	URL string
	// StoreDir is the embedded server's JetStream directory (required when
	// URL is ""), e.g. <state root>/queue.
	StoreDir string
	// Prefix names the streams, buckets and subjects (default THELOOP), so
	// two daemons can share one external server.
	Prefix string
	// MaxMsgs and MaxBytes bound the events stream (0: unbounded). A full
	// stream refuses new events (Put returns ErrUnavailable): nothing already
	// kept is ever discarded to make room.
	MaxMsgs  int64
	MaxBytes int64
	// DuplicateWindow is how long the server remembers delivery ids
	// (default 10 min). Beyond it the handled bucket still stops a second
	// effect.
	DuplicateWindow time.Duration
	// KeyTTL is how long handled and content records are kept (default 7 d).
	KeyTTL time.Duration
	// MaxAckPending bounds the events handed out and not yet acknowledged
	// (default 1024).
	MaxAckPending int
	// AckWait is how long the server waits for an ack before redelivering
	// within one run (default 1 h; a restart redelivers at once).
	AckWait time.Duration
	// PublishTimeout bounds Put (default 5 s).
	PublishTimeout time.Duration
	// Replicas is the replication of the streams and buckets on a NATS
	// cluster (queue.replicas; default 1, 3 for a 3-server cluster).
	Replicas int
	// Auth and TLS reach an external server (URL; auth.go). Without Auth, a
	// URL off this machine is refused unless Insecure.
	Auth     Auth
	TLS      TLS
	Insecure bool
}

// Queue is the durable event pipeline. Close it to stop the embedded server.
type Queue struct {
	cfg Config
	ns  *server.Server
	nc  *nats.Conn
	js  jetstream.JetStream
	// cnc carries the consumer (deliveries and acks) apart from the
	// publishes on nc (see connect).
	cnc      *nats.Conn
	cjs      jetstream.JetStream
	events   jetstream.Stream
	dead     jetstream.Stream
	handled  jetstream.KeyValue
	content  jetstream.KeyValue
	subject  string
	deadSubj string
	durable  string

	// acks holds back the last acknowledgement (see Message.Ack).
	acks deferredAck
	// bufs are Put's message buffers (*[]byte).
	bufs sync.Pool
	// health is the embedded store's write health (nil for an external
	// server): storehealth.go.
	health *storeHealth
	// puts counts the Puts begun, putWait sums the time the finished ones
	// took (PutLoad).
	puts    atomic.Uint64
	putWait atomic.Uint64

	closeOnce sync.Once
}

// Errors callers branch on.
var (
	// ErrNotFound: no dead letter with that sequence.
	ErrNotFound = errors.New("queue: not found")
)

// Open starts (or connects to) the NATS server and makes sure the streams,
// buckets and consumer exist.
func Open(ctx context.Context, cfg Config) (*Queue, error) {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.DuplicateWindow <= 0 {
		cfg.DuplicateWindow = DefaultDuplicateWindow
	}
	if cfg.KeyTTL <= 0 {
		cfg.KeyTTL = DefaultKeyTTL
	}
	if cfg.MaxAckPending <= 0 {
		cfg.MaxAckPending = DefaultMaxAckPending
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = DefaultAckWait
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = DefaultPublishTimeout
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	q := &Queue{cfg: cfg, subject: lower(cfg.Prefix) + ".events", deadSubj: lower(cfg.Prefix) + ".dead", durable: cfg.Prefix + "_dispatch"}
	q.bufs.New = func() any { b := make([]byte, 0, 32<<10); return &b }
	if err := q.connect(); err != nil {
		q.Close()
		return nil, err
	}
	if err := q.provision(ctx); err != nil {
		q.Close()
		return nil, err
	}
	return q, nil
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func (q *Queue) connect() error {
	opts := []nats.Option{nats.Name("loopd"), nats.MaxReconnects(-1)}
	url := q.cfg.URL
	if url == "" {
		if q.cfg.StoreDir == "" {
			return errors.New("queue: StoreDir is required for the embedded server; set it to <state root>/queue, or set queue.url to an external NATS server")
		}
		dir, err := filepath.Abs(q.cfg.StoreDir)
		if err != nil {
			return fmt.Errorf("queue: store dir %s: %w", q.cfg.StoreDir, err)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("queue: create store dir %s: %w", dir, err)
		}
		ns, err := server.NewServer(&server.Options{
			ServerName: "loopd",
			JetStream:  true,
			StoreDir:   dir,
			DontListen: true,
			NoSigs:     true,
			NoLog:      true,
			MaxPayload: 8 << 20,
		})
		if err != nil {
			return fmt.Errorf("queue: embedded NATS server: %w", err)
		}
		q.health = newStoreHealth()
		ns.SetLogger(storeWatch{q.health}, false, false)
		ns.Start()
		if !ns.ReadyForConnections(30 * time.Second) {
			ns.Shutdown()
			return fmt.Errorf("queue: embedded NATS server (store %s) did not become ready in 30s; is another loopd using that directory?", dir)
		}
		q.ns = ns
		opts = append(opts, nats.InProcessServer(ns))
	}
	if url != "" {
		if err := q.cfg.checkRemote(); err != nil {
			return err
		}
		remote, err := q.cfg.remoteOptions()
		if err != nil {
			return err
		}
		opts = append(opts, remote...)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return fmt.Errorf("queue: connect to NATS %q: %w", clipURL(url), err)
	}
	q.nc = nc
	// Unanswered asynchronous publishes (Put stopped waiting) are
	// forgotten after the same bound.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(q.cfg.PublishTimeout))
	if err != nil {
		return fmt.Errorf("queue: JetStream: %w", err)
	}
	q.js = js
	// The consumer gets a connection of its own. On one connection the
	// server's read buffer grew for every 10-20 KB publish and shrank for
	// the small acks in between, a new buffer each time (loopd under
	// loadgen: 1.38 -> 1.29 GB allocated per 20000 webhooks, ~5% less CPU).
	cnc, err := nats.Connect(url, append(opts, nats.Name("loopd-dispatch"))...)
	if err != nil {
		return fmt.Errorf("queue: connect to NATS %q: %w", url, err)
	}
	q.cnc = cnc
	if q.cjs, err = jetstream.New(cnc); err != nil {
		return fmt.Errorf("queue: JetStream: %w", err)
	}
	return nil
}

func (q *Queue) provision(ctx context.Context) error {
	var err error
	q.events, err = q.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        q.cfg.Prefix + "_EVENTS",
		Description: "theloop: routed ingress events awaiting dispatch",
		// Events are published per work item (subjectFor); the bare
		// subject is what stores written before that hold.
		Subjects:   []string{q.subject, q.subject + ".>"},
		Retention:  jetstream.WorkQueuePolicy,
		Replicas:   q.cfg.Replicas,
		Storage:    jetstream.FileStorage,
		Discard:    jetstream.DiscardNew,
		MaxMsgs:    orUnlimited(q.cfg.MaxMsgs),
		MaxBytes:   orUnlimited(q.cfg.MaxBytes),
		Duplicates: q.cfg.DuplicateWindow,
	})
	if err != nil {
		return fmt.Errorf("queue: events stream: %w", err)
	}
	q.dead, err = q.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        q.cfg.Prefix + "_DEAD",
		Description: "theloop: events that failed dispatch MaxDeliver times",
		Subjects:    []string{q.deadSubj},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    q.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("queue: dead-letter stream: %w", err)
	}
	q.handled, err = q.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: q.cfg.Prefix + "_handled", Description: "delivery ids whose effects are durable",
		TTL: q.cfg.KeyTTL, Storage: jetstream.FileStorage, History: 1, Replicas: q.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("queue: handled bucket: %w", err)
	}
	q.content, err = q.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: q.cfg.Prefix + "_content", Description: "content identity → the delivery that claimed it",
		TTL: q.cfg.KeyTTL, Storage: jetstream.FileStorage, History: 1, Replicas: q.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("queue: content bucket: %w", err)
	}
	return nil
}

func orUnlimited(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// Close drains the connection and shuts the embedded server down. It is
// idempotent.
func (q *Queue) Close() {
	q.closeOnce.Do(func() {
		q.acks.flush()
		if q.cnc != nil {
			q.cnc.Close()
		}
		if q.nc != nil {
			q.nc.Close()
		}
		if q.ns != nil {
			q.ns.Shutdown()
			q.ns.WaitForShutdown()
		}
	})
}

// PutLoad reports how many Puts this Queue has begun, and how long the
// finished ones took in all (nanoseconds): the dispatcher reads from them
// the rate of webhooks arriving and how many wait, on average, for the
// store to keep them (dispatch.Config.BurstPause).
func (q *Queue) PutLoad() (puts, waitNanos uint64) {
	return q.puts.Load(), q.putWait.Load()
}

// Put implements ingress.Sink.
func (q *Queue) Put(ctx context.Context, ev *ingress.Event) error {
	q.puts.Add(1)
	start := time.Now()
	defer func() { q.putWait.Add(uint64(time.Since(start))) }()
	if ev == nil || ev.DeliveryID == "" {
		return errors.New("queue: an event without a delivery id cannot be kept (the queue deduplicates on it)")
	}
	if err := q.health.get(); err != nil {
		// The store refuses every write until it is reopened: answer now
		// rather than after PublishTimeout.
		return fmt.Errorf("queue: delivery %s: %v: %w", ev.DeliveryID, err, ingress.ErrUnavailable)
	}
	// The message buffer is reused once the publish is answered (the
	// client copies it into its write buffer, but keeps the message to
	// publish it again after a no-responders answer until then): a new
	// 10-20 KB buffer per webhook was the largest allocation on the path.
	bp := q.bufs.Get().(*[]byte)
	msg, err := encodeInto(q.subjectFor(ev), ev, *bp)
	if err != nil {
		q.bufs.Put(bp)
		return fmt.Errorf("queue: encode event %s: %w", ev.DeliveryID, err)
	}
	answered := false
	defer func() {
		if answered && cap(msg.Data) <= maxPooledMsg {
			*bp = msg.Data[:0]
			q.bufs.Put(bp)
		}
	}()
	// An asynchronous publish waited on at once: concurrent webhooks share
	// the connection's pipelined writes and its one reply subscription,
	// instead of a request with its own reply bookkeeping each (BenchmarkPut,
	// 8 publishers: 38-40 -> 29-31 µs CPU per event). The wait is the same: the
	// answer is the server's acknowledgement that the event is stored.
	f, err := q.js.PublishMsgAsync(msg, jetstream.WithMsgID(ev.DeliveryID))
	if err != nil {
		return fmt.Errorf("queue: publish delivery %s: %v: %w", ev.DeliveryID, err, ingress.ErrUnavailable)
	}
	timer := time.NewTimer(q.cfg.PublishTimeout)
	defer timer.Stop()
	select {
	case ack := <-f.Ok():
		answered = true
		if ack.Duplicate {
			return fmt.Errorf("queue: delivery %s: %w", ev.DeliveryID, ingress.ErrDuplicate)
		}
		return nil
	case err := <-f.Err():
		answered = true
		return fmt.Errorf("queue: publish delivery %s: %v: %w", ev.DeliveryID, err, ingress.ErrUnavailable)
	case <-ctx.Done():
		err = ctx.Err()
	case <-timer.C:
		err = context.DeadlineExceeded
	}
	return fmt.Errorf("queue: publish delivery %s: no acknowledgement: %v: %w", ev.DeliveryID, err, ingress.ErrUnavailable)
}

var _ ingress.Sink = (*Queue)(nil)

// Message is one event handed to the dispatcher.
type Message struct {
	Event *ingress.Event
	// Seq is the event's stream sequence.
	Seq uint64
	// NumDelivered counts deliveries of this message by the server (1 the
	// first time; more after a restart).
	NumDelivered uint64
	// DecodeErr is set when the stored bytes did not decode (Event is nil):
	// such a message can only be dead-lettered.
	DecodeErr error
	raw       jetstream.Msg
	// direct is set for a message read by sequence (NextFor, the cluster
	// path): acknowledging deletes it from the stream.
	direct *directMsg
	acks   *deferredAck
}

// Ack acknowledges the message. It does not wait for the server's
// confirmation: the dispatcher records a delivery as handled before it
// acks, so an ack lost in a crash costs a redelivery that is acknowledged
// without effect, never a second effect.
//
// The acknowledgement is held back until ackBatch more messages are
// acknowledged or AckDelay has passed without another (or the consumer
// stops, or the queue closes); then the held acks go out together, but the
// newest. A work-queue stream removes a message when it is acknowledged,
// and the file store deletes and re-creates its block file whenever the
// stream becomes empty: a dispatcher that keeps up with the webhooks
// emptied it once per event — a file unlinked, a file created and a
// tombstone written for every webhook, the largest single cost of loopd's
// webhook path. Holding the last ack keeps one handled message in the
// stream while events flow; sending the others in groups costs the
// connection one write, and the server one wake-up, per group rather than
// per event. An ack held back when the process dies is a lost ack: the
// redelivery finds the handled record (or is judged afresh, for an event
// dropped without effect), as above.
func (m *Message) Ack(ctx context.Context) error {
	if m.direct != nil {
		return m.direct.ack(ctx)
	}
	if m.acks == nil {
		return m.raw.Ack()
	}
	return m.acks.put(m.raw)
}

// AckDelay is how long the last acknowledgements are held back when no
// other follows them (see Message.Ack).
const AckDelay = 20 * time.Millisecond

// ackBatch is how many acknowledgements are held back at most.
const ackBatch = 32

// deferredAck holds back acknowledgements.
type deferredAck struct {
	mu    sync.Mutex
	held  []jetstream.Msg
	spare []jetstream.Msg
	timer *time.Timer
}

// put holds raw's ack; with ackBatch held, it sends all but raw's.
func (d *deferredAck) put(raw jetstream.Msg) error {
	d.mu.Lock()
	d.held = append(d.held, raw)
	var send []jetstream.Msg
	if len(d.held) > ackBatch {
		send = d.held[:len(d.held)-1]
		d.held = append(d.spare[:0], raw)
		d.spare = nil
	}
	if d.timer == nil {
		d.timer = time.AfterFunc(AckDelay, func() { d.flush() })
	} else {
		d.timer.Reset(AckDelay)
	}
	d.mu.Unlock()
	var err error
	for i, m := range send {
		if aerr := m.Ack(); aerr != nil && err == nil {
			err = aerr
		}
		send[i] = nil
	}
	if send != nil {
		d.mu.Lock()
		d.spare = send[:0]
		d.mu.Unlock()
	}
	return err
}

// flush sends the held acks, if any.
func (d *deferredAck) flush() {
	d.mu.Lock()
	send := d.held
	d.held = nil
	d.mu.Unlock()
	for _, m := range send {
		_ = m.Ack()
	}
}

// AckSync acknowledges the message and waits for the server to confirm
// (dead letters use it: they have no handled record).
func (m *Message) AckSync(ctx context.Context) error {
	if m.direct != nil {
		return m.direct.ack(ctx)
	}
	return m.raw.DoubleAck(ctx)
}

// Data returns the stored bytes.
func (m *Message) Data() []byte {
	if m.direct != nil {
		return m.direct.raw.Data
	}
	return m.raw.Data()
}

func (m *Message) headers() nats.Header {
	if m.direct != nil {
		return m.direct.raw.Header
	}
	return m.raw.Headers()
}

// Consumer hands out events in stream order. Stop it to stop fetching;
// messages already handed out stay unacknowledged until acked.
type Consumer struct {
	it   jetstream.MessagesContext
	acks *deferredAck
}

// Next blocks for the next message. It returns an error once the consumer
// is stopped.
func (c *Consumer) Next() (*Message, error) {
	raw, err := c.it.Next()
	if err != nil {
		return nil, err
	}
	m := &Message{raw: raw, acks: c.acks}
	if md, err := raw.Metadata(); err == nil {
		m.Seq = md.Sequence.Stream
		m.NumDelivered = md.NumDelivered
	}
	if ev, err := decode(raw.Headers(), raw.Data()); err != nil {
		m.DecodeErr = fmt.Errorf("stream sequence %d does not decode as an event: %w", m.Seq, err)
	} else {
		m.Event = ev
	}
	return m, nil
}

// Stop stops fetching and sends the ack held back, if any (messages
// acknowledged later are sent after AckDelay).
func (c *Consumer) Stop() {
	c.it.Stop()
	c.acks.flush()
}

// Consume (re)creates the durable consumer — so every unacknowledged event
// is delivered again from the start, in order — and returns an iterator.
// Only one Consumer per queue may be active.
func (q *Queue) Consume(ctx context.Context) (*Consumer, error) {
	events, err := q.cjs.Stream(ctx, q.cfg.Prefix+"_EVENTS")
	if err != nil {
		return nil, fmt.Errorf("queue: events stream: %w", err)
	}
	if err := events.DeleteConsumer(ctx, q.durable); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil, fmt.Errorf("queue: reset consumer: %w", err)
	}
	ccfg := jetstream.ConsumerConfig{
		Durable:       q.durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       q.cfg.AckWait,
		MaxAckPending: q.cfg.MaxAckPending,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	cons, err := events.CreateOrUpdateConsumer(ctx, ccfg)
	// The consumer just deleted may still be taking its store with it: the
	// server then answers "error creating store for consumer" (10012) for a
	// moment. Ask again, briefly.
	for attempt := 1; err != nil && attempt <= 5 && isAPIError(err, 10012); attempt++ {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("queue: consumer: %w", ctx.Err())
		case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
		}
		cons, err = events.CreateOrUpdateConsumer(ctx, ccfg)
	}
	if err != nil {
		return nil, fmt.Errorf("queue: consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(256))
	if err != nil {
		return nil, fmt.Errorf("queue: consume: %w", err)
	}
	return &Consumer{it: it, acks: &q.acks}, nil
}

func keyOf(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}

// Handled reports whether a delivery's effects are recorded as durable.
func (q *Queue) Handled(ctx context.Context, deliveryID string) (bool, error) {
	_, err := q.handled.Get(ctx, keyOf(deliveryID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("queue: read handled %s: %w", deliveryID, err)
	}
	return true, nil
}

// MarkHandled records that a delivery's effects are durable.
func (q *Queue) MarkHandled(ctx context.Context, deliveryID string) error {
	if _, err := q.handled.PutString(ctx, keyOf(deliveryID), deliveryID); err != nil {
		return fmt.Errorf("queue: record handled %s: %w", deliveryID, err)
	}
	return nil
}

// intentKey keeps intents apart from handled marks in the handled bucket.
func intentKey(key string) string { return keyOf("intent\x00" + key) }

// PutIntent records value as the intent of the step key (a delivery id and
// a step), in the handled bucket, before the effect it guards: once it
// returns, the intent is in JetStream's store and outlives the process. It
// is kept as long as handled marks are (Config.KeyTTL).
func (q *Queue) PutIntent(ctx context.Context, key string, value []byte) error {
	if _, err := q.handled.Put(ctx, intentKey(key), value); err != nil {
		return fmt.Errorf("queue: record the intent of %s: %w", key, err)
	}
	return nil
}

// Intent returns the intent recorded for key, if any.
func (q *Queue) Intent(ctx context.Context, key string) ([]byte, bool, error) {
	e, err := q.handled.Get(ctx, intentKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("queue: read the intent of %s: %w", key, err)
	}
	return e.Value(), true, nil
}

// ClaimContent claims a content identity for a delivery. It reports true
// when the delivery holds the claim (first claim, or the same delivery
// again after a redelivery) and false when another delivery claimed the
// same content first: that event is a duplicate and must have no effect.
func (q *Queue) ClaimContent(ctx context.Context, contentKey, deliveryID string) (bool, error) {
	k := keyOf(contentKey)
	_, err := q.content.Create(ctx, k, []byte(deliveryID))
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return false, fmt.Errorf("queue: claim content of %s: %w", deliveryID, err)
	}
	e, err := q.content.Get(ctx, k)
	if err != nil {
		return false, fmt.Errorf("queue: read content claim of %s: %w", deliveryID, err)
	}
	return string(e.Value()) == deliveryID, nil
}

// DeadLetter is an event that failed dispatch MaxDeliver times.
type DeadLetter struct {
	// Seq is the dead letter's sequence in the dead-letter stream (what
	// Replay takes).
	Seq        uint64
	DeliveryID string
	// OriginalSeq is the event's sequence in the events stream.
	OriginalSeq uint64
	Attempts    int
	Reason      string
	At          time.Time
	Event       *ingress.Event
}

// Kill moves a message to the dead-letter stream and acknowledges it.
func (q *Queue) Kill(ctx context.Context, m *Message, attempts int, reason string) error {
	msg := nats.NewMsg(q.deadSubj)
	msg.Data = m.Data()
	if off := m.headers().Get(HeaderPayloadOffset); off != "" {
		msg.Header.Set(HeaderPayloadOffset, off)
	}
	msg.Header.Set(HeaderDeadReason, truncate(reason, 2000))
	msg.Header.Set(HeaderDeadAttempts, strconv.Itoa(attempts))
	msg.Header.Set(HeaderDeadSeq, strconv.FormatUint(m.Seq, 10))
	// One dead letter per stream sequence, even if Kill runs twice.
	msg.Header.Set(jetstream.MsgIDHeader, "dead-"+strconv.FormatUint(m.Seq, 10))
	if _, err := q.js.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("queue: dead-letter stream sequence %d: %w", m.Seq, err)
	}
	return m.AckSync(ctx)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// DeadLetters lists the dead letters, oldest first.
func (q *Queue) DeadLetters(ctx context.Context) ([]DeadLetter, error) {
	info, err := q.dead.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue: dead-letter stream: %w", err)
	}
	var out []DeadLetter
	if info.State.Msgs == 0 {
		return nil, nil
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		raw, err := q.dead.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("queue: dead letter %d: %w", seq, err)
		}
		out = append(out, decodeDead(raw))
	}
	return out, nil
}

func decodeDead(raw *jetstream.RawStreamMsg) DeadLetter {
	d := DeadLetter{Seq: raw.Sequence, At: raw.Time, Reason: raw.Header.Get(HeaderDeadReason)}
	d.Attempts, _ = strconv.Atoi(raw.Header.Get(HeaderDeadAttempts))
	d.OriginalSeq, _ = strconv.ParseUint(raw.Header.Get(HeaderDeadSeq), 10, 64)
	if ev, err := decode(raw.Header, raw.Data); err == nil {
		d.Event = ev
		d.DeliveryID = ev.DeliveryID
	}
	return d
}

// Replay puts a dead letter back on the events stream (at the end) and
// removes it from the dead-letter stream. The event keeps its delivery id;
// the publish carries a distinct message id so the server's duplicate window
// does not swallow it.
func (q *Queue) Replay(ctx context.Context, seq uint64) error {
	raw, err := q.dead.GetMsg(ctx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("queue: dead letter %d: %w (list them with the dead-letter API)", seq, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("queue: dead letter %d: %w", seq, err)
	}
	subj := q.subject
	if ev, derr := decode(raw.Header, raw.Data); derr == nil {
		subj = q.subjectFor(ev)
	}
	msg := nats.NewMsg(subj)
	msg.Data = raw.Data
	if off := raw.Header.Get(HeaderPayloadOffset); off != "" {
		msg.Header.Set(HeaderPayloadOffset, off)
	}
	if _, err := q.js.PublishMsg(ctx, msg, jetstream.WithMsgID("replay-"+strconv.FormatUint(seq, 10))); err != nil {
		return fmt.Errorf("queue: replay dead letter %d: %w", seq, err)
	}
	if err := q.dead.DeleteMsg(ctx, seq); err != nil {
		return fmt.Errorf("queue: replayed dead letter %d but could not remove it: %w", seq, err)
	}
	return nil
}

// Pending reports how many events are kept and not yet acknowledged (the
// last ones handled, up to ackBatch, count until their held-back acks are
// sent: AckDelay after the last).
func (q *Queue) Pending(ctx context.Context) (uint64, error) {
	info, err := q.events.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("queue: events stream: %w", err)
	}
	return info.State.Msgs, nil
}

// Dispatcher lease. One dispatcher consumes a stream at a time: the lease
// is a key in a KV bucket whose entries expire after LeaseTTL unless
// renewed. A second loopd on the same (external) stream waits as a standby
// and takes over when the holder stops or dies. This is the single-node
// mode; with service.node set, several instances share the work instead,
// each work item owned through its own lease (package lease,
// dispatch.Shared).

// DefaultLeaseTTL is how long a lease outlives its last renewal.
const DefaultLeaseTTL = 15 * time.Second

const leaseKey = "dispatcher"

// ErrLeaseLost: the lease was taken over or could not be renewed.
var ErrLeaseLost = errors.New("queue: dispatcher lease lost")

// Lease is a held dispatcher lease. Lost is closed when it is lost.
type Lease struct {
	Lost    <-chan struct{}
	release func()
}

// Release gives the lease up (idempotent).
func (l *Lease) Release() { l.release() }

// AcquireLease blocks until this owner holds the dispatcher lease (or ctx
// ends), then renews it in the background every ttl/3.
func (q *Queue) AcquireLease(ctx context.Context, owner string, ttl time.Duration) (*Lease, error) {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	kv, err := q.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: q.cfg.Prefix + "_leases", Description: "which loopd dispatches", TTL: ttl, Storage: jetstream.FileStorage, History: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("queue: lease bucket: %w", err)
	}
	var rev uint64
	for {
		rev, err = kv.Create(ctx, leaseKey, []byte(owner))
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("queue: acquire lease: %w", err)
		}
		// Our own lease from a previous run of this owner: take it over.
		if e, gerr := kv.Get(ctx, leaseKey); gerr == nil && string(e.Value()) == owner {
			if rev, err = kv.Update(ctx, leaseKey, []byte(owner), e.Revision()); err == nil {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(ttl / 5):
		}
	}
	lost := make(chan struct{})
	stop := make(chan struct{})
	var once sync.Once
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(ttl / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				rctx, cancel := context.WithTimeout(context.Background(), ttl/3)
				r, err := kv.Update(rctx, leaseKey, []byte(owner), rev)
				cancel()
				if err != nil {
					close(lost)
					return
				}
				rev = r
			}
		}
	}()
	return &Lease{Lost: lost, release: func() {
		once.Do(func() {
			close(stop)
			<-done
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = kv.Delete(dctx, leaseKey, jetstream.LastRevision(rev))
		})
	}}, nil
}

// encode builds the stream message of ev in the split wire format (see
// HeaderPayloadOffset).
func encode(subject string, ev *ingress.Event) (*nats.Msg, error) {
	return encodeInto(subject, ev, nil)
}

// maxPooledMsg bounds the message buffers Put keeps for reuse.
const maxPooledMsg = 1 << 20

// encodeInto is encode writing the message data into buf's storage when it
// is large enough (Put reuses pooled buffers).
func encodeInto(subject string, ev *ingress.Event, buf []byte) (*nats.Msg, error) {
	head := *ev
	head.Payload = nil
	// The head is encoded first so the message is allocated once at its
	// exact size (a guessed capacity made the payload append grow it).
	hb, err := json.Marshal(&head)
	if err != nil {
		return nil, fmt.Errorf("ingress: encoding event %s: %w", ev.DeliveryID, err)
	}
	msg := nats.NewMsg(subject)
	if len(ev.Payload) == 0 {
		msg.Data = hb
		return msg, nil
	}
	msg.Header.Set(HeaderPayloadOffset, strconv.Itoa(len(hb)))
	n := len(hb) + len(ev.Payload)
	data := buf[:0]
	if cap(data) < n {
		data = make([]byte, n)
	}
	data = data[:n]
	copy(data[copy(data, hb):], ev.Payload)
	msg.Data = data
	return msg, nil
}

// decode reads a stream message written by encode (or a plain JSON event).
func decode(h nats.Header, data []byte) (*ingress.Event, error) {
	off := h.Get(HeaderPayloadOffset)
	if off == "" {
		return ingress.DecodeEvent(data)
	}
	n, err := strconv.Atoi(off)
	if err != nil || n < 0 || n > len(data) {
		return nil, fmt.Errorf("bad %s header %q for %d bytes", HeaderPayloadOffset, off, len(data))
	}
	ev, err := ingress.DecodeEvent(data[:n])
	if err != nil {
		return nil, err
	}
	if n < len(data) {
		ev.Payload = data[n:len(data):len(data)]
	}
	return ev, nil
}

// isAPIError reports whether err is a JetStream API error with the given
// error code.
func isAPIError(err error, code jetstream.ErrorCode) bool {
	var ae *jetstream.APIError
	return errors.As(err, &ae) && ae.ErrorCode == code
}
