package graph_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
)

// provisionalStore records which save each call was, and what the state
// held of unlogged events when it was saved provisionally.
type provisionalStore struct {
	*graphtest.Store
	mu    sync.Mutex
	calls []string
}

func (s *provisionalStore) Save(ctx context.Context, id string, st *graph.State) error {
	s.mu.Lock()
	s.calls = append(s.calls, "save")
	s.mu.Unlock()
	return s.Store.Save(ctx, id, st)
}

func (s *provisionalStore) SaveProvisional(ctx context.Context, id string, st *graph.State) error {
	s.mu.Lock()
	if len(st.Unlogged) > 0 {
		s.calls = append(s.calls, "provisional-with-events") // never allowed
	} else {
		s.calls = append(s.calls, "provisional")
	}
	s.mu.Unlock()
	return s.Store.Save(ctx, id, st)
}

// TestOnlyLosableStatesAreSavedProvisionally: a blocked claim that
// escalates nothing is one provisional save (the claim and the attempt
// together), its graph.blocked event emitted after it; the same block
// again escalates — a transition — which is saved with Save, journaled,
// before its event, and the journal then cleared provisionally. A store
// without SaveProvisional gets Save throughout.
func TestOnlyLosableStatesAreSavedProvisionally(t *testing.T) {
	reg := graphtest.Registry(map[string]graph.Hook{"no": graphtest.Returning(graph.Block(graph.Finding("not yet", "")))})
	g := graphtest.NewGraph("p").
		Node(graph.NodeSpec{ID: "a", Exit: graphtest.Hooks("no")}).
		Node(graph.NodeSpec{ID: "b", Terminal: true}).Edge("a", "pass", "b").MustCompile(reg)
	ctx := context.Background()

	store := &provisionalStore{Store: graphtest.NewStore()}
	sink := &graphtest.Sink{}
	rt, err := graph.New(g, graph.Options{Store: store, Items: graphtest.NewItems(), Sink: sink})
	require.NoError(t, err)
	_, err = rt.Start(ctx, "w")
	require.NoError(t, err)
	attempts := store.State("w").Record("a").Attempts
	store.calls = nil
	claim, err := rt.Complete(ctx, "w", "", "@agent")
	require.NoError(t, err)
	require.Equal(t, graph.StatusBlock, claim.Status)
	require.Equal(t, []string{"provisional"}, store.calls, "one save per blocked claim")
	require.Equal(t, 1, sink.Count("graph.blocked"))
	st := store.State("w")
	require.Empty(t, st.Unlogged, "a block's event is never journaled")
	_, claimed := st.Completions.Get("a")
	require.True(t, claimed, "the claim is recorded")
	require.Equal(t, attempts+1, st.Record("a").Attempts, "the attempt is counted")

	store.calls = nil
	claim, err = rt.Complete(ctx, "w", "", "@agent")
	require.NoError(t, err)
	require.Equal(t, graph.StepEscalated, claim.Status, "the same block twice escalates")
	require.Equal(t, []string{"save", "provisional"}, store.calls, "the escalation saved durably, then the journal cleared")
	require.Equal(t, 1, sink.Count("graph.escalated"))
	require.Empty(t, store.State("w").Unlogged, "the journal is cleared once its events are out")

	plain := graphtest.NewStore()
	rt, err = graph.New(g, graph.Options{Store: plain, Items: graphtest.NewItems(), Sink: &graphtest.Sink{}})
	require.NoError(t, err)
	_, err = rt.Start(ctx, "w")
	require.NoError(t, err)
	claim, err = rt.Complete(ctx, "w", "", "@agent")
	require.NoError(t, err)
	require.Equal(t, graph.StatusBlock, claim.Status)
	require.Empty(t, plain.State("w").Unlogged)
}

// TestRepark: a node waiting for a human, advanced again by an event that
// decides nothing, is parked already: one provisional save, the wait keeps
// the time it began, and its graph.parked event is emitted after the save.
func TestRepark(t *testing.T) {
	reg := graphtest.Registry(map[string]graph.Hook{"human": graphtest.Returning(graph.Wait("awaiting approval"))})
	g := graphtest.NewGraph("p").
		Node(graph.NodeSpec{ID: "a", Exit: graphtest.Hooks("human")}).
		Node(graph.NodeSpec{ID: "b", Terminal: true}).Edge("a", "pass", "b").MustCompile(reg)
	ctx := context.Background()
	store := &provisionalStore{Store: graphtest.NewStore()}
	sink := &graphtest.Sink{}
	clk := &graphtest.Clock{}
	rt, err := graph.New(g, graph.Options{Store: store, Items: graphtest.NewItems(), Sink: sink, Clock: clk})
	require.NoError(t, err)
	_, err = rt.Start(ctx, "w")
	require.NoError(t, err)
	rep, err := rt.Advance(ctx, "w", &graph.Event{})
	require.NoError(t, err)
	require.Equal(t, graph.StatusWait, rep.Status)
	first := store.State("w").Parked
	require.NotNil(t, first)
	parked := sink.Count("graph.parked")

	clk.Advance(time.Hour)
	store.calls = nil
	rep, err = rt.Advance(ctx, "w", &graph.Event{})
	require.NoError(t, err)
	require.Equal(t, graph.StatusWait, rep.Status)
	require.Equal(t, []string{"provisional"}, store.calls, "a re-park is one provisional save")
	require.Equal(t, first.Since, store.State("w").Parked.Since, "the wait keeps the time it began")
	require.Equal(t, parked+1, sink.Count("graph.parked"))
	require.Empty(t, store.State("w").Unlogged)
}
