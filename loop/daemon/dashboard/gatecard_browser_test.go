package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/shortdir"
)

// cardSource is a fakeSource that also shows a gate card.
type cardSource struct {
	*fakeSource
	card *GateCard
}

func (c cardSource) GateCard(_ context.Context, ref string) (*GateCard, error) {
	if ref != "github:o/r#7" {
		return nil, nil
	}
	return c.card, nil
}

const cardBefore = "---\nstatus: draft\n---\n# Requirements\n\n## Requirements\n\n- R1: the widget exists.\n\n## Security considerations\n\n- None.\n"

const cardAfter = "---\nstatus: draft\n---\n# Requirements\n\n## Requirements\n\n- R1: the widget exists.\n- R2: the widget can be removed.\n\n" +
	"| id | priority |\n|----|----------|\n| R1 | must |\n| R2 | should |\n\n" +
	"## Security considerations\n\n- None. <script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">\n- [see](javascript:window.__pwned=3)\n"

// chromium starts headless Chromium at w×h and returns its context, or
// skips when none is installed.
func chromium(t *testing.T, w, h int) context.Context {
	t.Helper()
	var path string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Skip("chromium is not installed (apt-get install chromium; .ci/run installs it): the gate card's test needs a real browser")
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(shortdir.New(t)), chromedp.Env("TMPDIR="+shortdir.New(t)), chromedp.WindowSize(w, h))
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return ctx
}

// steps returns do (run steps under a deadline) and eval (a string
// expression's value) for the browser context.
func steps(t *testing.T, ctx context.Context) (func(string, ...chromedp.Action[chromedp.Void]), func(string) string) {
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cc := context.WithTimeout(ctx, 45*time.Second)
		defer cc()
		require.NoError(t, chromedp.Do(c, steps...), what)
	}
	eval := func(expr string) string {
		t.Helper()
		c, cc := context.WithTimeout(ctx, 20*time.Second)
		defer cc()
		v, err := chromedp.Run(c, chromedp.Evaluate[string](expr))
		require.NoError(t, err, expr)
		return v
	}
	return do, eval
}

// screenshotDir is where the browser tests keep their screenshots:
// $THE_LOOP_DASHBOARD_SCREENSHOTS, else the test's temporary directory.
func screenshotDir(t *testing.T) string {
	if d := os.Getenv("THE_LOOP_DASHBOARD_SCREENSHOTS"); d != "" {
		require.NoError(t, os.MkdirAll(d, 0o755))
		return d
	}
	return t.TempDir()
}

