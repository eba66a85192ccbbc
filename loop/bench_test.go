package loop_test

import (
	"context"
	"path/filepath"
	"sort"
	"testing"

	"github.com/theloop-dev/theloop/loop"
)

// BenchmarkCheckOneItem is `check --recompute` of one work item in-process:
// loop.Open (config, graph) plus the recompute, on a real spec folder — a
// conformance work item far into the graph (issue-239, 8 artifacts).
// Target: ≤ 1 ms/op.
func BenchmarkCheckOneItem(b *testing.B) {
	loadExpected(b)
	repo := b.TempDir()
	copyTree(b, filepath.Join(conformanceDir, "repo"), repo)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rt, err := loop.Open(repo, loop.Options{WorkItem: "issue-239"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rt.Status(ctx, "issue-239", true); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckAllConformance is `check --recompute` of all 61 conformance
// work items with the-loop v11.2's graph. Target: ≤ 60 ms/op.
func BenchmarkCheckAllConformance(b *testing.B) {
	exp := loadExpected(b)
	repo := b.TempDir()
	copyTree(b, filepath.Join(conformanceDir, "repo"), repo)
	ids := make([]string, 0, len(exp))
	for id := range exp {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	ctx := context.Background()
	graphFile := filepath.Join(conformanceDir, "graphs", "pdlc-work-item-loop.yaml")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The graph file is read each time, as a process does; graphfile
		// compiles the same bytes once per process, so this measures the
		// checks (BenchmarkCheckAllConformanceProcess pays the compile).
		rt, err := loop.Open(repo, loop.Options{Graph: loadGraph(b, graphFile)})
		if err != nil {
			b.Fatal(err)
		}
		for _, id := range ids {
			if _, err := rt.Status(ctx, id, true); err != nil {
				b.Fatal(err)
			}
		}
	}
}
