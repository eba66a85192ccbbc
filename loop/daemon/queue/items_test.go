package queue_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/internal/natstest"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
	"github.com/theloop-dev/theloop/workitem"
)

// TestSlotsAndNextFor: events are kept per work item; a slot is read in
// order by sequence, a large payload intact, and acknowledging deletes.
func TestSlotsAndNextFor(t *testing.T) {
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(q.Close)
	slotsAndNextFor(t, q)
}

// TestSlotsAndNextForOnACluster: the same over TCP on a 3-server cluster
// with 3 replicas (a 3 MB event read back by sequence).
func TestSlotsAndNextForOnACluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-server NATS cluster")
	}
	urls := natstest.Cluster(t, 3)
	var q *queue.Queue
	var err error
	require.Eventually(t, func() bool {
		q, err = queue.Open(context.Background(), queue.Config{URL: strings.Join(urls, ","), Replicas: 3})
		return err == nil
	}, 60*time.Second, 250*time.Millisecond, "open: %v", err)
	t.Cleanup(q.Close)
	slotsAndNextFor(t, q)
}

func slotsAndNextFor(t *testing.T, q *queue.Queue) {
	ctx := context.Background()
	ref := workitem.Ref{Provider: "github", Owner: "o", Repo: "r", Number: 7}
	big := bytes.Repeat([]byte("x"), 3<<20)
	for i, id := range []string{"d1", "d2"} {
		ev := &ingress.Event{Event: "issue_comment", DeliveryID: id, WorkItems: []workitem.Ref{ref}, Source: ingress.SourceWebhook}
		if i == 0 {
			ev.Payload = append([]byte(`{"a":"`), append(big, `"}`...)...)
		}
		require.NoError(t, q.Put(ctx, ev))
	}
	require.NoError(t, q.Put(ctx, &ingress.Event{Event: "ping", DeliveryID: "d3", Source: ingress.SourceWebhook}))

	slots, err := q.Slots(ctx)
	require.NoError(t, err)
	slot := queue.SlotOf(ref.String())
	require.Equal(t, map[string]uint64{slot: 2, queue.NoItemSlot: 1}, slots)

	m, err := q.NextFor(ctx, slot, 0)
	require.NoError(t, err)
	require.Equal(t, "d1", m.Event.DeliveryID)
	require.Len(t, m.Event.Payload, len(big)+8)
	m2, err := q.NextFor(ctx, slot, m.Seq+1)
	require.NoError(t, err)
	require.Equal(t, "d2", m2.Event.DeliveryID)
	require.NoError(t, m.Ack(ctx))
	require.NoError(t, m.Ack(ctx), "acknowledging twice is harmless")
	m, err = q.NextFor(ctx, slot, 0)
	require.NoError(t, err)
	require.Equal(t, "d2", m.Event.DeliveryID, "the oldest waiting event first")
	require.NoError(t, m.Ack(ctx))
	_, err = q.NextFor(ctx, slot, 0)
	require.ErrorIs(t, err, queue.ErrEmpty)
}
