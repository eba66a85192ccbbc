package daemon_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/workitem"
)

// TestDashboardOverHTTP is the dashboard's daemon side without a browser
// (the browser test covers the page's script): the board lists the work
// item from the registry and its graph state, the item page draws the
// current node, and a gate decided on the page moves only when the
// operator's comment comes back through the webhook.
func TestDashboardOverHTTP(t *testing.T) {
	w := newWorld(t, func(cfg *daemon.Config) {
		cfg.Dashboard.Listen = "127.0.0.1:0"
		cfg.Dashboard.Operator = human
	})
	n := w.openLabeled()
	w.waitIdle()
	// Restart with dana's own GitHub client (Deps are fixed at New).
	w.stop()
	require.NoError(t, w.sim.AddUser("dana-token", human))
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		Transport: integrations.TransportAPI, MaxAttempts: 2, TimeoutSeconds: 10,
		API: integrations.GitHubAPIConfig{BaseURL: w.sim.URL(), TokenEnv: []string{"OPERATOR_TOKEN"}},
	}}, integrations.Deps{Env: func(k string) (string, bool) { return "dana-token", k == "OPERATOR_TOKEN" }})
	require.NoError(t, err)
	w.deps.OperatorIntegrations = set
	w.start()

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second, Transport: pageOrigin{w.d.DashboardURL()}}
	get := func(u string) string {
		t.Helper()
		res, err := c.Get(u)
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		require.Equal(t, http.StatusOK, res.StatusCode, "%s: %s", u, b)
		return string(b)
	}
	ref := fmt.Sprintf("github:%s#%d", repoFull, n)
	board := get(w.d.DashboardLoginURL())
	require.Contains(t, board, fmt.Sprintf(`data-ref="%s"`, ref))
	require.Contains(t, board, ">phase-selection<")
	require.Contains(t, board, "waiting on a human")
	require.Contains(t, board, html.EscapeString(w.d.Sessions().AttachCommand("loop-github-octo-demo-1")))
	w.eventually("the title fetched", func() bool { return strings.Contains(get(w.d.DashboardURL()+"/"), "Add a widget") })

	itemURL := w.d.DashboardURL() + "/item?ref=" + url.QueryEscape(ref)
	page := get(itemURL)
	require.Contains(t, page, `data-node="phase-selection" data-mark="current"`)
	require.Contains(t, page, `id="btn-approve"`)
	m := regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`).FindStringSubmatch(page)
	require.Len(t, m, 2)
	// decide posts a gate action as the page's form and its confirmation
	// do: the gate and the digest of what the page showed, then confirm.
	decide := func(page, action, text string) *http.Response {
		t.Helper()
		node := regexp.MustCompile(`name="node" value="([^"]+)"`).FindStringSubmatch(page)
		digest := regexp.MustCompile(`name="digest" value="([0-9a-f]+)"`).FindStringSubmatch(page)
		require.Len(t, node, 2)
		require.Len(t, digest, 2)
		form := url.Values{"csrf": {m[1]}, "ref": {ref}, "action": {action}, "text": {text}, "node": {node[1]}, "digest": {digest[1]}}
		res, err := c.PostForm(w.d.DashboardURL()+"/item/gate", form)
		require.NoError(t, err)
		confirm, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Contains(t, string(confirm), `id="confirm-as">`+human+`</strong>`, "the confirmation names who posts")
		form.Set("confirm", "yes")
		res, err = c.PostForm(w.d.DashboardURL()+"/item/gate", form)
		require.NoError(t, err)
		res.Body.Close()
		return res
	}

	// Deciding the phase selection from the page is an ordinary comment by
	// dana; "Approved." is no selection, so the gate stays (as it would on
	// GitHub) — the dashboard has no say of its own.
	res := decide(page, "approve", "")
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Contains(t, res.Request.URL.RawQuery, "posted=approve")
	w.waitIdle()
	cs, err := w.sim.Comments(repoFull, n)
	require.NoError(t, err)
	require.Equal(t, human, cs[len(cs)-1].Author)
	require.Equal(t, "phase-selection", w.state(n).CurrentNode)

	// Walk to a real approval gate, then approve from the page: the gate
	// moves once the comment has come back.
	_, err = w.sim.Comment(repoFull, n, human, "the-loop execute")
	require.NoError(t, err)
	w.waitIdle()
	claimLogged(t, w, n, "brainstorming", "brainstorm.md", brainstormMD)
	c2 := claimLogged(t, w, n, "requirements-definition", "requirements.md", requirementsMD)
	require.Equal(t, "requirements-approval", c2.CurrentNode)
	page = get(itemURL)
	require.Contains(t, page, `data-node="requirements-approval" data-mark="current"`)
	require.Contains(t, page, "docs/specs/issue-1/requirements.md")
	require.Contains(t, page, `<h2>Requirements</h2>`, "the gate's card renders the artifact")
	require.Contains(t, page, `id="gate-previous">No earlier decision`)
	decide(page, "request-changes", "Add the acceptance criteria.")
	w.waitIdle()
	require.Equal(t, "requirements-definition", w.state(n).CurrentNode, "changes requested sends the work back")
	page = get(itemURL)
	require.Contains(t, page, "changes-requested")
	require.Contains(t, page, "@"+human)
	require.Contains(t, page, `data-verdict="verified"`, "the daemon signs decisions and the page shows the verdict")
	require.NotContains(t, page, `data-verdict="refused"`)

	// Back at the gate with a revised artifact: the card shows the last
	// decision on it and what changed since (loopd kept the content).
	c3 := claimLogged(t, w, n, "requirements-definition", "requirements.md", requirementsMD+"- R2: the widget can be removed.\n")
	require.Equal(t, "requirements-approval", c3.CurrentNode)
	page = get(itemURL)
	require.Contains(t, page, `Last decision on this gate: <strong>changes-requested</strong> by @`+human)
	require.Contains(t, page, `<span class="d-add">+- R2: the widget can be removed.</span>`)

	metrics := get(w.d.DashboardURL() + "/metrics")
	require.Contains(t, metrics, "<td>requirements-approval</td><td>1</td>", metrics[strings.Index(metrics, `id="dwell"`):])

	// The Events page reads the same log: the item's advances, by kind,
	// as loopd's recompute bore them out.
	evs := get(w.d.DashboardURL() + "/log?kind=graph.advanced&item=" + url.QueryEscape(ref))
	require.Contains(t, evs, `data-event="graph.advanced" data-item="`+ref+`"`)
	require.Contains(t, evs, "loopd&#39;s recompute bore the agent&#39;s claim out")
	require.NotContains(t, evs, `data-event="session.spawned"`)
	require.Contains(t, get(w.d.DashboardURL()+"/log?kind=session.*&item="+fmt.Sprint(n)), `data-event="session.spawned" data-item="`+ref+`"`)
	// The Settings page: the resolved settings loopd holds (redaction
	// itself: the dashboard's TestSettingsPageRedacts), never the
	// webhook secret's value.
	settings := get(w.d.DashboardURL() + "/settings")
	require.Contains(t, settings, `<tr data-key="routing.webTerminal.mode" data-source="default">`)
	require.NotContains(t, settings, secret)
}

