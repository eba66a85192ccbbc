package daemon

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop"
)

// The notifier tells each of the four events once per interval per work
// item (dropped events once per interval in all, with the count held
// back), ignores everything else, and says nothing of an event no role
// is configured for.
func TestNotifierCoalesces(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	sent := make(chan notice, 16)
	cfg := loop.DaemonNotifications{Enabled: true, Events: map[string][]string{
		loop.NotifySessionDied: {"operator"}, loop.NotifyEventDroppedUnauthorized: {"operator"}, loop.NotifyDispatchFailed: {"operator"}}}
	n := newNotifier(cfg, clock, func(_ context.Context, nt notice) { sent <- nt })
	defer n.Close()
	ev := func(name string, fields ...graph.Field) { n.Emit(graph.LogEvent{Name: name, Fields: fields}) }
	item := graph.Field{Key: "work_item", Value: "github:octo/demo#4"}
	other := graph.Field{Key: "work_item", Value: "github:octo/demo#5"}
	drop := func(who string) {
		ev(ingress.EventDropped, item, graph.Field{Key: "reason", Value: string(ingress.DropUnauthorized)},
			graph.Field{Key: "gh_event", Value: "issue_comment"}, graph.Field{Key: "actor", Value: who})
	}
	next := func() notice {
		select {
		case nt := <-sent:
			return nt
		case <-time.After(30 * time.Second):
			t.Fatal("no notice")
			return notice{}
		}
	}

	ev("session.liveness_respawned", item)
	got := next()
	require.Equal(t, loop.NotifySessionDied, got.event)
	require.Equal(t, "github:octo/demo#4", got.item.String())
	ev("session.liveness_gave_up", item) // within the interval: held back
	ev("session.liveness_respawned", other)
	require.Equal(t, "github:octo/demo#5", next().item.String(), "another item is told at once")
	ev("dispatch.spawned", item) // no role for work-item-spawned
	ev("graph.advanced", item)
	ev(ingress.EventDropped, item, graph.Field{Key: "reason", Value: string(ingress.DropUnauthorized)}, graph.Field{Key: "gh_event", Value: "issues"})

	drop("mallory")
	got = next()
	require.Equal(t, loop.NotifyEventDroppedUnauthorized, got.event)
	require.Equal(t, "a comment from @mallory, who is not authorized, was dropped", got.detail)
	drop("mallory")
	drop("<script>")
	mu.Lock()
	now = now.Add(notifyInterval)
	mu.Unlock()
	drop("x y")
	got = next()
	require.Equal(t, 3, got.count, "the held-back drops are counted into the next notice")
	require.Equal(t, "a comment from someone not authorized was dropped", got.detail, "a field that is not a login is not repeated")
	ev("session.liveness_gave_up", item)
	got = next()
	require.Equal(t, 2, got.count)
	require.Contains(t, n.text(got, slackMention), "(2 times since the last notice). Roles: operator")
	select {
	case nt := <-sent:
		t.Fatalf("unexpected notice %+v", nt)
	default:
	}
	require.Nil(t, newNotifier(loop.DaemonNotifications{Enabled: false, Events: cfg.Events}, clock, nil), "disabled: no worker")
	var none *notifier
	none.Emit(graph.LogEvent{Name: "dispatch.failed"})
	none.Close()
}
