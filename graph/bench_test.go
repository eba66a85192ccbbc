package graph_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
)

// BenchmarkAdvance measures one passing Advance through a 3-hook exit chain
// (evaluate, record the exit, take the edge, save, enter the next node) on
// the in-memory store. Target: ≤ 8 µs of CPU per op (README, Performance).
func BenchmarkAdvance(b *testing.B) { benchmarkAdvance(b, nil) }

// BenchmarkAdvanceLogged is BenchmarkAdvance with an event sink, as loopd
// and loopctl run it: each transition's event is journaled in the state,
// saved with it, emitted, and the journal cleared by a second (provisional)
// save at the end of the verb. The sink only counts: the event log's own
// write is not the runtime's cost.
func BenchmarkAdvanceLogged(b *testing.B) {
	sink := &countingSink{}
	benchmarkAdvance(b, sink)
	if sink.n < b.N {
		b.Fatalf("%d events for %d advances", sink.n, b.N)
	}
}

// countingSink counts the events it is handed.
type countingSink struct{ n int }

func (s *countingSink) Emit(graph.LogEvent) { s.n++ }

func benchmarkAdvance(b *testing.B, sink graph.Sink) {
	reg := graphtest.Registry(map[string]graph.Hook{
		"h1": graphtest.Returning(graph.Pass(nil)),
		"h2": graphtest.Returning(graph.Skip("nothing to check")),
		"h3": graphtest.Returning(graph.Pass(map[string]any{"artifacts": []string{"a.md"}})),
	})
	chain := graphtest.Hooks("h1", "h2", "h3")
	g := graphtest.NewGraph("bench").
		Node(graph.NodeSpec{ID: "a", Exit: chain}).
		Node(graph.NodeSpec{ID: "b", Exit: chain}).
		Edge("a", "pass", "b").Edge("b", "pass", "a").MustCompile(reg)
	rt, err := graph.New(g, graph.Options{Store: graphtest.NewStore(), Items: graphtest.NewItems(), Sink: sink})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if _, err := rt.Start(ctx, "w"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		rep, err := rt.Advance(ctx, "w", nil)
		if err != nil || !rep.Moved {
			b.Fatalf("advance: %v %+v", err, rep)
		}
	}
	// The process's CPU (the hook worker's and the collector's included),
	// which a busy machine inflates less than the wall clock.
	b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/1000/float64(b.N), "cpu-µs/op")
}

// cpuTime is the process's user+sys CPU so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStatusRecompute measures `check --recompute` of a 20-node graph
// (two exit hooks per node) on the in-memory store. Target: ≤ 50 µs/op.
func BenchmarkStatusRecompute(b *testing.B) {
	reg := graphtest.Registry(map[string]graph.Hook{
		"pass": graphtest.Returning(graph.Pass(nil)),
		"skip": graphtest.Returning(graph.Skip("")),
	})
	bld := graphtest.NewGraph("bench20")
	for i := 0; i < 20; i++ {
		bld.Node(graph.NodeSpec{ID: fmt.Sprintf("n%02d", i), Exit: graphtest.Hooks("pass", "skip")})
		if i > 0 {
			bld.Edge(fmt.Sprintf("n%02d", i-1), "pass", fmt.Sprintf("n%02d", i))
		}
	}
	g := bld.MustCompile(reg)
	rt, err := graph.New(g, graph.Options{Store: graphtest.NewStore(), Items: graphtest.NewItems()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rep, err := rt.Status(ctx, "w", true)
		if err != nil || len(rep.Nodes) != 20 {
			b.Fatal(err)
		}
	}
}