// TestGateCardInARealBrowser: at the gate, before any click, the page
// shows the artifact rendered (the agent's script and image inert), what
// changed since the last decision, the checks, and a graph laid out by
// Graphviz whose edges pass through no node box; Approve shows what will
// be posted and as whom, and posts only after the confirmation; at 800 px
// the board's attach command is one button, not a wrapped line.
func TestGateCardInARealBrowser(t *testing.T) {
	ctx := chromium(t, 1400, 900)
	shots := screenshotDir(t)
	src, _, _ := testWorld(t)
	card := &GateCard{Gate: "requirements-approval",
		Previous: &GateDecision{Outcome: "changes-requested", By: "@dana", At: "2026-01-02T03:04:05Z"},
		Checks:   []GateCheck{{Node: "requirements-definition", Status: "pass", Hooks: []string{"validate-artifacts", "lint-artifacts"}}},
		Artifacts: []GateArtifact{
			{Name: "requirements.md", Path: "docs/specs/issue-7/requirements.md", Content: []byte(cardAfter), SHA256: "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
				Before: []byte(cardBefore), BeforeKnown: true, BeforeSHA256: "aa"},
			{Name: "bugfix.md", Path: "docs/specs/issue-7/bugfix.md", Problem: "missing"},
		}}
	poster := &recordingPoster{}
	engine := &graphvizInProcess{}
	d, err := New(Config{Listen: "127.0.0.1:0", StateRoot: t.TempDir(), Operator: "dana", AuthorizedUsers: []string{"dana"}},
		Deps{Source: cardSource{src, card}, Poster: poster, Now: time.Now, Log: io.Discard, Layout: engine})
	require.NoError(t, err)
	require.NoError(t, d.Start())
	t.Cleanup(func() { _ = d.Close() })
	do, eval := steps(t, ctx)
	shoot := func(name string) {
		t.Helper()
		c, cc := context.WithTimeout(ctx, 20*time.Second)
		defer cc()
		png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(shots, name), png, 0o644))
		t.Logf("screenshot: %s", filepath.Join(shots, name))
	}
	item := d.URL() + "/item?ref=" + url.QueryEscape("github:o/r#7")
	do("the gate's page", chromedp.Navigate(d.LoginURL()), chromedp.Navigate(item), chromedp.WaitVisible(chromedp.CSS(`#gate-card`)))

	// Before any click: the artifact, rendered and inert.
	art := `#gate-card [data-artifact="requirements.md"]`
	require.Equal(t, "Requirements|Security considerations", eval(`[...document.querySelectorAll('`+art+` [data-f=rendered] h2')].map(e => e.textContent).join('|')`))
	require.Equal(t, "R2|should", eval(`[...document.querySelectorAll('`+art+` [data-f=rendered] table tbody tr:nth-child(2) td')].map(e => e.textContent).join('|')`))
	require.Equal(t, "status: draft", eval(`document.querySelector('`+art+` [data-f=front-matter]').textContent`))
	require.Equal(t, "0", eval(`String(document.querySelectorAll('#gate-card script, #gate-card img, #gate-card [onerror]').length + (window.__pwned || 0))`))
	require.Equal(t, "", eval(`[...document.querySelectorAll('`+art+` [data-f=rendered] a')].map(a => a.getAttribute('href') || '').join('')`), "a javascript: link keeps no href")
	// What changed since the last decision, and the checks.
	require.Contains(t, eval(`document.getElementById('gate-previous').textContent`), "changes-requested by @dana")
	diff := eval(`[...document.querySelectorAll('` + art + ` [data-f=diff] .d-add')].map(e => e.textContent).join('\n')`)
	require.Contains(t, diff, "+- R2: the widget can be removed.")
	require.Equal(t, "pass", eval(`document.querySelector('#gate-checks li[data-node="requirements-definition"]').getAttribute('data-status')`))
	require.Equal(t, "missing", eval(`document.querySelector('#gate-card [data-artifact="bugfix.md"] [data-f=problem]').textContent`))
	shoot("item-gate-card.png")

	// The graph: Graphviz's layout; no edge passes through a node box but
	// its own two (sampled along each path in the browser's geometry);
	// labels whole; the readout a percentage.
	require.Equal(t, engineGraphviz, eval(`document.getElementById('graph').getAttribute('data-engine')`))
	crossings := eval(`(() => {
		const boxes = [...document.querySelectorAll('#graph g.node')].map(g => { const r = g.querySelector('rect');
			return {id: g.getAttribute('data-node'), x: +r.getAttribute('x'), y: +r.getAttribute('y'), w: +r.getAttribute('width'), h: +r.getAttribute('height')}; });
		const out = []; let samples = 0;
		for (const p of document.querySelectorAll('#graph path.edge')) {
			const from = p.getAttribute('data-from'), to = p.getAttribute('data-to'), len = p.getTotalLength();
			for (let s = 0; s <= len; s += 3) {
				const pt = p.getPointAtLength(s); samples++;
				for (const b of boxes) {
					if (b.id === from || b.id === to) continue;
					if (pt.x > b.x + 1 && pt.x < b.x + b.w - 1 && pt.y > b.y + 1 && pt.y < b.y + b.h - 1) out.push(from + '→' + to + ' through ' + b.id);
				}
			}
		}
		return samples + ' ' + [...new Set(out)].join(', ');
	})()`)
	t.Logf("edge samples checked, crossings: %s", crossings)
	require.Regexp(t, `^[0-9]+ $`, crossings, "an edge crosses a node box")
	require.Contains(t, eval(`[...document.querySelectorAll('#graph text.elabel')].map(e => e.textContent).join('|')`), "approved|approved-with-comments|skipped")
	require.Regexp(t, `^[0-9]+%$`, eval(`document.getElementById('zoom-level').textContent`))
	do("zoom in", chromedp.Click(chromedp.CSS(`#zoom-in`)))
	require.Regexp(t, `^[0-9]+%$`, eval(`document.getElementById('zoom-level').textContent`))
	do("fit", chromedp.Click(chromedp.CSS(`#zoom-fit`)))
	do("the graph in view", chromedp.ScrollIntoView(chromedp.CSS(`#graph-zoom`)))
	c, cc := context.WithTimeout(ctx, 20*time.Second)
	png, err := chromedp.Run(c, chromedp.Screenshot(chromedp.CSS(`#graph-view`)))
	cc()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(shots, "item-graph-graphviz.png"), png, 0o644))

	// Approve: first the confirmation, naming what is posted and as whom.
	do("approve", chromedp.Click(chromedp.CSS(`#btn-approve`)), chromedp.WaitVisible(chromedp.CSS(`#btn-confirm`)))
	require.Equal(t, "dana", eval(`document.getElementById('confirm-as').textContent`))
	require.Equal(t, "approved", eval(`document.getElementById('confirm-outcome').textContent`))
	require.True(t, strings.HasPrefix(eval(`document.getElementById('confirm-body').textContent`), "Approved."))
	require.Contains(t, eval(`document.getElementById('confirm-what').textContent`), "github:o/r#7")
	require.Empty(t, poster.posted(), "nothing is posted before the confirmation")
	shoot("gate-confirm.png")
	do("confirm", chromedp.Click(chromedp.CSS(`#btn-confirm`)), chromedp.WaitVisible(chromedp.CSS(`#posted`)))
	require.Len(t, poster.posted(), 1)
	require.True(t, strings.HasPrefix(poster.posted()[0]["body"].(string), "Approved."))
	shoot("item-posted.png")

	// The agent changes the artifact while the operator reads the
	// confirmation: nothing is posted.
	do("approve again", chromedp.Navigate(item), chromedp.WaitVisible(chromedp.CSS(`#btn-approve`)), chromedp.Click(chromedp.CSS(`#btn-approve`)), chromedp.WaitVisible(chromedp.CSS(`#btn-confirm`)))
	card.Artifacts[0].SHA256 = "ff" + card.Artifacts[0].SHA256[2:]
	do("confirm a stale view", chromedp.Click(chromedp.CSS(`#btn-confirm`)), chromedp.WaitVisible(chromedp.CSS(`#gate-changed`)))
	require.Len(t, poster.posted(), 1, "a changed artifact posts nothing")

	// The board at 800 px: the attach command is a one-line copy button.
	do("board at 800 px", chromedp.EmulateViewport(800, 900), chromedp.Navigate(d.URL()+"/"), chromedp.WaitVisible(chromedp.CSS(`#board`)))
	attach := eval(`(() => { const b = document.querySelector('#board tr[data-ref="github:o/r#7"] [data-f=attach]');
		const lh = parseFloat(getComputedStyle(b).lineHeight) || 16, r = b.getBoundingClientRect();
		return [b.tagName, b.getAttribute('data-copy'), Math.round(r.height / lh), document.documentElement.scrollWidth].join('|'); })()`)
	t.Logf("attach control at 800 px: %s", attach)
	parts := strings.Split(attach, "|")
	require.Equal(t, "BUTTON", parts[0])
	require.Equal(t, "tmux -L x attach -t loop-o-r-7", parts[1], "the whole command is what is copied")
	require.Equal(t, "1", parts[2], "the attach control is one line")
	shoot("board-800px.png")
	require.Equal(t, fmt.Sprint(1), fmt.Sprint(engine.calls.Load()), "the graph was laid out once, then served from the cache")
}
