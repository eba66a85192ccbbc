package graph_test

import (
	"context"
	"io/fs"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
)

// lendingArtifacts lends copies of its files and, like a pooling lender,
// overwrites a buffer when it comes back: a string that still shared it
// would read as "#" characters.
type lendingArtifacts struct {
	*graphtest.Artifacts
	mu       sync.Mutex
	lent     int
	returned int
}

func (a *lendingArtifacts) Lend(name string) ([]byte, error) {
	b, err := fs.ReadFile(a.Artifacts, name)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.lent++
	a.mu.Unlock()
	return b, nil
}

func (a *lendingArtifacts) GiveBack(b []byte) {
	for i := range b {
		b[i] = '#'
	}
	a.mu.Lock()
	a.returned++
	a.mu.Unlock()
}

func (a *lendingArtifacts) counts() (lent, returned int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lent, a.returned
}

type lendingItems struct{ arts *lendingArtifacts }

func (it lendingItems) Resolve(_ context.Context, id string) (graph.WorkItem, graph.Artifacts, error) {
	return graph.WorkItem{ID: id, Ref: "test:" + id, SpecDir: "docs/specs/" + id}, it.arts, nil
}

// Status gives back what its hooks borrowed once the report is built, and
// a message that (wrongly) shares a loan's memory is copied out first; a
// hook abandoned at its deadline may still be reading, so nothing is given
// back then.
func TestStatusGivesLoansBackAfterTheReport(t *testing.T) {
	borrowing := func(hold time.Duration) graph.Hook {
		return func(_ context.Context, hc *graph.HookContext) graph.HookResult {
			br, ok := hc.Artifacts.(graph.Borrower)
			if !ok {
				return graph.Block(graph.Finding("check-mode artifacts are no Borrower", ""))
			}
			b, err := br.Borrow("design.md")
			if err != nil {
				return graph.Block(graph.Finding(err.Error(), ""))
			}
			time.Sleep(hold)
			// The first line, sharing the loan's memory.
			return graph.Block(graph.Message{Text: unsafe.String(unsafe.SliceData(b), len("missing: tests"))})
		}
	}
	for _, tc := range []struct {
		name         string
		hold         time.Duration
		ref          graph.HookRef
		wantMessage  string
		wantReturned int
	}{
		{"returned", 0, graph.HookRef{Hook: "h"}, "missing: tests", 1},
		{"abandoned", 2 * time.Second, graph.HookRef{Hook: "h", Timeout: "20ms"}, "the h hook did not finish within 20ms", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := graphtest.Registry(map[string]graph.Hook{"h": borrowing(tc.hold)})
			g := graphtest.NewGraph("x").
				Node(graph.NodeSpec{ID: "a", Exit: []graph.HookRef{tc.ref}}).
				Node(graph.NodeSpec{ID: "b"}).Edge("a", "pass", "b").MustCompile(reg)
			arts := &lendingArtifacts{Artifacts: graphtest.NewArtifacts("docs/specs/w")}
			arts.Set("design.md", "missing: tests\nmore text\n")
			rt, err := graph.New(g, graph.Options{Store: graphtest.NewStore(), Items: lendingItems{arts}})
			require.NoError(t, err)
			rep, err := rt.Status(context.Background(), "w", true)
			require.NoError(t, err)
			nr, ok := rep.Node("a")
			require.True(t, ok)
			require.Equal(t, graph.StatusBlock, nr.Status)
			require.Contains(t, nr.Messages[0], tc.wantMessage)
			lent, returned := arts.counts()
			require.Equal(t, 1, lent)
			require.Equal(t, tc.wantReturned, returned)
		})
	}
}