// claimLogged is what the agent's `loopctl graph complete` does: write
// the artifact and claim the node, its events going to the shared event
// log (source "loopctl").
func claimLogged(t *testing.T, w *world, n int, node, file, body string) *graph.Claim {
	t.Helper()
	cwd := w.checkout(n)
	id := fmt.Sprintf("issue-%d", n)
	p := filepath.Join(cwd, "docs", "specs", id, file)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	el, err := loop.OpenEventLog(w.cfg.EventLog.Path, "loopctl", loop.EventLogOptions{})
	require.NoError(t, err)
	defer el.Close()
	rt, err := loop.Open(cwd, loop.Options{WorkItem: id, AuthorizedUsers: w.cfg.Routing.AuthorizedUsers, Sink: el})
	require.NoError(t, err)
	c, err := rt.Complete(context.Background(), id, node, "agent")
	require.NoError(t, err)
	return c
}

// TestDashboardListsArmedItems: with requireStartCommand a labeled work
// item has no session, yet the board lists it as awaiting a start; a start
// whose spawn fails shows the failure; once the spawn succeeds on a retry
// the row is the session's. The daemon runs without an Observer, as loopd
// does: the dashboard alone turns observations on.
func TestDashboardListsArmedItems(t *testing.T) {
	w := newWorld(t, func(cfg *daemon.Config) {
		cfg.Routing.RequireStartCommand = true
		cfg.Dashboard.Listen = "127.0.0.1:0"
	})
	w.stop()
	// Durable control records written before this start: an armed one
	// without a session is listed as queued, a stopped one is not.
	ps := ingress.NewPortableStore(w.cfg.StateRoot, nil)
	armedRef, _ := workitem.Parse("github:" + repoFull + "#98")
	stoppedRef, _ := workitem.Parse("github:" + repoFull + "#97")
	require.NoError(t, ps.RecordControl(armedRef, ingress.ControlRecord{Command: ingress.CmdStart, Source: ingress.ControlFromCLI, Actor: human}))
	require.NoError(t, ps.RecordControl(stoppedRef, ingress.ControlRecord{Command: ingress.CmdStop, Source: ingress.ControlFromCLI, Actor: human}))
	var cloneFails atomic.Bool
	cloneFails.Store(true)
	remote := w.remote
	w.deps.Observer = nil
	w.deps.CloneURL = func(workitem.Ref) string {
		if cloneFails.Load() {
			return "file://" + filepath.Join(t.TempDir(), "no-such-remote.git")
		}
		return remote
	}
	w.start()

	get := dashboardPages(t, w)
	board := func() string { return get(w.d.DashboardURL() + "/") }

	b := board()
	require.Contains(t, b, `data-ref="`+armedRef.String()+`" data-repo="`+repoFull+`" data-state="queued"`, b)
	require.Contains(t, b, "start requested by "+human+" (cli); no session yet")
	require.NotContains(t, b, stoppedRef.String())

	n := w.openLabeled()
	w.waitIdle()
	require.Equal(t, 0, w.spawns())
	ref := fmt.Sprintf("github:%s#%d", repoFull, n)
	row := fmt.Sprintf(`data-ref="%s" data-repo="%s" data-state=`, ref, repoFull)
	b = board()
	require.Contains(t, b, row+`"awaiting-start"`, b)
	require.Contains(t, b, ">awaiting start</span>")
	require.Contains(t, b, "no session until a start command")
	page := get(w.d.DashboardURL() + "/item?ref=" + url.QueryEscape(ref))
	require.Contains(t, page, "awaiting start", "its page opens, without a graph")

	_, err := w.sim.Comment(repoFull, n, human, "the-loop start")
	require.NoError(t, err)
	w.eventually("the failed spawn on the board", func() bool { return strings.Contains(board(), row+`"spawn-failed"`) })
	b = board()
	require.Contains(t, b, ">spawn failed</span>")
	require.Contains(t, b, "no-such-remote.git", "the reason is the spawn's error")
	require.Equal(t, 0, w.spawns())

	// The dispatcher retries the start; with the remote back it spawns and
	// the row is the session's.
	cloneFails.Store(false)
	w.eventually("the spawned session on the board", func() bool { return strings.Contains(board(), row+`"waiting"`) })
	w.waitIdle()
	require.Equal(t, 1, w.spawns())
	b = board()
	require.Contains(t, b, ">phase-selection<")
	require.NotContains(t, b, "spawn failed</span>")
}

// pageOrigin is the Origin header a browser sends with a form post from
// the dashboard's own page, added to every unsafe request that has none
// (the dashboard refuses a post without it).
type pageOrigin struct{ origin string }

func (p pageOrigin) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get("Origin") == "" {
		r = r.Clone(r.Context())
		r.Header.Set("Origin", p.origin)
	}
	return http.DefaultTransport.RoundTrip(r)
}
