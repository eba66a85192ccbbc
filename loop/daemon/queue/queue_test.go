package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
)

// queue.url: the same code against an external NATS server (here a real
// nats-server listening on a random loopback port).
func TestExternalServerSameCode(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	require.True(t, ns.ReadyForConnections(10*time.Second))

	ctx := context.Background()
	q, err := queue.Open(ctx, queue.Config{URL: ns.ClientURL()})
	require.NoError(t, err)
	defer q.Close()
	ev := &ingress.Event{Event: "issues", Action: "labeled", DeliveryID: "ext-1", Repo: "o/r", Source: ingress.SourceWebhook}
	require.NoError(t, q.Put(ctx, ev))
	require.ErrorIs(t, q.Put(ctx, ev), ingress.ErrDuplicate)
	cons, err := q.Consume(ctx)
	require.NoError(t, err)
	defer cons.Stop()
	m, err := cons.Next()
	require.NoError(t, err)
	require.Equal(t, "ext-1", m.Event.DeliveryID)
	require.NoError(t, m.Ack(ctx))
}

// A server that is gone makes Put fail with ErrUnavailable (the receiver
// answers 503 and GitHub retries), never hang or claim success.
func TestPutUnavailableWhenTheServerIsDown(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	require.NoError(t, err)
	ns.Start()
	require.True(t, ns.ReadyForConnections(10*time.Second))
	ctx := context.Background()
	q, err := queue.Open(ctx, queue.Config{URL: ns.ClientURL(), PublishTimeout: 500 * time.Millisecond})
	require.NoError(t, err)
	defer q.Close()
	ns.Shutdown()
	ns.WaitForShutdown()
	err = q.Put(ctx, &ingress.Event{Event: "issues", DeliveryID: "down-1"})
	require.Error(t, err)
	require.True(t, errors.Is(err, ingress.ErrUnavailable), "%v", err)
}

// A full stream refuses new events (DiscardNew): nothing kept is dropped.
func TestPutUnavailableWhenTheStreamIsFull(t *testing.T) {
	ctx := context.Background()
	q, err := queue.Open(ctx, queue.Config{StoreDir: t.TempDir(), MaxMsgs: 2})
	require.NoError(t, err)
	defer q.Close()
	for _, id := range []string{"a", "b"} {
		require.NoError(t, q.Put(ctx, &ingress.Event{Event: "issues", DeliveryID: id}))
	}
	err = q.Put(ctx, &ingress.Event{Event: "issues", DeliveryID: "c"})
	require.ErrorIs(t, err, ingress.ErrUnavailable)
	n, err := q.Pending(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(2), n)
}

func TestPutRefusesAnEventWithoutDeliveryID(t *testing.T) {
	q, err := queue.Open(context.Background(), queue.Config{StoreDir: t.TempDir()})
	require.NoError(t, err)
	defer q.Close()
	require.Error(t, q.Put(context.Background(), &ingress.Event{Event: "issues"}))
}
