package daemon_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// TestDashboardNeedsYouInARealBrowser: the board's first view lists what
// waits on a human — a gate, and a question the agent asked with
// `loopctl ask` (written to its checkout's event log, as ask does in a
// session) — with the count in the page title, live; answering on the
// ticket drops both without a reload. A failing check run appears on the
// item's row, and on the item page — with the pull request's state, its
// review and its checks counted.
func TestDashboardNeedsYouInARealBrowser(t *testing.T) {
	chromiumPath(t)
	w := newWorld(t, func(cfg *daemon.Config) { cfg.Dashboard.Listen = "127.0.0.1:0" })
	n := w.openLabeled()
	w.eventually("the session", func() bool { return w.spawns() == 1 })
	w.waitIdle()
	ref := fmt.Sprintf("github:%s#%d", repoFull, n)
	needs := func(kind string) string {
		return fmt.Sprintf(`document.querySelectorAll('#needs-you tr[data-needs-ref=%q][data-kind=%q]').length`, ref, kind)
	}

	ctx := browser(t)
	run(t, ctx, "board with a gate waiting",
		chromedp.Navigate(w.d.DashboardLoginURL()),
		chromedp.WaitVisible(chromedp.CSS(`#needs-you`)),
		poll(`document.body.getAttribute('data-live') === 'on'`, 20*time.Second),
	)
	require.Equal(t, 1, evalInt(t, ctx, needs("gate")))
	require.True(t, strings.HasPrefix(value(t, ctx, "title", chromedp.Evaluate[string](`document.title`)), "(1) "))
	require.Contains(t, value(t, ctx, "why", chromedp.Text(chromedp.CSS(`#needs-you tr[data-kind=gate] [data-f=why]`))), "phase-selection waits")
	require.Equal(t, 42, evalInt(t, ctx, `window.__noReload = 42`))

	// The agent asks (the line `loopctl ask` logs in its checkout).
	time.Sleep(1100 * time.Millisecond) // a later second than the spawn's delivery
	line, err := json.Marshal(map[string]any{"ts": time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), "source": "loopctl", "event": "session.awaiting_input",
		"level": "info", "pid": 1, "work_item": ref, "question": "Should the widget be blue or green?"})
	require.NoError(t, err)
	logPath := loop.CheckoutEventLogPath(w.checkout(n))
	require.NoError(t, os.MkdirAll(filepath.Dir(logPath), 0o755))
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	_, err = f.Write(append(line, '\n'))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	run(t, ctx, "the question appears live", poll(needs("question")+` === 1`, 20*time.Second))
	require.Equal(t, "Should the widget be blue or green?", value(t, ctx, "question", chromedp.Text(chromedp.CSS(`#needs-you tr[data-kind=question] [data-f=why]`))))
	require.Equal(t, "2", value(t, ctx, "badge", chromedp.Text(chromedp.CSS(`#needs-badge`))))
	require.True(t, strings.HasPrefix(value(t, ctx, "title", chromedp.Evaluate[string](`document.title`)), "(2) "))

	// CI reports a failing check run on the work item: its row shows the
	// check's name and link, live (a signed check_run webhook, as GitHub
	// sends it).
	checkRun, err := json.Marshal(map[string]any{"action": "completed",
		"repository": map[string]any{"full_name": repoFull, "name": "demo", "owner": map[string]any{"login": "octo"}},
		"sender":     map[string]any{"login": "github-actions[bot]", "type": "Bot"},
		"check_run": map[string]any{"name": "lint", "status": "completed", "conclusion": "failure", "html_url": "https://github.com/octo/demo/runs/77",
			"head_sha": strings.Repeat("a", 40), "pull_requests": []any{map[string]any{"number": n}},
			"check_suite": map[string]any{"head_branch": "main", "pull_requests": []any{map[string]any{"number": n}}}}})
	require.NoError(t, err)
	postWebhook(t, w, "check_run", "check-run-delivery-1", checkRun)
	rowSel := fmt.Sprintf(`#board tr[data-ref=%q]`, ref)
	run(t, ctx, "the failing check on the row", poll(`document.querySelector('`+rowSel+` [data-f=cifail]').textContent === 'lint'`, 30*time.Second))
	require.Equal(t, "https://github.com/octo/demo/runs/77", value(t, ctx, "check link", chromedp.Evaluate[string](`document.querySelector('`+rowSel+` [data-f=cifail]').getAttribute('href')`)))

	// Answering on the ticket: the gate moves and the answer reaches the
	// session, so both drop — without a reload.
	time.Sleep(1100 * time.Millisecond)
	_, err = w.sim.Comment(repoFull, n, human, "Green. the-loop execute")
	require.NoError(t, err)
	run(t, ctx, "both drop", poll(`document.querySelectorAll('#needs-you tbody tr').length === 0`, 30*time.Second))
	require.Equal(t, "0", value(t, ctx, "badge", chromedp.Text(chromedp.CSS(`#needs-badge`))))
	require.False(t, strings.HasPrefix(value(t, ctx, "title", chromedp.Evaluate[string](`document.title`)), "("))
	require.Equal(t, 42, evalInt(t, ctx, `window.__noReload || 0`), "no reload")

	// The item page shows the pull request: its state and review (from
	// pull_request and pull_request_review webhooks), the checks counted
	// and the failing check by name with its link.
	repo := map[string]any{"full_name": repoFull, "name": "demo", "owner": map[string]any{"login": "octo"}}
	pull := map[string]any{"number": n, "html_url": fmt.Sprintf("https://github.com/%s/pull/%d", repoFull, n), "state": "open", "merged": false,
		"head": map[string]any{"sha": strings.Repeat("a", 40), "ref": "feature"}, "base": map[string]any{"ref": "main"}, "title": "Widget", "user": map[string]any{"login": human}}
	for i, ev := range []struct {
		name string
		body map[string]any
	}{
		{"pull_request", map[string]any{"action": "opened", "number": n, "pull_request": pull, "repository": repo, "sender": map[string]any{"login": human}}},
		{"pull_request_review", map[string]any{"action": "submitted", "pull_request": pull, "repository": repo, "sender": map[string]any{"login": human},
			"review": map[string]any{"state": "changes_requested", "user": map[string]any{"login": human}}}},
		{"check_run", map[string]any{"action": "completed", "repository": repo, "sender": map[string]any{"login": "github-actions[bot]", "type": "Bot"},
			"check_run": map[string]any{"name": "unit", "status": "completed", "conclusion": "success", "html_url": "https://github.com/octo/demo/runs/78",
				"head_sha": strings.Repeat("a", 40), "pull_requests": []any{map[string]any{"number": n}},
				"check_suite": map[string]any{"head_branch": "feature", "pull_requests": []any{map[string]any{"number": n}}}}}},
	} {
		b, err := json.Marshal(ev.body)
		require.NoError(t, err)
		postWebhook(t, w, ev.name, fmt.Sprintf("item-page-delivery-%d", i), b)
	}
	w.waitIdle()
	page := w.d.DashboardURL() + "/item?ref=" + strings.ReplaceAll(strings.ReplaceAll(ref, "#", "%23"), "/", "%2F")
	prRow := fmt.Sprintf(`#pull-requests tr[data-pr="%d"]`, n)
	run(t, ctx, "the item page with its pull request",
		chromedp.Navigate(page),
		chromedp.WaitVisible(chromedp.CSS(`#prci`)),
		// The section is rebuilt from the page's event stream as the three
		// webhooks land, so wait for the row as the last of them leaves it.
		poll(`(() => { const r = document.querySelector('`+prRow+`'); return !!r && r.querySelector('[data-f=pr-review]').textContent === 'changes requested'
			&& r.querySelector('[data-f=pr-state]').textContent === 'open' && r.querySelector('[data-f=pr-checks]').textContent === '1 passing, 1 failing' })()`, 20*time.Second),
	)
	require.Equal(t, "open", value(t, ctx, "state", chromedp.Text(chromedp.CSS(prRow+` [data-f=pr-state]`))))
	require.Equal(t, "1 passing, 1 failing", value(t, ctx, "checks", chromedp.Text(chromedp.CSS(prRow+` [data-f=pr-checks]`))))
	require.Equal(t, "https://github.com/octo/demo/runs/77", value(t, ctx, "failing check link",
		chromedp.Evaluate[string](`document.querySelector('`+prRow+` [data-f=pr-failing] a[data-check=lint]').getAttribute('href')`)))
	require.Equal(t, fmt.Sprintf("https://github.com/%s/pull/%d", repoFull, n), value(t, ctx, "PR link",
		chromedp.Evaluate[string](`document.querySelector('`+prRow+` td a').getAttribute('href')`)))

	// The section is live: a check that fails while the page is open, and
	// an approval, reach it over the page's event stream without a reload.
	require.Equal(t, 43, evalInt(t, ctx, `window.__noReload = 43`))
	run(t, ctx, "the item page is live", poll(`document.body.getAttribute('data-live') === 'on'`, 20*time.Second))
	e2e, err := json.Marshal(map[string]any{"action": "completed", "repository": repo, "sender": map[string]any{"login": "github-actions[bot]", "type": "Bot"},
		"check_run": map[string]any{"name": "e2e <b>", "status": "completed", "conclusion": "timed_out", "html_url": "https://github.com/octo/demo/runs/79",
			"head_sha": strings.Repeat("a", 40), "pull_requests": []any{map[string]any{"number": n}},
			"check_suite": map[string]any{"head_branch": "feature", "pull_requests": []any{}}}})
	require.NoError(t, err)
	postWebhook(t, w, "check_run", "item-page-live-1", e2e)
	approve, err := json.Marshal(map[string]any{"action": "submitted", "pull_request": pull, "repository": repo, "sender": map[string]any{"login": human},
		"review": map[string]any{"state": "approved", "user": map[string]any{"login": human}}})
	require.NoError(t, err)
	postWebhook(t, w, "pull_request_review", "item-page-live-2", approve)
	run(t, ctx, "the new failing check and the approval appear live",
		poll(`(() => { const r = document.querySelector('`+prRow+`'); return !!r && r.querySelector('[data-f=pr-checks]').textContent === '1 passing, 2 failing' &&
			r.querySelector('[data-f=pr-review]').textContent === 'approved' })()`, 30*time.Second))
	require.Equal(t, "https://github.com/octo/demo/runs/79", value(t, ctx, "live failing check link",
		chromedp.Evaluate[string](`document.querySelector('`+prRow+` [data-f=pr-failing] a[data-check="e2e <b>"]').getAttribute('href')`)))
	require.Zero(t, evalInt(t, ctx, `document.querySelectorAll('#pull-requests b').length`), "a check's name stays text")
	require.Equal(t, 43, evalInt(t, ctx, `window.__noReload || 0`), "no reload")
}

// postWebhook delivers a signed webhook to the daemon, as GitHub sends it.
func postWebhook(t *testing.T, w *world, event, delivery string, body []byte) {
	t.Helper()
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	req, err := http.NewRequest("POST", w.d.WebhookURL(), bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	require.Equal(t, http.StatusAccepted, res.StatusCode, event)
}
