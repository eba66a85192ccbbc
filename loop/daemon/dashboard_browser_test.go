package daemon_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// chromiumPath finds the Debian chromium (the browser tests' real client).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed (apt-get install chromium; .ci/run installs it): the dashboard's browser test needs a real browser")
	return ""
}

// browser starts headless Chromium with a fresh profile and returns a
// chromedp context for one tab.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(shortdir.New(t)),
		// Chromium binds its SingletonSocket in a directory under $TMPDIR: a
		// short one, whatever the test's $TMPDIR is.
		chromedp.Env("TMPDIR=" + shortdir.New(t)),
		chromedp.WindowSize(1400, 1000),
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return ctx
}

// shoot saves a full-page screenshot under dir and logs its path.
func shoot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	require.NoError(t, err)
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, png, 0o644))
	t.Logf("screenshot: %s", p)
}

// run runs chromedp steps under a deadline.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(c, steps...), what)
}

// value runs one chromedp action that returns a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	v, err := chromedp.Run(c, a)
	require.NoError(t, err, what)
	return v
}

func poll(expr string, timeout time.Duration) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(timeout), chromedp.WithPollingInterval(5*time.Millisecond))
}

// waitJS evaluates expr until it is true, riding out navigations (an
// evaluation during one fails and is retried).
func waitJS(t *testing.T, ctx context.Context, what, expr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := chromedp.Run(c, chromedp.Evaluate[bool](expr))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			shoot(t, ctx, t.TempDir(), "timeout.png")
			html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			t.Logf("page: %s", html)
			t.Fatalf("%s: %s is not true after %v (last error: %v)", what, expr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func evalInt(t *testing.T, ctx context.Context, expr string) int {
	t.Helper()
	return value(t, ctx, expr, chromedp.Evaluate[int](expr))
}

// TestDashboardInARealBrowser drives the dashboard loopd serves with
// headless Chromium, against githubsim: the board lists the items, a
// transition updates the row without a reload (and the latency from the
// transition to the DOM is measured), the item page's SVG marks the current
// node, "Approve" posts the operator's comment to the stand-in and the row
// moves on once the webhook comes back, and an operator who is not
// authorized sees no actions.
func TestDashboardInARealBrowser(t *testing.T) {
	chromiumPath(t)
	shots := t.TempDir()
	if d := os.Getenv("THE_LOOP_DASHBOARD_SCREENSHOTS"); d != "" {
		shots = d
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	w := newWorld(t, func(cfg *daemon.Config) {
		cfg.Dashboard.Listen = "127.0.0.1:0"
		cfg.Dashboard.Operator = stranger
	})
	// The operator's own GitHub client: comments it posts are theirs.
	operatorClient := func(login string) *integrations.Set {
		tok := login + "-token"
		require.NoError(t, w.sim.AddUser(tok, login))
		set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
			Transport: integrations.TransportAPI, MaxAttempts: 2, TimeoutSeconds: 10,
			API: integrations.GitHubAPIConfig{BaseURL: w.sim.URL(), TokenEnv: []string{"OPERATOR_TOKEN"}},
		}}, integrations.Deps{Env: func(k string) (string, bool) { return tok, k == "OPERATOR_TOKEN" }})
		require.NoError(t, err)
		return set
	}
	// Mallory is named as the operator but is not authorized: whatever
	// client the dashboard had, it offers nothing.

	n := w.openLabeled()
	w.waitIdle()
	require.Equal(t, "phase-selection", w.state(n).CurrentNode)
	ref := fmt.Sprintf("github:%s#%d", repoFull, n)
	rowSel := fmt.Sprintf(`tr[data-ref=%q]`, ref)
	itemURL := func() string {
		return w.d.DashboardURL() + "/item?ref=" + strings.ReplaceAll(strings.ReplaceAll(ref, "#", "%23"), "/", "%2F")
	}

	ctx := browser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }

	// An operator who is not in authorizedUsers: the gate page offers nothing.
	run(t, ctx, "unauthorized operator's item page",
		chromedp.Navigate(w.d.DashboardLoginURL()),
		chromedp.WaitVisible(css(rowSel)),
		chromedp.Navigate(itemURL()),
		chromedp.WaitVisible(css(`#no-actions`)),
	)
	noActions := value(t, ctx, "no-actions text", chromedp.Text(css(`#no-actions`)))
	require.Contains(t, noActions, "mallory, whom theloop would not let")
	require.Zero(t, evalInt(t, ctx, `document.querySelectorAll('#gate-form, #btn-approve').length`))
	shoot(t, ctx, shots, "item-unauthorized.png")

	// Now as dana, who is authorized, with her own GitHub client.
	w.waitIdle()
	w.stop()
	w.cfg.Dashboard.Operator = human
	w.deps.OperatorIntegrations = operatorClient(human)
	w.start()
	ctx = browser(t)
	run(t, ctx, "board",
		chromedp.Navigate(w.d.DashboardLoginURL()),
		chromedp.WaitVisible(css(rowSel)),
		poll(`document.body.getAttribute('data-live') === 'on'`, 20*time.Second),
		poll(`document.querySelector('`+rowSel+` [data-f=title]').textContent === 'Add a widget'`, 20*time.Second),
	)
	require.Equal(t, 1, evalInt(t, ctx, `document.querySelectorAll('#board tbody tr').length`))
	require.Equal(t, "phase-selection", value(t, ctx, "node", chromedp.Text(css(rowSel+` [data-f=node]`))))
	// A mark that a reload would erase.
	require.Equal(t, 42, evalInt(t, ctx, `window.__noReload = 42`))
	shoot(t, ctx, shots, "board-before.png")

	// A transition made by the daemon (the phase selection answered by a
	// comment) updates the row without a reload.
	commented := time.Now()
	_, err := w.sim.Comment(repoFull, n, human, "the-loop execute")
	require.NoError(t, err)
	run(t, ctx, "row moves to brainstorming",
		poll(`document.querySelector('`+rowSel+` [data-f=node]').textContent === 'brainstorming'`, 30*time.Second))
	updatedAt := value(t, ctx, "updated-at", chromedp.Evaluate[int64](`Number(document.querySelector('`+rowSel+`').getAttribute('data-updated-at'))`))
	require.Equal(t, 42, evalInt(t, ctx, `window.__noReload || 0`), "the row changed without a reload")
	t.Logf("end to end, comment posted on the stand-in → signed delivery → gate → row updated in the DOM: %v", time.UnixMilli(updatedAt).Sub(commented))

	// A new work item with a hostile title appears live (a cloned row
	// filled with textContent) and its title stays text.
	const hostile = `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>`
	is2, err := w.sim.OpenIssue(repoFull, human, hostile, "a title that tries to run")
	require.NoError(t, err)
	require.NoError(t, w.sim.AddLabel(repoFull, is2.Number, human, label))
	row2 := fmt.Sprintf(`tr[data-ref="github:%s#%d"]`, repoFull, is2.Number)
	run(t, ctx, "second item appears live",
		poll(`(() => { const e = document.querySelector('`+row2+` [data-f=title]'); return e !== null && e.textContent.startsWith('<img'); })()`, 30*time.Second))
	require.Equal(t, hostile, value(t, ctx, "hostile title", chromedp.Evaluate[string](`document.querySelector('`+row2+` [data-f=title]').textContent`)))
	require.Zero(t, evalInt(t, ctx, `document.querySelectorAll('#board img, #board tbody script').length`), "no element came out of the title")
	require.Zero(t, evalInt(t, ctx, `window.__pwned || 0`))
	require.Equal(t, 42, evalInt(t, ctx, `window.__noReload || 0`), "the new row came without a reload")
	shoot(t, ctx, shots, "board-hostile-title.png")

	// Transitions made by another process — the agent's `loopctl graph
	// complete` — reach the board through the shared event log.
	for _, step := range []struct{ node, file, body, next string }{
		{"brainstorming", "brainstorm.md", brainstormMD, "requirements-definition"},
		{"requirements-definition", "requirements.md", requirementsMD, "requirements-approval"},
	} {
		c := claimLogged(t, w, n, step.node, step.file, step.body)
		require.Equal(t, step.next, c.CurrentNode)
		run(t, ctx, "row moves to "+step.next,
			poll(`document.querySelector('`+rowSel+` [data-f=node]').textContent === '`+step.next+`'`, 30*time.Second))
		updatedAt := value(t, ctx, "updated-at", chromedp.Evaluate[int64](`Number(document.querySelector('`+rowSel+`').getAttribute('data-updated-at'))`))
		evs, err := loop.ReadEvents(w.cfg.EventLog.Path, loop.EventQuery{WorkItem: ref, Event: "graph.advanced", Source: "loopctl"})
		require.NoError(t, err)
		require.NotEmpty(t, evs)
		t.Logf("SSE update latency, transition (%s → %s, event-log line written) → row updated in the DOM: %v", step.node, step.next, time.UnixMilli(updatedAt).Sub(evs[len(evs)-1].Time))
	}
	require.Equal(t, 42, evalInt(t, ctx, `window.__noReload || 0`), "still no reload")
	require.Equal(t, "waiting on a human", value(t, ctx, "state", chromedp.Text(css(rowSel+` [data-f=state]`))))
	shoot(t, ctx, shots, "board-at-gate.png")

	// The item page: the SVG marks the current node; Approve posts dana's
	// comment to the stand-in; the gate moves when the webhook comes back.
	run(t, ctx, "item page",
		chromedp.EmulateViewport(1400, 900),
		chromedp.Navigate(itemURL()),
		chromedp.WaitVisible(css(`#graph`)),
		chromedp.WaitVisible(css(`#btn-approve`)),
	)
	require.Equal(t, 1, evalInt(t, ctx, `document.querySelectorAll('#graph g[data-node="requirements-approval"][data-mark="current"]').length`), "the current node is marked")
	// The whole graph fits the 1400×900 window, the current node in view.
	fits := value(t, ctx, "graph fits", chromedp.Evaluate[string](`(() => {
		const g = document.getElementById('graph'); g.scrollIntoView({block: 'start'});
		const r = g.getBoundingClientRect(), c = g.querySelector('g[data-mark="current"] rect').getBoundingClientRect();
		const inView = (b) => b.left >= -1 && b.top >= -1 && b.right <= innerWidth + 1 && b.bottom <= innerHeight + 1; // scrolled to a fraction of a pixel
		return [innerWidth + 'x' + innerHeight, Math.round(r.width) + 'x' + Math.round(r.height), inView(r), inView(c), Math.round(r.left), Math.round(r.top), Math.round(r.right), Math.round(r.bottom)].join(' ');
	})()`))
	t.Logf("window, graph, graph in view, current node in view: %s", fits)
	require.Contains(t, fits, " true true", fits)
	require.GreaterOrEqual(t, evalInt(t, ctx, `document.querySelectorAll('#graph g[data-mark="passed"]').length`), 3, "phase-selection, brainstorming and requirements-definition passed")
	shoot(t, ctx, shots, "item-at-gate.png")

	// The page either still shows the "posted" notice or has already
	// followed the work item on (when the webhook was quicker than us).
	// Before the click: the gated artifact, rendered, on the gate's card.
	require.Contains(t, value(t, ctx, "rendered artifact", chromedp.Evaluate[string](`[...document.querySelectorAll('#gate-card [data-artifact="requirements.md"] [data-f=rendered] h2')].map(e => e.textContent).join('|')`)), "Requirements")
	before, err := w.sim.Comments(repoFull, n)
	require.NoError(t, err)
	run(t, ctx, "approve", chromedp.Click(css(`#btn-approve`)), chromedp.WaitVisible(css(`#btn-confirm`)))
	// The confirmation: what is posted, as whom; nothing posted yet.
	require.Equal(t, human, value(t, ctx, "confirm as", chromedp.Text(css(`#confirm-as`))))
	require.True(t, strings.HasPrefix(value(t, ctx, "confirm body", chromedp.Text(css(`#confirm-body`))), "Approved."))
	cs0, err := w.sim.Comments(repoFull, n)
	require.NoError(t, err)
	require.Len(t, cs0, len(before), "nothing posted before the confirmation")
	shoot(t, ctx, shots, "gate-confirm.png")
	run(t, ctx, "confirm", chromedp.Click(css(`#btn-confirm`)))
	waitJS(t, ctx, "approve posted", `document.getElementById('posted') !== null || document.body.getAttribute('data-node') === 'design'`, 30*time.Second)
	cs, err := w.sim.Comments(repoFull, n)
	require.NoError(t, err)
	last := cs[len(cs)-1]
	require.Equal(t, human, last.Author, "posted as the operator, not the bot")
	require.True(t, strings.HasPrefix(last.Body, "Approved."), last.Body)

	// The page follows the work item once the gate has moved (the
	// comment came back through the webhook, ingress and authorization).
	waitJS(t, ctx, "item page moves on to design", `document.body.getAttribute('data-node') === 'design'`, 45*time.Second)
	run(t, ctx, "design marked current", chromedp.WaitVisible(css(`#graph g[data-node="design"][data-mark="current"]`)))
	w.waitIdle()
	st := w.state(n)
	require.Equal(t, "design", st.CurrentNode)
	dec, ok := st.Decisions.Get("requirements-approval")
	require.True(t, ok)
	require.Contains(t, dec.By, human)
	// After the click: the decision as it came back through ingress.
	waitJS(t, ctx, "the decision on the page", `[...document.querySelectorAll('#decisions tbody tr')].some(tr => tr.cells[0].textContent === 'requirements-approval' && tr.cells[1].textContent === 'approved' && tr.cells[2].textContent.includes('`+human+`'))`, 30*time.Second)
	shoot(t, ctx, shots, "item-after-approve.png")

	run(t, ctx, "board shows design", chromedp.Navigate(w.d.DashboardURL()+"/"), chromedp.WaitVisible(css(rowSel)))
	require.Equal(t, "design", value(t, ctx, "node", chromedp.Text(css(rowSel+` [data-f=node]`))))
	shoot(t, ctx, shots, "board-after.png")

	run(t, ctx, "metrics page", chromedp.Navigate(w.d.DashboardURL()+"/metrics"), chromedp.WaitVisible(css(`#dwell`)))
	shoot(t, ctx, shots, "metrics.png")
}

