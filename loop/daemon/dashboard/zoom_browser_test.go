package dashboard

import (
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
)

// chainGraph is a loop of n nodes in a row: larger than any shipped one,
// so its picture is wider than a 1400-px window at full size.
func chainGraph(t *testing.T, n int) *graph.Graph {
	t.Helper()
	f := &graph.File{Version: 1, Name: "long-loop", Start: "n00"}
	for i := range n {
		f.Nodes = append(f.Nodes, graph.NodeSpec{ID: fmt.Sprintf("n%02d", i), Phase: "implementation", Terminal: i == n-1})
		if i > 0 {
			f.Edges = append(f.Edges, graph.EdgeSpec{From: fmt.Sprintf("n%02d", i-1), On: "pass", To: fmt.Sprintf("n%02d", i)})
		}
	}
	g, err := graph.Compile(f, graph.NewRegistry())
	require.NoError(t, err)
	return g
}

// TestGraphZoomInARealBrowser: at 1400×900 the item page of a large graph
// opens fitted (the whole graph in the window); zooming in enlarges it
// inside a scrolling view with the current node kept in view, zooming out
// and "fit" bring it back.
func TestGraphZoomInARealBrowser(t *testing.T) {
	ctx := chromium(t, 1400, 900)
	const nodes, current = 90, 71
	g := chainGraph(t, nodes)
	st := graph.NewState("issue-7")
	at := time.Now().Add(-time.Hour)
	for i := range current {
		st.Enter(fmt.Sprintf("n%02d", i), at)
		st.Exit(fmt.Sprintf("n%02d", i), "pass", at)
	}
	st.Enter(fmt.Sprintf("n%02d", current), at)
	ref := "github:o/r#7"
	src := &fakeSource{items: []Item{{Ref: ref, Repo: "o/r", State: StateWorking, Node: fmt.Sprintf("n%02d", current)}},
		details: map[string]*Detail{ref: {Graph: g, State: st}}}
	d, err := New(Config{Listen: "127.0.0.1:0", StateRoot: t.TempDir()}, Deps{Source: src, Now: time.Now, Log: io.Discard})
	require.NoError(t, err)
	require.NoError(t, d.Start())
	t.Cleanup(func() { _ = d.Close() })

	do, eval := steps(t, ctx)
	do("item page at 1400×900",
		chromedp.EmulateViewport(1400, 900),
		chromedp.Navigate(d.LoginURL()),
		chromedp.Navigate(d.URL()+"/item?ref="+strings.ReplaceAll(strings.ReplaceAll(ref, "#", "%23"), "/", "%2F")),
		chromedp.WaitVisible(chromedp.CSS(`#graph-zoom`)),
	)
	require.Equal(t, "1", eval(`String(document.querySelectorAll('#graph g[data-mark="current"]').length)`))
	// What is visible: the graph, and the current node inside both the
	// scrolling view and the window.
	const probe = `(() => {
		const v = document.getElementById('graph-view'); v.scrollIntoView({block: 'start'});
		const view = v.getBoundingClientRect(), g = document.getElementById('graph').getBoundingClientRect();
		const c = document.querySelector('#graph g[data-mark="current"] rect').getBoundingClientRect();
		const inside = (b, o) => b.left >= o.left - 1 && b.top >= o.top - 1 && b.right <= o.right + 1 && b.bottom <= o.bottom + 1;
		const win = {left: 0, top: 0, right: innerWidth, bottom: innerHeight};
		const lv = document.getElementById('zoom-level');
		return [lv.textContent, v.getAttribute('data-scale'), Math.round(g.width),
			inside(g, win), inside(c, view) && inside(c, win), lv.getAttribute('data-fitted')].join(' ');
	})()`
	fields := func() []string { return strings.Fields(eval(probe)) }

	fit := fields()
	t.Logf("fitted: %v (graph %s px wide at full size)", fit, eval(`document.getElementById('graph').getAttribute('width')`))
	// The readout is the scale the graph is drawn at, fitted or not
	// ("− 37% + fit", never "− fit + fit").
	require.Equal(t, fmt.Sprintf("%d%%", int(math.Round(atof(t, fit[1])*100))), fit[0])
	require.Equal(t, "yes", fit[5])
	require.Equal(t, "true", fit[3], "fitted, the whole graph is in the window")
	require.Equal(t, "true", fit[4], "and so is the current node")
	fitWidth := fit[2]

	do("zoom in three times", chromedp.Click(chromedp.CSS(`#zoom-in`)), chromedp.Click(chromedp.CSS(`#zoom-in`)), chromedp.Click(chromedp.CSS(`#zoom-in`)))
	in := fields()
	t.Logf("zoomed in: %v", in)
	require.Equal(t, fmt.Sprintf("%d%%", int(math.Round(atof(t, in[1])*100))), in[0])
	require.Equal(t, "no", in[5])
	require.Greater(t, atof(t, in[1]), atof(t, fit[1]))
	require.Greater(t, atof(t, in[2]), atof(t, fitWidth), "the graph is drawn larger")
	require.Equal(t, "false", in[3], "larger than the window: the view scrolls")
	require.Equal(t, "true", in[4], "the current node is kept in view")

	do("zoom out once", chromedp.Click(chromedp.CSS(`#zoom-out`)))
	out := fields()
	require.Less(t, atof(t, out[1]), atof(t, in[1]))
	require.Equal(t, "true", out[4], "the current node is still in view")

	do("fit", chromedp.Click(chromedp.CSS(`#zoom-fit`)))
	back := fields()
	require.Equal(t, fit, back, "fit restores the whole graph")

	// The zoom survives the reload the page makes when the item moves on.
	do("zoom in, reload", chromedp.Click(chromedp.CSS(`#zoom-in`)), chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#graph-zoom`)))
	again := fields()
	require.Equal(t, "no", again[5])
	require.Equal(t, "true", again[4])
}

func atof(t *testing.T, s string) float64 {
	t.Helper()
	var f float64
	_, err := fmt.Sscan(s, &f)
	require.NoError(t, err, s)
	return f
}
