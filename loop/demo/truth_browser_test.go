package demo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/demo"
)

// newBrowser starts a headless Chromium for the test (skipping it when
// none is installed) and returns a context for its first tab, bounded by
// timeout.
func newBrowser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	chromium := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			chromium = p
			break
		}
	}
	if chromium == "" {
		t.Skip("chromium is not installed: this test drives the demo's dashboard in a real browser")
	}
	actx, acancel := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.WindowSize(1400, 1000), chromedp.UserDataDir(shortdir.New(t)), chromedp.Env("TMPDIR="+shortdir.New(t)))
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	tctx, tcancel := context.WithTimeout(bctx, timeout)
	t.Cleanup(tcancel)
	return tctx
}

// shot saves a full-page PNG of the browser's page as name under
// $THELOOP_SHOTS, when set (the closing note's screenshots; never in the
// repository).
func shot(t *testing.T, ctx context.Context, name string, sel ...string) {
	dir := os.Getenv("THELOOP_SHOTS")
	if dir == "" {
		return
	}
	take := chromedp.FullScreenshot(100)
	if len(sel) > 0 {
		take = chromedp.Screenshot(chromedp.CSS(sel[0]))
	}
	png, err := chromedp.Run(ctx, take)
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	_ = os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Logf("screenshot %s: %v", name, err)
	}
}

// serveDemo runs the demo with Serve in the background: served receives
// the login URL once the walk is over, done Run's error; cancel is Ctrl-C.
func serveDemo(opts demo.Options) (served <-chan string, done <-chan error, cancel context.CancelFunc) {
	login := make(chan string, 1)
	opts.Serve = true
	opts.Served = func(u string) { login <- u }
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { _, err := demo.Run(ctx, opts); ended <- err }()
	return login, ended, cancel
}

