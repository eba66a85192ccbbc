package dashboard

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestEventsAndSettingsInARealBrowser: from the board, the navigation
// reaches the Events page; the query form narrows the log by item and
// kind, a row's raw record opens on a click, and the agent's text stays
// text; the Settings page lists the configuration with its secret
// redacted.
func TestEventsAndSettingsInARealBrowser(t *testing.T) {
	ctx := chromium(t, 1300, 900)
	src, _, _ := testWorld(t)
	src.events = append(src.events, Event{Time: t0.Add(-30 * time.Minute), Name: "graph.blocked", WorkItem: "github:o/r#8",
		Fields: map[string]any{"node": "design", "hook": "validate-artifacts", "message": `<img src=x onerror="window.__pwned=1">`}})
	settings := []Setting{{Key: "queue.url", Value: "nats://loopd:hunter2-secret@nats.example:4222", Source: "file"}, {Key: "state.root", Value: "/srv/state", Source: "default"}}
	d, err := New(Config{Listen: "127.0.0.1:0", StateRoot: t.TempDir()}, Deps{Source: src, Now: time.Now, Log: io.Discard, Settings: func() []Setting { return settings }})
	require.NoError(t, err)
	require.NoError(t, d.Start())
	t.Cleanup(func() { _ = d.Close() })
	do, eval := steps(t, ctx)

	do("the board, then Events from the navigation", chromedp.Navigate(d.LoginURL()), chromedp.WaitVisible(chromedp.CSS(`#board`)),
		chromedp.Click(chromedp.CSS(`header nav a[href="/log"]`)), chromedp.WaitVisible(chromedp.CSS(`#event-log`)))
	require.Equal(t, "5", eval(`String(document.querySelectorAll('#event-log tbody tr').length)`))
	require.Equal(t, "graph.blocked", eval(`document.querySelector('#event-log tbody tr').getAttribute('data-event')`), "newest first")
	require.Equal(t, "0", eval(`String(document.querySelectorAll('#event-log img').length + (window.__pwned || 0))`), "the agent's markup is text")
	require.Contains(t, eval(`document.querySelector('#event-log tbody tr .what').textContent`), `<img src=x onerror="window.__pwned=1">`)

	do("query item 7, kind graph.advanced", chromedp.SendKeys(chromedp.CSS(`#event-query input[name=item]`), "github:o/r#7"),
		chromedp.SendKeys(chromedp.CSS(`#event-query input[name=kind]`), "graph.advanced"),
		chromedp.Click(chromedp.CSS(`#event-query button[type=submit]`)))
	// The submission loads a new page: wait for it (the old one has a
	// count too).
	deadline := time.Now().Add(45 * time.Second)
	for eval(`String(location.search.includes('kind=graph.advanced') && document.readyState === 'complete' && !!document.getElementById('event-count'))`) != "true" {
		require.True(t, time.Now().Before(deadline), "the query's page never loaded")
		time.Sleep(50 * time.Millisecond)
	}
	require.Equal(t, "graph.advanced@github:o/r#7,graph.advanced@github:o/r#7",
		eval(`[...document.querySelectorAll('#event-log tbody tr')].map(r => r.getAttribute('data-event') + '@' + r.getAttribute('data-item')).join(',')`))
	require.Equal(t, "github:o/r#7", eval(`document.querySelector('#event-query input[name=item]').value`), "the form keeps the query")
	require.Equal(t, "false", eval(`String(document.querySelector('#event-log details.raw').open)`))
	do("open the raw record", chromedp.Click(chromedp.CSS(`#event-log details.raw summary`)))
	raw := eval(`document.querySelector('#event-log details.raw pre').textContent`)
	require.Contains(t, raw, `"event": "graph.advanced"`)
	require.Contains(t, raw, `"to": "requirements-approval"`)

	do("a bad query", chromedp.Navigate(d.URL()+"/log?since=yesterday"), chromedp.WaitVisible(chromedp.CSS(`#event-problems`)))
	require.Contains(t, eval(`document.getElementById('event-problems').textContent`), `since "yesterday": write a time ago`)

	do("Settings from the navigation", chromedp.Click(chromedp.CSS(`header nav a[href="/settings"]`)), chromedp.WaitVisible(chromedp.CSS(`#settings`)))
	require.Equal(t, "nats://[redacted]@nats.example:4222", eval(`document.querySelector('#settings tr[data-key="queue.url"] td.value').textContent`))
	require.False(t, strings.Contains(eval(`document.body.textContent`), "hunter2"))
	require.Equal(t, "0", eval(`String(document.querySelectorAll('#settings input, #settings textarea, #settings button, form[method=post]').length)`), "read-only: nothing to edit")
}
