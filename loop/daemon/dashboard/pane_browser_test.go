package dashboard

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// replyPanes is a Panes whose screen is fixed and whose replies are
// recorded; a reply naming a control keyword is refused as loopd refuses
// it.
type replyPanes struct {
	mu      sync.Mutex
	replies []string
}

func (p *replyPanes) Screen(context.Context, string) (string, error) {
	return "the agent's screen\n", nil
}

func (p *replyPanes) Reply(_ context.Context, _, _, message string) error {
	if strings.HasPrefix(message, "the-loop ") {
		return fmt.Errorf("%w: a control keyword", ErrReplyRefused)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.replies = append(p.replies, message)
	return nil
}

func (p *replyPanes) sent() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.replies...)
}

// TestItemPageKeepsTheDraftAndTheNoticeWhenTheItemMoves: the item page
// reloads itself when its item moves on — but not while the operator is
// writing a reply (the draft stays, the page says it is behind, and the
// draft can be sent), and a reload keeps the notice of the operator's last
// reply (sent, or refused for a keyword) instead of dropping it.
func TestItemPageKeepsTheDraftAndTheNoticeWhenTheItemMoves(t *testing.T) {
	ctx := chromium(t, 1200, 900)
	src, _, _ := testWorld(t)
	panes := &replyPanes{}
	d, err := New(Config{Listen: "127.0.0.1:0", StateRoot: t.TempDir(), Operator: "dana", AuthorizedUsers: []string{"dana"}, WebTerminal: WebTerminalReply},
		Deps{Source: src, Poster: &recordingPoster{}, Panes: panes, Now: time.Now, Log: io.Discard})
	require.NoError(t, err)
	require.NoError(t, d.Start())
	t.Cleanup(func() { _ = d.Close() })
	do, eval := steps(t, ctx)
	const ref = "github:o/r#7"
	move := func(node string, state State) {
		src.set(ref, func(it *Item) { it.Node, it.State = node, state })
		d.Notify(ref)
	}
	// wait evaluates expr until it is true, riding out the page's reloads
	// (an evaluation during one fails and is tried again).
	wait := func(what, expr string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			c, cc := context.WithTimeout(ctx, 5*time.Second)
			ok, err := chromedp.Run(c, chromedp.Evaluate[bool](expr))
			cc()
			if err == nil && ok {
				return
			}
			require.True(t, time.Now().Before(deadline), "%s: %s never held (last error: %v)", what, expr, err)
			time.Sleep(10 * time.Millisecond)
		}
	}
	// mark tags the document so that a reload (a new document) is seen.
	mark := func() { t.Helper(); require.Equal(t, "marked", eval(`(window.__same = 'marked')`)) }
	live := `document.body.getAttribute('data-live') === 'on'`

	do("the item page", chromedp.Navigate(d.LoginURL()), chromedp.Navigate(d.URL()+"/item?ref="+url.QueryEscape(ref)), chromedp.WaitVisible(chromedp.CSS(`#reply-form`)))
	wait("the event stream", live)

	// A draft: the item moves on, the page stays and says so.
	mark()
	do("a draft", chromedp.SendKeys(chromedp.CSS(`#reply-message`), "Half a thought about the widget"))
	move("design", StateWorking)
	wait("the page to say it is behind", `document.body.getAttribute('data-stale') === 'yes'`)
	require.Equal(t, "marked", eval(`String(window.__same)`), "the page did not reload under the draft")
	require.Equal(t, "Half a thought about the widget", eval(`document.getElementById('reply-message').value`))
	require.Contains(t, eval(`document.getElementById('item-moved').textContent`), "now design, working")

	// Sending the draft loads the page as it is now, with the notice.
	do("send the draft", chromedp.Click(chromedp.CSS(`#btn-reply`)), chromedp.WaitVisible(chromedp.CSS(`#replied`)))
	require.Equal(t, []string{"Half a thought about the widget"}, panes.sent())
	require.Equal(t, "working", eval(`document.body.getAttribute('data-state')`))
	wait("the event stream", live)

	// No draft: the item moves on and the page reloads, keeping the notice.
	mark()
	move("design-critic-review", StateWaiting)
	wait("the reload", `window.__same === undefined && document.body.getAttribute('data-node') === 'design-critic-review'`)
	require.Equal(t, "1", eval(`String(document.querySelectorAll('#replied').length)`), "the reply's notice survives the reload")

	// A refused reply's notice survives a reload too.
	do("a keyword reply", chromedp.SendKeys(chromedp.CSS(`#reply-message`), "the-loop stop"), chromedp.Click(chromedp.CSS(`#btn-reply`)), chromedp.WaitVisible(chromedp.CSS(`#reply-refused`)))
	wait("the event stream", live)
	mark()
	move("design-critic-review", StateWorking)
	wait("the reload", `window.__same === undefined && document.body.getAttribute('data-state') === 'working'`)
	require.Contains(t, eval(`document.getElementById('reply-refused').textContent`), "control keyword")
	require.Len(t, panes.sent(), 1, "the keyword reply was not sent")
}
