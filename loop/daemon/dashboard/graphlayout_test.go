package dashboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/dashboard/dotlayout"
)

// graphvizInProcess is the real engine, linked into the test binary (loopd
// runs it as the loop-layout program instead; see dotlayout).
type graphvizInProcess struct{ calls atomic.Int32 }

func (g *graphvizInProcess) Layout(ctx context.Context, dot []byte) ([]byte, error) {
	g.calls.Add(1)
	return dotlayout.Layout(ctx, dot)
}

var shippedLoops = []string{loop.WorkItemLoop, loop.PRLoop, loop.AdhocLoop, loop.ContributionLoop}

// TestGraphvizLaysOutEveryShippedLoop: each shipped loop is drawn by
// Graphviz with every node, every edge routed clear of every node box but
// its own two, and every edge label whole (all its outcomes).
func TestGraphvizLaysOutEveryShippedLoop(t *testing.T) {
	engine := &graphvizInProcess{}
	c := newLayoutCache(engine, time.Now, io.Discard)
	for _, name := range shippedLoops {
		t.Run(name, func(t *testing.T) {
			g, err := loop.ShippedGraph(name)
			require.NoError(t, err)
			pic := c.picture(context.Background(), g, nil)
			require.Equal(t, engineGraphviz, pic.Engine)
			require.Len(t, pic.Nodes, len(g.Nodes()))
			es := edgesOf(g)
			require.Len(t, pic.Edges, len(es.order))
			boxes := map[string]picNode{}
			for _, n := range pic.Nodes {
				boxes[n.ID] = n
				require.True(t, n.X >= 0 && n.Y >= 0 && n.X+n.W <= pic.Width && n.Y+n.H <= pic.Height, "%s inside the picture", n.ID)
			}
			nodes := g.Nodes()
			for i, e := range pic.Edges {
				k := es.order[i]
				from, to := nodes[k.from].ID, nodes[k.to].ID
				for _, n := range pic.Nodes {
					if n.ID == from || n.ID == to {
						continue
					}
					for _, p := range samplePath(t, e.D, 24) {
						require.False(t, inside(p, n, 1), "edge %s → %s passes through node %s at (%.0f, %.0f)", from, to, n.ID, p[0], p[1])
					}
				}
				var text []string
				for _, l := range e.Lines {
					text = append(text, l.Text)
				}
				require.Equal(t, es.labels[k], text, "edge %s → %s's label, whole", from, to)
			}
		})
	}
	require.EqualValues(t, len(shippedLoops), engine.calls.Load(), "one layout per graph")
	g, _ := loop.ShippedGraph(loop.WorkItemLoop)
	c.picture(context.Background(), g, map[string]Mark{"phase-selection": MarkPassed})
	require.EqualValues(t, len(shippedLoops), engine.calls.Load(), "the marks do not change the layout: it comes from the cache")
}

type failingLayout struct{ calls atomic.Int32 }

func (f *failingLayout) Layout(context.Context, []byte) ([]byte, error) {
	f.calls.Add(1)
	return nil, errors.New("loop-layout: not found")
}

// A failing engine leaves the built-in layout, says so once, and is tried
// again after failedFor.
func TestLayoutFallsBackWhenTheEngineFails(t *testing.T) {
	now := time.Now()
	var log strings.Builder
	engine := &failingLayout{}
	c := newLayoutCache(engine, func() time.Time { return now }, &log)
	g, err := loop.ShippedGraph(loop.WorkItemLoop)
	require.NoError(t, err)
	for range 3 {
		require.Equal(t, engineBuiltIn, c.picture(context.Background(), g, nil).Engine)
	}
	require.EqualValues(t, 1, engine.calls.Load())
	require.Contains(t, log.String(), "built-in layout")
	now = now.Add(failedFor + time.Second)
	c.picture(context.Background(), g, nil)
	require.EqualValues(t, 2, engine.calls.Load(), "tried again")
}

// Node ids and outcomes reach the engine only as quoted DOT strings.
func TestGraphDOTQuotes(t *testing.T) {
	require.Equal(t, `"a\"b\\N\nc"`, dotQuote("a\"b\\N\nc\r"))
	g, err := loop.ShippedGraph(loop.WorkItemLoop)
	require.NoError(t, err)
	dot := string(graphDOT(g))
	require.Contains(t, dot, `"human-approval" -> "complete" [label="approved\napproved-with-comments\nskipped"];`)
}

