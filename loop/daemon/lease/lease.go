// Package lease gives each work item exactly one owner among several loopd
// nodes sharing a NATS cluster (docs/decisions.md §15): a lease is a key
// in a JetStream KV bucket, taken with Create (only if absent), renewed
// with Update on the revision the holder last wrote (compare-and-swap), and
// lapsing when the bucket's TTL passes without a renewal — so a dead node's
// items become free and another node takes them over. A node holds at most
// Config.MaxItems leases: a full node declines new items.
//
// Safety rests on time: a holder treats its lease as valid only until its
// last successful renewal + TTL − Margin, while the server forgets the key
// no earlier than that renewal + TTL. Work done only while Valid never
// overlaps another node's.
//
// Used by dispatch.Shared (several loopd sharing one queue): the lease key
// is the work item's slot, its per-item subject token in the queue.
package lease

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Errors callers branch on.
var (
	// ErrHeld: another node owns the item.
	ErrHeld = errors.New("lease: held by another node")
	// ErrFull: this node holds MaxItems leases already.
	ErrFull = errors.New("lease: node at capacity")
	// ErrLost: the lease lapsed or was taken (renewal failed).
	ErrLost = errors.New("lease: lost")
)

// Config configures a Manager.
type Config struct {
	// Bucket is the KV bucket (default THELOOP_item_leases).
	Bucket string
	// Node names this node (required; recorded as the owner).
	Node string
	// TTL is how long a lease outlives its last renewal (default 15 s).
	TTL time.Duration
	// Margin is how long before TTL a holder stops trusting its lease
	// (default TTL/5).
	Margin time.Duration
	// MaxItems caps the leases this node holds (0: no cap).
	MaxItems int
	// Replicas is the bucket's replication in a cluster (default 1).
	Replicas int
	// Now is the clock (required). It races the bucket's TTL, which NATS
	// keeps on real time.
	Now func() time.Time
}

// Manager holds this node's leases and renews them. Close stops renewal.
type Manager struct {
	cfg Config
	kv  jetstream.KeyValue

	mu   sync.Mutex
	held map[string]*Lease
	// seen is the bucket as watched: key → when this node last saw it
	// written (absent once deleted). A key not written for a TTL has
	// lapsed (holders renew every TTL/3).
	seen    map[string]seenKey
	watcher jetstream.KeyWatcher

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Lease is one held work item.
type Lease struct {
	Item string
	m    *Manager

	mu      sync.Mutex
	rev     uint64
	renewed time.Time
	lost    bool
}

// Open creates (or binds) the bucket and starts the renewal loop.
func Open(ctx context.Context, js jetstream.JetStream, cfg Config) (*Manager, error) {
	if cfg.Node == "" {
		return nil, errors.New("lease: Config.Node is required (a name unique to this loopd)")
	}
	if cfg.Bucket == "" {
		cfg.Bucket = "THELOOP_item_leases"
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 15 * time.Second
	}
	if cfg.Margin <= 0 {
		cfg.Margin = cfg.TTL / 5
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.Now == nil {
		return nil, errors.New("lease: no clock (Config.Now)")
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket: cfg.Bucket, Description: "theloop: which loopd owns each work item",
		TTL: cfg.TTL, History: 1, Storage: jetstream.FileStorage, Replicas: cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("lease: bucket %s: %w", cfg.Bucket, err)
	}
	m := &Manager{cfg: cfg, kv: kv, held: map[string]*Lease{}, seen: map[string]seenKey{}, stop: make(chan struct{}), done: make(chan struct{})}
	w, err := kv.WatchAll(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("lease: watch bucket %s: %w", cfg.Bucket, err)
	}
	m.watcher = w
	go m.watch()
	go m.renewLoop()
	return m, nil
}

// key encodes a work item ref as a valid KV key.
func key(item string) string { return "i." + base64.RawURLEncoding.EncodeToString([]byte(item)) }

// Acquire takes the item's lease: ErrHeld when another node owns it,
// ErrFull at capacity. Acquiring an item this node holds returns its lease.
func (m *Manager) Acquire(ctx context.Context, item string) (*Lease, error) {
	m.mu.Lock()
	if l, ok := m.held[item]; ok && l.Valid() {
		m.mu.Unlock()
		return l, nil
	}
	if m.cfg.MaxItems > 0 && len(m.held) >= m.cfg.MaxItems {
		m.mu.Unlock()
		return nil, ErrFull
	}
	m.mu.Unlock()
	now := m.cfg.Now()
	rev, err := m.kv.Create(ctx, key(item), []byte(m.cfg.Node))
	if errors.Is(err, jetstream.ErrKeyExists) {
		// Our own lease from before a restart may be re-taken at once.
		e, gerr := m.kv.Get(ctx, key(item))
		if gerr == nil && string(e.Value()) == m.cfg.Node {
			rev, err = m.kv.Update(ctx, key(item), []byte(m.cfg.Node), e.Revision())
		}
		if err != nil {
			return nil, ErrHeld
		}
	}
	if err != nil {
		return nil, fmt.Errorf("lease: acquire %s: %w", item, err)
	}
	l := &Lease{Item: item, m: m, rev: rev, renewed: now}
	m.mu.Lock()
	m.held[item] = l
	m.mu.Unlock()
	return l, nil
}

// Owner reports the node owning item ("" when free).
func (m *Manager) Owner(ctx context.Context, item string) (string, error) {
	e, err := m.kv.Get(ctx, key(item))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return string(e.Value()), nil
}

// Held counts the leases this node holds.
func (m *Manager) Held() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.held)
}

