package daemon_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// TestAttentionOverTheControlSocketWithCapacity: the real daemon as a
// cluster node of capacity one (its embedded NATS, real tmux and git).
// The first labeled issue gets the session and waits at its first gate;
// the second is declined for capacity. GET /api/v1/attention over the
// control socket lists both — the gate, and the capacity refusal naming
// the node, since when — and the event log says
// dispatch.capacity_declined. When the first session is stopped the node
// takes the second item, and the refusal leaves the list
// (dispatch.capacity_cleared).
func TestAttentionOverTheControlSocketWithCapacity(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) {
		c.Settings.Service.Node, c.Settings.Service.MaxSessions, c.Settings.Service.LeaseTTL = "solo", 1, 2*time.Second
	})
	ctx := context.Background()
	cl := api.NewSocketClient(w.d.ControlSocket())
	n1 := w.openLabeled()
	w.eventually("the first session", func() bool { return w.spawns() == 1 })
	ref1 := w.item(n1).String()
	n2 := w.openLabeled()
	ref2 := w.item(n2).String()

	find := func(items []api.AttentionItem, ref, kind string) *api.AttentionItem {
		i := slices.IndexFunc(items, func(it api.AttentionItem) bool { return it.Ref == ref && it.Kind == kind })
		if i < 0 {
			return nil
		}
		return &items[i]
	}
	var items []api.AttentionItem
	w.eventually("the gate and the capacity refusal in the list", func() bool {
		var err error
		items, err = cl.Attention(ctx)
		require.NoError(t, err)
		return find(items, ref1, "gate") != nil && find(items, ref2, "capacity") != nil
	})
	gate, capa := find(items, ref1, "gate"), find(items, ref2, "capacity")
	require.Contains(t, gate.Why, "waits for an authorized person's decision")
	require.Contains(t, capa.Why, "cluster node solo is at capacity (service.maxSessions 1)")
	require.False(t, capa.Since.IsZero(), "since when")
	require.GreaterOrEqual(t, capa.WaitingSeconds, 0.0)
	for i := 1; i < len(items); i++ {
		require.False(t, items[i].Since.Before(items[i-1].Since), "oldest first: %+v", items)
	}
	only, err := cl.Attention(ctx, "capacity")
	require.NoError(t, err)
	require.Len(t, only, 1)
	require.Equal(t, ref2, only[0].Ref)
	require.Equal(t, 1, w.count("dispatch.capacity_declined"), "one record however many scans decline it")
	require.Equal(t, 1, w.spawns(), "the full node did not take the second item")

	// The first session stops: the node has room, takes the second item,
	// and the refusal ends.
	require.NoError(t, cl.Do(ctx, "POST", "/sessions/control", nil, api.ControlRequest{Ref: ref1, Verb: "stop"}, nil))
	w.eventually("the second session", func() bool { return w.spawns() == 2 })
	w.eventually("the refusal cleared", func() bool {
		items, err := cl.Attention(ctx, "capacity")
		require.NoError(t, err)
		return len(items) == 0 && w.count("dispatch.capacity_cleared") == 1
	})
}
