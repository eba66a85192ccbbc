package queue

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/theloop-dev/theloop/ingress"
)

// Per-work-item subjects (the cluster path, package dispatch's Shared).
//
// Put publishes each event on <prefix>.events.i.<hash of its first work
// item>, or on <prefix>.events.x when it names none, so the stream keeps
// every work item's events apart while storing them in one stream. A
// single loopd consumes the whole stream with one durable consumer
// (Consume). Several loopd share it differently: no consumer at all; the
// node owning a work item (a lease, package lease) reads that item's
// subject in sequence order (NextFor) and deletes each event after its
// effects are recorded (Message.Ack), and every node learns which items
// have events waiting from the stream's per-subject counts (Slots). Order
// per item and at-least-once survive a change of owner because the events
// stay in the replicated stream until their owner deletes them.

// NoItemSlot is the slot of events that name no work item.
const NoItemSlot = "x"

// ItemRef is the work item an event is keyed on ("" when none): the first
// one it names, as dispatch.DefaultKey.
func ItemRef(ev *ingress.Event) string {
	if len(ev.WorkItems) == 0 {
		return ""
	}
	return ev.WorkItems[0].String()
}

// SlotOf names the per-item subject token of a work item ref.
func SlotOf(ref string) string {
	if ref == "" {
		return NoItemSlot
	}
	sum := sha256.Sum256([]byte(ref))
	return "i." + hex.EncodeToString(sum[:12])
}

// subjectFor is the subject ev is published on.
func (q *Queue) subjectFor(ev *ingress.Event) string {
	return q.subject + "." + SlotOf(ItemRef(ev))
}

// LegacySlot is the slot of events published on the bare events subject
// (stores written before per-item subjects).
const LegacySlot = "-"

// slotSubject is the subject of a slot.
func (q *Queue) slotSubject(slot string) string {
	if slot == LegacySlot {
		return q.subject
	}
	return q.subject + "." + slot
}

// Slots lists the slots with events waiting and how many each holds
// (one stream-info request: cheap while the backlog is small, as it is
// when the nodes keep up).
func (q *Queue) Slots(ctx context.Context) (map[string]uint64, error) {
	info, err := q.events.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		return nil, fmt.Errorf("queue: events stream: %w", err)
	}
	out := make(map[string]uint64, len(info.State.Subjects))
	prefix := q.subject + "."
	for subj, n := range info.State.Subjects {
		switch {
		case subj == q.subject:
			out[LegacySlot] += n
		case strings.HasPrefix(subj, prefix):
			out[subj[len(prefix):]] += n
		}
	}
	return out, nil
}

// SortedSlots is Slots' keys in a stable order.
func SortedSlots(m map[string]uint64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ErrEmpty: the slot has no event at or after the sequence asked for.
var ErrEmpty = errors.New("queue: no event waiting")

// NextFor reads the slot's first event at or after sequence from (its
// oldest waiting event when from is 0). Acknowledging the message deletes
// it from the stream. Only the slot's owner may call it; the stream
// keeps the event until then, whoever dies.
func (q *Queue) NextFor(ctx context.Context, slot string, from uint64) (*Message, error) {
	raw, err := q.events.GetMsg(ctx, max(from, 1), jetstream.WithGetMsgSubject(q.slotSubject(slot)))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, ErrEmpty
	}
	if err != nil {
		return nil, fmt.Errorf("queue: read slot %s: %w", slot, err)
	}
	m := &Message{Seq: raw.Sequence, NumDelivered: 1, direct: &directMsg{q: q, raw: raw}}
	if ev, err := decode(raw.Header, raw.Data); err != nil {
		m.DecodeErr = fmt.Errorf("stream sequence %d does not decode as an event: %w", m.Seq, err)
	} else {
		m.Event = ev
	}
	return m, nil
}

type directMsg struct {
	q   *Queue
	raw *jetstream.RawStreamMsg
}

func (d *directMsg) ack(ctx context.Context) error {
	err := d.q.events.DeleteMsg(ctx, d.raw.Sequence)
	if err != nil && strings.Contains(err.Error(), "no message found") {
		return nil // deleted already (a redelivery after a takeover)
	}
	return err
}

// JetStream is the queue's JetStream context (for package lease and the
// items registry, which live on the same connection).
func (q *Queue) JetStream() jetstream.JetStream { return q.js }

// Prefix is the names' prefix (Config.Prefix).
func (q *Queue) Prefix() string { return q.cfg.Prefix }

// Replicas is the replication of the queue's streams and buckets.
func (q *Queue) Replicas() int { return q.cfg.Replicas }

// DispatcherHolder names the single-node dispatcher holding the queue's
// dispatcher lease ("" when none): a node sharing the queue must not run
// beside one.
func (q *Queue) DispatcherHolder(ctx context.Context) (string, error) {
	kv, err := q.js.KeyValue(ctx, q.cfg.Prefix+"_leases")
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("queue: lease bucket: %w", err)
	}
	e, err := kv.Get(ctx, leaseKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("queue: dispatcher lease: %w", err)
	}
	return string(e.Value()), nil
}

// SharedOwners lists the nodes owning work items of the queue through the
// items registry of dispatch.Shared (none when the queue is not shared): a
// single-node dispatcher must not run beside them.
func (q *Queue) SharedOwners(ctx context.Context) ([]string, error) {
	kv, err := q.js.KeyValue(ctx, q.cfg.Prefix+"_item_leases")
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("queue: item lease bucket: %w", err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue: item leases: %w", err)
	}
	seen := map[string]bool{}
	var out []string
	for k := range lister.Keys() {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		if n := string(e.Value()); !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}