// Items lists the items this node holds, sorted.
func (m *Manager) Items() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.held))
	for it := range m.held {
		out = append(out, it)
	}
	sort.Strings(out)
	return out
}

// Valid reports whether the holder may still act on the item: renewed
// within TTL − Margin and not lost.
func (l *Lease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.lost && l.m.cfg.Now().Before(l.renewed.Add(l.m.cfg.TTL-l.m.cfg.Margin))
}

// Deadline is when the holder must stop acting on the item unless it
// renews first: last renewal + TTL − Margin (the zero time once lost).
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost {
		return time.Time{}
	}
	return l.renewed.Add(l.m.cfg.TTL - l.m.cfg.Margin)
}

// Revision is the KV revision the holder last wrote (it changes on every
// renewal; the ownership log records the one a holder started with).
func (l *Lease) Revision() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev
}

// TTL is the manager's lease TTL.
func (m *Manager) TTL() time.Duration { return m.cfg.TTL }

// Node is the manager's node name.
func (m *Manager) Node() string { return m.cfg.Node }

// Renew extends the lease (compare-and-swap on the last revision).
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	rev, lost := l.rev, l.lost
	l.mu.Unlock()
	if lost {
		return ErrLost
	}
	now := l.m.cfg.Now()
	nrev, err := l.m.kv.Update(ctx, key(l.Item), []byte(l.m.cfg.Node), rev)
	l.mu.Lock()
	if err != nil {
		// Lost, but it counts towards MaxItems until its holder has
		// stopped working on it and calls Release.
		l.lost = true
		l.mu.Unlock()
		return fmt.Errorf("%w: %s: %v", ErrLost, l.Item, err)
	}
	l.rev, l.renewed = nrev, now
	l.mu.Unlock()
	return nil
}

// Release gives the item up (delete on the last revision); idempotent.
// The holder calls it for a lost lease too, once it stopped working on the
// item: only then does the lease stop counting towards MaxItems.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.lost {
		l.mu.Unlock()
		l.m.forget(l)
		return nil
	}
	l.lost = true
	rev := l.rev
	l.mu.Unlock()
	l.m.forget(l)
	if err := l.m.kv.Delete(ctx, key(l.Item), jetstream.LastRevision(rev)); err != nil {
		return fmt.Errorf("lease: release %s: %w", l.Item, err)
	}
	return nil
}

func (m *Manager) forget(l *Lease) {
	m.mu.Lock()
	if m.held[l.Item] == l {
		delete(m.held, l.Item)
	}
	m.mu.Unlock()
}

// watch keeps seen up to date.
func (m *Manager) watch() {
	for e := range m.watcher.Updates() {
		if e == nil {
			continue // the end of the initial values
		}
		m.mu.Lock()
		if e.Operation() == jetstream.KeyValuePut {
			m.seen[e.Key()] = seenKey{at: m.cfg.Now(), owner: string(e.Value())}
		} else {
			delete(m.seen, e.Key())
		}
		m.mu.Unlock()
	}
}

// MaybeFree reports whether the item's lease looks free from the watched
// bucket: never written, deleted, not renewed for a TTL, or this node's
// own (from before a restart). It is a hint
// that saves a failed Acquire (a KV write) per item another node holds;
// Acquire decides.
func (m *Manager) MaybeFree(item string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.seen[key(item)]
	return !ok || k.owner == m.cfg.Node || m.cfg.Now().Sub(k.at) >= m.cfg.TTL
}

type seenKey struct {
	at    time.Time
	owner string
}

// renewLoop renews every held lease every TTL/3.
func (m *Manager) renewLoop() {
	defer close(m.done)
	t := time.NewTicker(m.cfg.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.mu.Lock()
		ls := make([]*Lease, 0, len(m.held))
		for _, l := range m.held {
			ls = append(ls, l)
		}
		m.mu.Unlock()
		for _, l := range ls {
			ctx, cancel := context.WithTimeout(context.Background(), m.cfg.TTL/3)
			_ = l.Renew(ctx)
			cancel()
		}
	}
}

// Close stops renewing (the leases lapse after TTL; Release them first to
// hand items over at once).
func (m *Manager) Close() {
	m.once.Do(func() {
		close(m.stop)
		_ = m.watcher.Stop()
	})
	<-m.done
}
