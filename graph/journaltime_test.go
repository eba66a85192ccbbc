package graph_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
)

// An event journaled with its transition reaches the sink with the time its
// journal entry records, read back from the entry's text: UTC, at full
// precision, with no monotonic reading — whatever zone the clock is in, and
// whether the runtime reuses the instant it formatted or parses the text.
func TestJournaledEventTimeIsTheEntrysTime(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(2026, 12, 2, 0, 30, 15, 123456789, time.FixedZone("east", 5*3600+1800)),
		time.Date(2026, 12, 2, 0, 30, 15, 0, time.UTC),
		time.Date(2026, 12, 2, 0, 30, 15, 500_000_000, time.FixedZone("west", -7*3600)),
	} {
		reg := graphtest.Registry(map[string]graph.Hook{"ok": graphtest.Returning(graph.Pass(nil))})
		g := graphtest.NewGraph("journal-time").
			Node(graph.NodeSpec{ID: "a", Exit: graphtest.Hooks("ok")}).
			Node(graph.NodeSpec{ID: "b", Exit: graphtest.Hooks("ok")}).
			Edge("a", "pass", "b").Edge("b", "pass", "a").MustCompile(reg)
		sink := &graphtest.Sink{}
		rt, err := graph.New(g, graph.Options{Store: graphtest.NewStore(), Items: graphtest.NewItems(), Sink: sink, Clock: graphtest.NewClock(at)})
		require.NoError(t, err)
		ctx := context.Background()
		_, err = rt.Start(ctx, "w")
		require.NoError(t, err)
		_, err = rt.Advance(ctx, "w", nil)
		require.NoError(t, err)

		want, err := time.Parse(time.RFC3339Nano, at.UTC().Format(time.RFC3339Nano))
		require.NoError(t, err)
		var seen int
		for _, e := range sink.Events() {
			if e.Name != graph.EventStarted && e.Name != graph.EventAdvanced {
				continue
			}
			seen++
			require.Equal(t, want, e.Time, "%s at %v", e.Name, at)
			require.True(t, e.Time == want, "%s at %v: %#v is not the parsed %#v", e.Name, at, e.Time, want)
			ref, ok := e.Get("work_item")
			require.True(t, ok)
			require.NotEmpty(t, ref)
			_, ok = e.Get("seq")
			require.True(t, ok, "%s carries its seq", e.Name)
		}
		require.Equal(t, 2, seen)
	}
}