// FuzzParseLayout: whatever the layout program prints, parseLayout
// returns an error or a layout with finite geometry, and never panics.
func FuzzParseLayout(f *testing.F) {
	g := chainGraphF(f)
	out, err := dotlayout.Layout(context.Background(), graphDOT(g))
	require.NoError(f, err)
	f.Add(out)
	f.Add([]byte(`{"bb":"0,0,10,10","objects":[{"_gvid":0,"name":"n00","pos":"5,5","width":"1","height":"1"}],"edges":[]}`))
	f.Add([]byte(`{"bb":"0,0,1e308,NaN"}`))
	f.Add([]byte(`{"bb":"0,0,10,10","objects":[{"_gvid":0,"name":"n00","pos":"5,5","width":"1","height":"1"},{"_gvid":1,"name":"n01","pos":"5,5","width":"1","height":"1"}],"edges":[{"tail":0,"head":1,"pos":"e,1,1 1,1 2,2","lp":"x"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parseLayout(b, g)
		if err != nil {
			return
		}
		p := l.picture(g, nil)
		require.Less(t, float64(p.Width), 3*maxCoord)
		for _, e := range p.Edges {
			require.NotContains(t, e.D, "NaN")
			require.NotContains(t, e.D, "Inf")
		}
	})
}

func chainGraphF(f *testing.F) *graph.Graph {
	fl := &graph.File{Version: 1, Name: "chain", Start: "n00"}
	for i := range 3 {
		fl.Nodes = append(fl.Nodes, graph.NodeSpec{ID: fmt.Sprintf("n%02d", i), Terminal: i == 2})
		if i > 0 {
			fl.Edges = append(fl.Edges, graph.EdgeSpec{From: fmt.Sprintf("n%02d", i-1), On: "pass", To: fmt.Sprintf("n%02d", i)})
		}
	}
	g, err := graph.Compile(fl, graph.NewRegistry())
	require.NoError(f, err)
	return g
}

// samplePath returns points along an SVG path of M, C and L commands (the
// paths both layouts write), n per segment.
func samplePath(t *testing.T, d string, n int) [][2]float64 {
	t.Helper()
	var pts [][2]float64
	var cur [2]float64
	toks := strings.Fields(strings.NewReplacer("M", " M ", "C", " C ", "L", " L ").Replace(d))
	num := func(i int) float64 {
		v, err := strconv.ParseFloat(toks[i], 64)
		require.NoError(t, err, d)
		return v
	}
	for i := 0; i < len(toks); {
		switch toks[i] {
		case "M":
			cur = [2]float64{num(i + 1), num(i + 2)}
			i += 3
		case "L":
			end := [2]float64{num(i + 1), num(i + 2)}
			for s := 1; s <= n; s++ {
				u := float64(s) / float64(n)
				pts = append(pts, [2]float64{cur[0] + (end[0]-cur[0])*u, cur[1] + (end[1]-cur[1])*u})
			}
			cur = end
			i += 3
		case "C":
			c1, c2, end := [2]float64{num(i + 1), num(i + 2)}, [2]float64{num(i + 3), num(i + 4)}, [2]float64{num(i + 5), num(i + 6)}
			for s := 1; s <= n; s++ {
				u := float64(s) / float64(n)
				a, b, c, e := math.Pow(1-u, 3), 3*u*(1-u)*(1-u), 3*u*u*(1-u), u*u*u
				pts = append(pts, [2]float64{a*cur[0] + b*c1[0] + c*c2[0] + e*end[0], a*cur[1] + b*c1[1] + c*c2[1] + e*end[1]})
			}
			cur = end
			i += 7
		default:
			t.Fatalf("unexpected path token %q in %s", toks[i], d)
		}
	}
	return pts
}

// inside reports whether p lies inside n's box shrunk by pad.
func inside(p [2]float64, n picNode, pad float64) bool {
	return p[0] > float64(n.X)+pad && p[0] < float64(n.X+n.W)-pad && p[1] > float64(n.Y)+pad && p[1] < float64(n.Y+n.H)-pad
}
