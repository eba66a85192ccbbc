package daemon_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/loop/daemon/usage"
)

// TestUsageInARealBrowser: headless Chromium on the dashboard loopd
// serves, a stand-in harness keeping a transcript with known usage. The
// board row's figure shows the estimate and grows without a reload when
// the agent takes another turn; the item page shows the usage per node;
// the metrics page the fleet's per day and repository.
func TestUsageInARealBrowser(t *testing.T) {
	chromiumPath(t)
	w := newWorld(t, func(c *daemon.Config) {
		c.Dashboard.Listen = "127.0.0.1:0"
		c.Usage = daemon.UsageConfig{Poll: 50 * time.Millisecond,
			Rates: usage.Rates{"claude-sonnet-4-5": {Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.3}}}
	})
	usageHarness(t, w)
	n := w.openLabeled()
	ref := fmt.Sprintf("github:%s#%d", repoFull, n)
	rowSel := fmt.Sprintf(`tr[data-ref=%q] [data-f=cost]`, ref)
	ctx := browser(t)
	run(t, ctx, "board", chromedp.Navigate(w.d.DashboardLoginURL()), chromedp.WaitVisible(chromedp.CSS(`#board`)),
		poll(`document.body.getAttribute('data-live') === 'on'`, 20*time.Second))
	waitJS(t, ctx, "the first turn's figure", `(document.querySelector('`+rowSel+`')||{}).textContent === '≈$0.01 · 5500 tok'`, 30*time.Second)
	require.Equal(t, 7, evalInt(t, ctx, `window.__noReload = 7`))

	_, err := w.sim.Comment(repoFull, n, human, "please do a turn now")
	require.NoError(t, err)
	waitJS(t, ctx, "the figure grows live", `document.querySelector('`+rowSel+`').textContent === '≈$0.02 · 11k tok'`, 30*time.Second)
	require.Equal(t, 7, evalInt(t, ctx, `window.__noReload`), "no reload")

	run(t, ctx, "item page", chromedp.Navigate(w.d.DashboardURL()+"/item?ref="+strings.ReplaceAll(strings.ReplaceAll(ref, "#", "%23"), "/", "%2F")),
		chromedp.WaitVisible(chromedp.CSS(`#usage-by-node`)))
	require.Equal(t, 11000, evalInt(t, ctx, `Number(document.querySelector('#usage-by-node [data-f=total-tokens]').getAttribute('data-tokens'))`))
	require.Equal(t, 11000, evalInt(t, ctx, `Number(document.querySelector('#usage-by-node tr[data-node="phase-selection"] [data-f=tokens]').getAttribute('data-tokens'))`))
	require.Contains(t, value(t, ctx, "usage section", chromedp.Text(chromedp.CSS(`#usage`))), "estimate")
	// The node's bar is drawn, at full length for the largest node, under
	// the dashboard's CSP (no inline style: a style attribute was dropped).
	require.Equal(t, 200, evalInt(t, ctx, `Math.round(document.querySelector('#usage-by-node tr[data-node="phase-selection"] svg.usage-bar rect').getBoundingClientRect().width)`))

	run(t, ctx, "metrics page", chromedp.Navigate(w.d.DashboardURL()+"/metrics"), chromedp.WaitVisible(chromedp.CSS(`#usage-by-day`)))
	require.Equal(t, 11000, evalInt(t, ctx, `Number(document.querySelector('#usage-by-day tr[data-repo="`+repoFull+`"] [data-f=tokens]').getAttribute('data-tokens'))`))
	require.Equal(t, "≈$0.02", value(t, ctx, "fleet cost", chromedp.Text(chromedp.CSS(`#usage-by-day [data-f=cost]`))))
}
