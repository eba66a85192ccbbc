package demo_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/demo"
)

// TestDemoServeKeepsTheDashboardWithGateButtons: `loopd demo --serve` with
// nobody answering the prompt leaves issue #1 at its first gate and keeps
// the daemon and dashboard up; the dashboard's operator is dana, so the
// gate's Approve button shows, and a click in a real browser posts her
// comment to the stand-in, which comes back through the webhook and the
// authorization check and moves the gate. Cancelling (Ctrl-C) ends the
// demo cleanly.
func TestDemoServeKeepsTheDashboardWithGateButtons(t *testing.T) {
	requireTools(t)
	tctx := newBrowser(t, 5*time.Minute)
	var out syncBuffer
	opts := options(t, &out)
	opts.In = strings.NewReader("")
	served, done, cancel := serveDemo(opts)
	defer cancel()
	var login string
	select {
	case login = <-served:
	case err := <-done:
		t.Fatalf("the demo ended instead of serving: %v\n%s", err, out.String())
	case <-time.After(3 * time.Minute):
		t.Fatalf("the demo did not serve in 3 minutes\n%s", out.String())
	}
	require.Contains(t, out.String(), "serving until Ctrl-C")

	base := login[:strings.Index(login, "/login")]
	item := base + "/item?ref=" + url.QueryEscape("github:"+demo.RepoFull+"#1")
	require.NoError(t, chromedp.Do(tctx,
		chromedp.Navigate(login),
		chromedp.WaitVisible(chromedp.CSS(`#board`)),
		chromedp.Navigate(item),
		chromedp.WaitVisible(chromedp.CSS(`#btn-approve`)),
		chromedp.Click(chromedp.CSS(`#btn-approve`)),
		// The confirmation says what is posted, as whom; nothing is posted before it.
		chromedp.WaitVisible(chromedp.CSS(`#btn-confirm`)),
		chromedp.Click(chromedp.CSS(`#btn-confirm`)),
	), out.String())
	// The page follows the item once the gate moved (it reloads: an
	// evaluation during the navigation fails and is retried). The scripted
	// agent may finish design before the page is sampled; it then waits at
	// the next gate, design-approval, which nobody clicks.
	past := map[string]bool{"design": true, "design-approval": true}
	deadline := time.Now().Add(90 * time.Second)
	node := ""
	for !past[node] && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		node, _ = chromedp.Run(tctx, chromedp.Evaluate[string](`document.body.getAttribute('data-node') || ''`))
	}
	require.True(t, past[node], "dana's click moved the gate through the webhook (the page shows %q)\n%s", node, out.String())

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, out.String())
	case <-time.After(90 * time.Second):
		t.Fatal("the demo did not stop after the cancel")
	}
}