// waitOut waits until the demo's narration satisfies cond.
func waitOut(t *testing.T, out *syncBuffer, done <-chan error, what string, cond func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond(out.String()) {
		select {
		case err := <-done:
			t.Fatalf("the demo ended while waiting for %s: %v\n%s", what, err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 3 minutes:\n%s", what, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The operator's truth (issue 35), end to end: `loopd demo --serve`, the
// person at the terminal answering nothing, each approval gate decided by a
// click in a real Chromium. Each click answers the terminal's pending
// "Approve as dana?" prompt, and the terminal names dana as the one who
// decided. Walked to complete, the dashboard and loopd agree with the walk
// as graph-state.json and the agent's own log record it:
//
//   - the metrics page lists the four gates, each decided once, none
//     waiting, with the dwell graph-state.json measures; the two blocks the
//     agent ran into, by their hook; a throughput row for every node the
//     walk entered;
//   - /metrics (Prometheus, on loopd's socket) and `loopctl events` count
//     the same four gate dwells, two blocks and advances;
//   - the item's timeline has a group for every node entered, typed rows,
//     the raw record one click away;
//   - the finished item reads as done, with when it finished and no running
//     clock, its terminal node not drawn as current and the artifacts of
//     the nodes the selection skipped not "missing".
func TestDemoServeWalkedInTheBrowserTellsTheTruth(t *testing.T) {
	requireTools(t)
	tctx := newBrowser(t, 8*time.Minute)
	var out syncBuffer
	opts := options(t, &out)
	in, answer := io.Pipe() // a terminal nobody types into
	defer answer.Close()
	opts.In = in
	served, done, cancel := serveDemo(opts)
	defer cancel()
	const loginLine = "dashboard (one-time login URL): "
	waitOut(t, &out, done, "the dashboard's login URL", func(s string) bool { return strings.Contains(s, loginLine) })
	s := out.String()
	login := strings.TrimSpace(strings.SplitN(s[strings.Index(s, loginLine)+len(loginLine):], "\n", 2)[0])
	base := login[:strings.Index(login, "/login")]
	ref := "github:" + demo.RepoFull + "#1"
	itemURL := base + "/item?ref=" + url.QueryEscape(ref)

	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(login), chromedp.WaitVisible(chromedp.CSS(`#board`))))

	// Each gate: the terminal asks; dana clicks Approve in the dashboard
	// (the form posted as the button would, whatever confirmation the page
	// puts before it); the terminal's prompt is answered by her decision.
	for i, gate := range []string{"requirements-approval", "design-approval", "human-approval"} {
		waitOut(t, &out, done, "the prompt at "+gate, func(s string) bool {
			return strings.Count(s, "Approve as dana? [y/N] ") > i && strings.Contains(s, "━━ human gate: "+gate)
		})
		require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(itemURL), chromedp.WaitReady(chromedp.CSS(`#gate-form`))), out.String())
		require.Equal(t, gate, eval[string](t, tctx, `document.body.getAttribute('data-node')`))
		if i == 0 {
			shot(t, tctx, "item-at-gate")
		}
		eval[bool](t, tctx, `(function () {
			var f = document.getElementById('gate-form');
			var a = document.createElement('input'); a.type = 'hidden'; a.name = 'action'; a.value = 'approve';
			f.appendChild(a); f.submit(); return true; })()`)
		// The dashboard's confirmation names what is posted, as whom: confirm.
		require.NoError(t, chromedp.Do(tctx, chromedp.WaitVisible(chromedp.CSS(`#btn-confirm`)), chromedp.Click(chromedp.CSS(`#btn-confirm`))), out.String())
		waitOut(t, &out, done, "the terminal naming dana's decision at "+gate, func(s string) bool {
			return strings.Contains(s, "the prompt is answered: dana decided "+gate+" in the dashboard: approved (comment ")
		})
	}
	var loginAgain string
	select {
	case loginAgain = <-served:
	case err := <-done:
		t.Fatalf("the demo ended instead of serving: %v\n%s", err, out.String())
	case <-time.After(4 * time.Minute):
		t.Fatalf("the walk did not reach complete:\n%s", out.String())
	}
	narration := out.String()
	require.NotEmpty(t, loginAgain)
	require.Contains(t, narration, "done: issue #1 walked the whole loop")
	require.Equal(t, 3, strings.Count(narration, "dana (from the dashboard) → #1: Approved."), "the terminal names who posted each click's comment:\n%s", narration)
	require.NotContains(t, narration, "theloop → #1: Approved.", "a click's comment is dana's, not theloop's")

	// The walk as the checkout records it: the nodes entered (graph-state
	// nodes with an entry, not skipped), each gate's dwell, and the blocks
	// the agent met (its own log).
	between := func(s, from, to string) string {
		i := strings.Index(s, from)
		require.GreaterOrEqual(t, i, 0, "%q in the narration", from)
		rest := s[i+len(from):]
		return rest[:strings.Index(rest, to)]
	}
	dir := between(narration, "everything runs here, in ", ": a stand-in")
	checkout := between(narration, "trusting only the daemon's key, in ", ")")
	st, err := loop.NewStore(checkout, "").Load(context.Background(), demo.WorkItem)
	require.NoError(t, err)
	var entered []string
	for _, n := range st.Nodes.Keys() {
		rec := st.Record(n)
		if _, skipped := st.Skips.Get(n); rec.EnteredAt != "" && !skipped && rec.Outcome != graph.OutcomeSkipped {
			entered = append(entered, n)
		}
	}
	sort.Strings(entered)
	require.GreaterOrEqual(t, len(entered), 14, "the whole spec chain was walked: %v", entered)
	gates := []string{"design-approval", "human-approval", "phase-selection", "requirements-approval"}
	agentBlocks := map[string]int{}
	agentRecs, err := loop.MergeEvents([]string{filepath.Join(dir, "agent", "events.jsonl")}, loop.EventQuery{Event: graph.EventBlocked})
	require.NoError(t, err)
	for _, r := range agentRecs {
		h, _ := r.Get("hook")
		agentBlocks[h.(string)]++
	}
	require.Len(t, agentRecs, 2, "the scripted agent blocks twice on its walk")

	// The metrics page.
	type gateRow struct {
		Gate    string `json:"gate"`
		Decided string `json:"decided"`
		Waiting string `json:"waiting"`
		P50     string `json:"p50"`
	}
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(base+"/metrics"), chromedp.WaitVisible(chromedp.CSS(`#dwell`))))
	dwell := eval[[]gateRow](t, tctx, `Array.from(document.querySelectorAll('#dwell tr[data-gate]')).map(function (r) {
			return {gate: r.dataset.gate, decided: r.dataset.decided, waiting: r.dataset.waiting, p50: r.dataset.p50Ms}; })`)
	blocks := eval[map[string]string](t, tctx, `Object.fromEntries(Array.from(document.querySelectorAll('#blocks tr[data-hook]')).map(function (r) { return [r.dataset.hook, r.dataset.count]; }))`)
	through := eval[map[string]string](t, tctx, `Object.fromEntries(Array.from(document.querySelectorAll('#throughput g[data-node]')).map(function (g) { return [g.dataset.node, g.dataset.total]; }))`)
	shot(t, tctx, "metrics")
	var dwellGates []string
	for _, r := range dwell {
		dwellGates = append(dwellGates, r.Gate)
		require.Equal(t, "1", r.Decided, "%s decided once", r.Gate)
		require.Equal(t, "0", r.Waiting, "%s: nothing waits at a finished walk", r.Gate)
		rec := st.Record(r.Gate)
		in, out := parseTime(t, rec.EnteredAt), parseTime(t, rec.ExitedAt)
		ms, err := strconv.Atoi(r.P50)
		require.NoError(t, err)
		// graph-state.json keeps seconds: the page's dwell is within a second of it.
		require.InDelta(t, out.Sub(in).Milliseconds(), ms, 1500, "%s's dwell", r.Gate)
	}
	require.Equal(t, gates, dwellGates, "the four gates, each with its dwell")
	wantBlocks := map[string]string{}
	for h, n := range agentBlocks {
		wantBlocks[h] = strconv.Itoa(n)
	}
	require.Equal(t, wantBlocks, blocks, "the blocks the agent met, by hook")
	var throughNodes []string
	for n, total := range through {
		throughNodes = append(throughNodes, n)
		require.NotEqual(t, "0", total, n)
	}
	sort.Strings(throughNodes)
	require.Equal(t, entered, throughNodes, "a throughput row for every node entered")

	// /metrics on loopd's socket counts the same.
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", filepath.Join(dir, "state", "loopd.sock"))
	}}}
	mresp, err := hc.Get("http://loopd/metrics")
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(mresp.Body)
	mresp.Body.Close()
	require.NoError(t, err)
	var promGates []string
	for _, m := range fams["theloop_gate_dwell_seconds"].GetMetric() {
		require.Equal(t, uint64(1), m.GetHistogram().GetSampleCount())
		promGates = append(promGates, m.GetLabel()[0].GetValue())
	}
	sort.Strings(promGates)
	require.Equal(t, gates, promGates, "/metrics: the same four gate dwells")
	promBlocks := map[string]string{}
	for _, m := range fams["theloop_graph_blocks_total"].GetMetric() {
		promBlocks[m.GetLabel()[0].GetValue()] = strconv.Itoa(int(m.GetCounter().GetValue()))
	}
	require.Equal(t, wantBlocks, promBlocks, "/metrics: the same blocks by hook")
	promAdvanced := 0.0
	for _, m := range fams["theloop_graph_transitions_total"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "advanced" {
			promAdvanced = m.GetCounter().GetValue()
		}
	}

	// `loopctl events` reads the same stream.
	loopctl := filepath.Join(t.TempDir(), "loopctl")
	build := exec.Command("go", "build", "-o", loopctl, "github.com/theloop-dev/theloop/cmd/loopctl")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building loopctl: %v\n%s", err, b)
	}
	cmd := exec.Command(loopctl, "events", "--state-root", filepath.Join(dir, "state"), "--work-item", ref, "--event", "graph.", "--format", "json")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	cmd.Dir = t.TempDir()
	b, err := cmd.Output()
	require.NoError(t, err, string(b))
	var evs []map[string]any
	require.NoError(t, json.Unmarshal(b, &evs))
	count := map[string]int{}
	ctlBlocks := map[string]string{}
	var advances []string
	for _, e := range evs {
		count[e["event"].(string)]++
		if e["event"] == graph.EventAdvanced {
			advances = append(advances, fmt.Sprintf("%v→%v (%v)", e["node"], e["to"], e["basis"]))
		}
		if e["event"] == graph.EventBlocked {
			h, _ := e["hook"].(string)
			n, _ := strconv.Atoi(ctlBlocks[h])
			ctlBlocks[h] = strconv.Itoa(n + 1)
		}
	}
	require.Equal(t, wantBlocks, ctlBlocks, "loopctl events: the same blocks")
	require.Equal(t, float64(count[graph.EventAdvanced]), promAdvanced, "loopctl events and /metrics: the same advances")
	require.Equal(t, len(entered)-1, count[graph.EventAdvanced], "one advance out of every node entered but the last: %v, entered %v", advances, entered)

	// The board: done, finished at a time, no clock.
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`#board`))))
	row := `document.querySelector('#board tr[data-ref="` + ref + `"]')`
	state := eval[string](t, tctx, row+`.getAttribute('data-state')`)
	age := eval[string](t, tctx, row+`.querySelector('[data-f=age]').textContent`)
	since := eval[string](t, tctx, row+`.querySelector('[data-f=age]').getAttribute('data-since')`)
	shot(t, tctx, "board")
	require.Equal(t, "done", state)
	require.Regexp(t, regexp.MustCompile(`^finished \d{4}-\d\d-\d\d \d\d:\d\d UTC$`), age)
	require.Empty(t, since, "no running clock")

	// The item page: done, finished, nothing current, nothing missing, a
	// timeline group for every node entered, typed and folded.
	require.NoError(t, chromedp.Do(tctx, chromedp.Navigate(itemURL), chromedp.WaitVisible(chromedp.CSS(`#timeline`))))
	itemState := eval[string](t, tctx, `document.getElementById('item-state').textContent`)
	finished := eval[string](t, tctx, `(document.getElementById('item-finished') || {textContent: ''}).textContent`)
	marks := eval[map[string]string](t, tctx, `Object.fromEntries(Array.from(document.querySelectorAll('#graph g.node')).map(function (g) { return [g.dataset.node, g.dataset.mark]; }))`)
	statuses := eval[[]string](t, tctx, `Array.from(document.querySelectorAll('[data-artifact-status]')).map(function (td) { return td.dataset.artifactStatus; })`)
	stays := eval[[]string](t, tctx, `Array.from(document.querySelectorAll('#timeline details.stay')).map(function (d) { return d.dataset.node; })`)
	kinds := eval[[]string](t, tctx, `Array.from(new Set(Array.from(document.querySelectorAll('#timeline li.step')).map(function (l) { return l.dataset.kind; })))`)
	raw := eval[int](t, tctx, `document.querySelectorAll('#timeline li.step details.raw pre').length`)
	keyValue := eval[bool](t, tctx, `Array.from(document.querySelectorAll('#timeline li.step .what')).some(function (s) { return /\w=\S/.test(s.textContent); })`)
	shot(t, tctx, "item-done")
	require.Equal(t, "done", itemState)
	require.True(t, strings.HasPrefix(finished, "finished "), finished)
	for n, m := range marks {
		require.NotEqual(t, "current", m, "a finished walk has no current node (%s): %v", n, marks)
	}
	require.Equal(t, "passed", marks["complete"])
	require.NotContains(t, statuses, "missing", "a skipped node's artifact is not missing: %v", statuses)
	require.Contains(t, statuses, "skipped")
	var stayNodes []string
	for _, n := range stays {
		if n != "" && !slices.Contains(stayNodes, n) {
			stayNodes = append(stayNodes, n)
		}
	}
	sort.Strings(stayNodes)
	require.Equal(t, entered, stayNodes, "the timeline has a group for every node entered")
	for _, k := range []string{"claim", "block", "decision", "paste", "ticket", "spawn"} {
		require.Contains(t, kinds, k, "the timeline types its rows")
	}
	require.Positive(t, raw, "the raw record is one click away")
	require.False(t, keyValue, "no key=value dumps")
	eval[bool](t, tctx, `document.querySelectorAll('#timeline details.stay').forEach(function (d) { d.open = true; }) || true`)
	shot(t, tctx, "item-timeline-open", "#timeline")
	t.Logf("the timeline as the page reads:\n%s", eval[string](t, tctx, `document.getElementById('timeline').innerText`))

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, out.String())
	case <-time.After(90 * time.Second):
		t.Fatal("the demo did not stop after the cancel")
	}
}

// eval evaluates expr in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	require.NoError(t, err, expr)
	return v
}

func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err, s)
	return at
}
