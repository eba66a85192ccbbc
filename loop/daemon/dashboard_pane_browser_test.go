package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// TestDashboardLivePaneInARealBrowser: the item page shows the agent's
// pane live — text typed into the tmux session appears in the page (the
// latency from the keystroke to the DOM is measured) — and an authorized
// operator's reply reaches the pane, marked as theirs, and the event log.
// An operator who is not authorized sees no reply box, and both the
// page's reply route and the control plane refuse them (403).
func TestDashboardLivePaneInARealBrowser(t *testing.T) {
	chromiumPath(t)
	w := newWorld(t, func(cfg *daemon.Config) {
		landlockOnly(cfg) // the test types into the pane with tmux -S from the host
		cfg.Dashboard.Listen = "127.0.0.1:0"
		cfg.Dashboard.Operator = stranger
		cfg.Routing.WebTerminal = daemon.WebTerminalReply
	})
	n := w.openLabeled()
	w.eventually("the session", func() bool { return w.spawns() == 1 })
	w.waitIdle()
	ref := fmt.Sprintf("github:%s#%d", repoFull, n)
	itemURL := func() string {
		return w.d.DashboardURL() + "/item?ref=" + strings.ReplaceAll(strings.ReplaceAll(ref, "#", "%23"), "/", "%2F")
	}
	var rec struct {
		TmuxName string `json:"tmuxTarget"`
	}
	require.NoError(t, api.NewSocketClient(w.d.ControlSocket()).Do(context.Background(), "GET", "/sessions/one", map[string][]string{"ref": {ref}}, nil, &rec))
	tmuxName := rec.TmuxName
	require.NotEmpty(t, tmuxName)

	// Mallory is named as the operator but is not authorized.
	ctx := browser(t)
	run(t, ctx, "unauthorized operator's item page",
		chromedp.Navigate(w.d.DashboardLoginURL()),
		chromedp.WaitVisible(chromedp.CSS(`#board`)),
		chromedp.Navigate(itemURL()),
		chromedp.WaitVisible(chromedp.CSS(`#pane`)),
		poll(`Number(document.getElementById('pane').getAttribute('data-frames') || 0) > 0`, 20*time.Second),
	)
	require.Zero(t, evalInt(t, ctx, `document.querySelectorAll('#reply-form, #btn-reply').length`), "no reply box")
	require.Contains(t, value(t, ctx, "no-reply", chromedp.Text(chromedp.CSS(`#no-reply`))), "mallory, whom theloop would not let")
	status := value(t, ctx, "reply POST", chromedp.Evaluate[int](`(async () => { const f = new FormData(); f.set('ref', document.body.getAttribute('data-ref')); f.set('message', 'hi');
		const csrf = document.querySelector('input[name=csrf]'); if (csrf) f.set('csrf', csrf.value);
		const r = await fetch('/item/reply', {method: 'POST', body: new URLSearchParams(f)}); return r.status; })()`, chromedp.EvalAwaitPromise))
	require.Equal(t, http.StatusForbidden, status, "the page's reply route refuses her")
	err := api.NewSocketClient(w.d.ControlSocket()).Do(context.Background(), "POST", api.SessionPath(ref, "reply"), nil, api.ReplyRequest{Message: "hi"}, nil)
	var ae *api.APIError
	require.True(t, errors.As(err, &ae), "%v", err)
	require.Equal(t, http.StatusForbidden, ae.Status, ae.Detail)
	require.Zero(t, w.count("session.operator_reply"))

	// Now as dana, who is authorized.
	w.stop()
	w.cfg.Dashboard.Operator = human
	w.start()
	ctx = browser(t)
	run(t, ctx, "item page with the live pane",
		chromedp.Navigate(w.d.DashboardLoginURL()),
		chromedp.WaitVisible(chromedp.CSS(`#board`)),
		chromedp.Navigate(itemURL()),
		chromedp.WaitVisible(chromedp.CSS(`#reply-form`)),
		poll(`Number(document.getElementById('pane').getAttribute('data-frames') || 0) > 0`, 20*time.Second),
	)
	require.Contains(t, value(t, ctx, "pane text", chromedp.Evaluate[string](`document.getElementById('pane').textContent`)), "the-loop assignment for issue-")

	// Keystrokes typed into the session show in the page; the latency
	// from the keystroke to the DOM is measured (the figure; the bound is
	// checked by the benchmark's numbers, not by this test).
	var lat []time.Duration
	for i := range 20 {
		mark := fmt.Sprintf("typed-%02d-%d ", i, time.Now().UnixNano()%1e6)
		sent := time.Now()
		out, err := exec.Command("tmux", "-S", w.cfg.Tmux.SocketPath, "send-keys", "-t", "="+tmuxName+":", "-l", mark).CombinedOutput()
		require.NoError(t, err, "%s", out)
		run(t, ctx, "typed text appears", poll(`document.getElementById('pane').textContent.includes('`+strings.TrimSpace(mark)+`')`, 10*time.Second))
		at := value(t, ctx, "frame time", chromedp.Evaluate[int64](`Number(document.getElementById('pane').getAttribute('data-frame-at'))`))
		lat = append(lat, time.UnixMilli(at).Sub(sent))
	}
	slices.Sort(lat)
	t.Logf("pane → browser latency over %d keystrokes: p50 %v, p99 %v (max), min %v", len(lat), lat[len(lat)/2], lat[len(lat)-1], lat[0])

	// Clear the typed line so the reply is pasted on its own.
	_, _ = exec.Command("tmux", "-S", w.cfg.Tmux.SocketPath, "send-keys", "-t", "="+tmuxName+":", "C-u").CombinedOutput()

	// A reply with a control keyword is refused, with the reason.
	run(t, ctx, "keyword reply",
		chromedp.SendKeys(chromedp.CSS(`#reply-message`), "the-loop stop"),
		chromedp.Click(chromedp.CSS(`#btn-reply`)),
		chromedp.WaitVisible(chromedp.CSS(`#reply-refused`)),
	)
	require.Zero(t, w.count("session.operator_reply"))

	run(t, ctx, "reply",
		chromedp.WaitVisible(chromedp.CSS(`#reply-form`)),
		chromedp.SendKeys(chromedp.CSS(`#reply-message`), "Please use the v2 client."),
		chromedp.Click(chromedp.CSS(`#btn-reply`)),
		chromedp.WaitVisible(chromedp.CSS(`#replied`)),
		poll(`document.getElementById('pane').textContent.includes('from the operator @`+human+`')`, 20*time.Second),
	)
	w.eventually("the harness to read the reply", func() bool { return strings.Contains(w.received(), "Please use the v2 client.") })
	require.Equal(t, []any{"github:" + human}, w.eventField("session.operator_reply", "actor"))
	w.d.FlushLogs() // the log is written in the background
	logged, err := os.ReadFile(w.cfg.EventLog.Path)
	require.NoError(t, err)
	require.Contains(t, string(logged), `"message":"Please use the v2 client."`)
}