// TestDashboardArmedRowInARealBrowser: with requireStartCommand, a
// labeled work item appears live on an open board as awaiting a start (a
// row the script adds, with its label and reason), and turns into the
// session's row once an authorized start spawns it — no reload.
func TestDashboardArmedRowInARealBrowser(t *testing.T) {
	chromiumPath(t)
	w := newWorld(t, func(cfg *daemon.Config) {
		cfg.Dashboard.Listen = "127.0.0.1:0"
		cfg.Routing.RequireStartCommand = true
	})
	ctx := browser(t)
	run(t, ctx, "empty board, live",
		chromedp.Navigate(w.d.DashboardLoginURL()),
		chromedp.WaitVisible(chromedp.CSS(`#board`)),
		poll(`document.body.getAttribute('data-live') === 'on'`, 20*time.Second),
	)
	require.Equal(t, 42, evalInt(t, ctx, `window.__noReload = 42`))

	n := w.openLabeled()
	rowSel := fmt.Sprintf(`tr[data-ref="github:%s#%d"]`, repoFull, n)
	run(t, ctx, "armed row appears live",
		poll(`(() => { const e = document.querySelector('`+rowSel+` [data-f=state]'); return e !== null && e.textContent === 'awaiting start'; })()`, 30*time.Second))
	require.Equal(t, "awaiting-start", value(t, ctx, "row state", chromedp.Evaluate[string](`document.querySelector('`+rowSel+`').getAttribute('data-state')`)))
	require.Contains(t, value(t, ctx, "finding", chromedp.Evaluate[string](`document.querySelector('`+rowSel+` [data-f=finding]').textContent`)), "start command")
	require.Equal(t, 0, w.spawns())

	_, err := w.sim.Comment(repoFull, n, human, "the-loop start")
	require.NoError(t, err)
	run(t, ctx, "row becomes the session's",
		poll(`document.querySelector('`+rowSel+` [data-f=node]').textContent === 'phase-selection'`, 30*time.Second),
		poll(`document.querySelector('`+rowSel+` [data-f=state]').textContent === 'waiting on a human'`, 30*time.Second))
	require.Equal(t, 1, evalInt(t, ctx, `document.querySelectorAll('#board tbody tr').length`))
	require.Equal(t, 42, evalInt(t, ctx, `window.__noReload || 0`), "no reload")
	// The row turns when the session is registered; the stand-in harness
	// logs its argv once its (sandboxed) process has started, a moment later.
	w.eventually("the harness started once", func() bool { return w.spawns() == 1 })
}
