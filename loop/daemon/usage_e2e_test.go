package daemon_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/fakeclaude"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon"
	"github.com/theloop-dev/theloop/loop/daemon/usage"
	"github.com/theloop-dev/theloop/sessions"
)

// turnUsage is what the stand-in harness reports for each turn, in Claude
// Code's transcript fields.
var turnUsage = usage.Tokens{Input: 1000, Output: 200, CacheWrite: 300, CacheRead: 4000}

// usageHarness is the fake claude that also keeps a Claude Code
// transcript in its (world's private) home: one assistant message with
// turnUsage for every assignment it is given (a line naming the node it
// is now at), with the real CLI's fields (usage_test's real-CLI tests
// check the parser against those).
func usageHarness(t *testing.T, w *world) {
	t.Helper()
	turn := `node=""
  if [[ "$line" == *"you are now at node: "* ]]; then
    node=${line##*you are now at node: }; node=${node%%[^a-z0-9-]*}
  elif [[ "$line" == *"please do a turn"* ]]; then
    node=-
  fi
  if [ -n "$node" ]; then
    n=$((n + 1)) ts=$(date -u +%Y-%m-%dT%H:%M:%S.%3NZ)
    mkdir -p "$HOME/.claude/projects/p"
    printf '{"type":"assistant","timestamp":"%s","requestId":"req_%s_%d","message":{"id":"msg_%s_%d","model":"claude-sonnet-4-5","role":"assistant","usage":{"input_tokens":1000,"cache_creation_input_tokens":300,"cache_read_input_tokens":4000,"output_tokens":200}}}\n' "$ts" "$$" "$n" "$$" "$n" >> "$HOME/.claude/projects/p/$id.jsonl"
    printf '%s %s\n' "$ts" "$node" >> "$root/turns.log"
  fi
  [ "$line" = "__DIE__" ] && exit 3`
	script := strings.Replace(fakeclaude.Script, `[ "$line" = "__DIE__" ] && exit 3`, turn, 1)
	require.NotEqual(t, fakeclaude.Script, script, "the fake's read loop changed: update usageHarness")
	require.NoError(t, os.WriteFile(filepath.Join(w.claude, "bin", "claude"), []byte(script), 0o755))
}

// A demo-style walk with a stand-in harness reporting known usage: the
// usage watch charges each turn to the node the item stood at, and the
// API, loopctl's report, /metrics, the board and the item page show
// exactly those tokens split by node; a budget below the walk's usage
// warns once, then pauses the session at the cap with a comment and an
// audited event; an authorized `the-loop resume` lets it go on past that
// cap.
func TestUsageIsCountedPerNodeAndTheBudgetPauses(t *testing.T) {
	per := float64(turnUsage.Total())
	w := newWorld(t, func(c *daemon.Config) {
		c.Usage = daemon.UsageConfig{Poll: 50 * time.Millisecond,
			Rates:  usage.Rates{"claude-sonnet-4-5": {Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.3}},
			Budget: loop.BudgetSettings{WarnAt: 0.5, ItemTokens: int64(1.5 * per)}}
		c.Dashboard.Listen = "127.0.0.1:0"
	})
	usageHarness(t, w)
	ctx := context.Background()
	cl := api.NewSocketClient(w.d.ControlSocket())
	n := w.openLabeled()
	ref := w.item(n).String()

	// Turn 1 answers the spawn prompt, at phase-selection: over warnAt.
	w.eventually("the first turn counted", func() bool {
		rep, err := cl.Usage(ctx, api.UsageQuery{Item: ref})
		return err == nil && rep.Total.Turns >= 1
	})
	w.eventually("the warning on the ticket", func() bool { return w.commentContains(n, "budget warning") })

	// brainstorming's assignment is answered: at the cap.
	_, err := w.sim.Comment(repoFull, n, human, "the-loop execute")
	require.NoError(t, err)
	w.eventually("the session paused at its cap", func() bool { return w.status(n) == sessions.StatusPaused })
	w.eventually("the cap's comment on the ticket", func() bool { return w.commentContains(n, "paused at its budget cap") })

	// Exactly what the harness reported, split by the node it was at.
	checkByNode := func() api.UsageReport {
		t.Helper()
		turns := w.turnsByNode()
		var rep api.UsageReport
		w.eventually("every turn counted", func() bool {
			var err error
			rep, err = cl.Usage(ctx, api.UsageQuery{Item: ref, By: "node"})
			require.NoError(t, err)
			return rep.Total.Turns == int64(sumTurns(turns))
		})
		if len(rep.Rows) != len(turns) {
			evs, _ := loop.ReadEvents(w.cfg.EventLog.Path, loop.EventQuery{Event: "graph."})
			for _, e := range evs {
				t.Logf("%s %s %s", e.Time.Format("15:04:05.000"), e.Event, e.Line)
			}
			b, _ := os.ReadFile(filepath.Join(w.claude, "received.log"))
			t.Logf("received:\n%s", b)
		}
		require.Len(t, rep.Rows, len(turns), "%+v vs %v", rep.Rows, turns)
		for _, r := range rep.Rows {
			k := int64(turns[r.Key])
			require.Positive(t, k, "node %s: the harness had no turn there", r.Key)
			require.Equal(t, usage.WireTokens(usage.Tokens{Input: k * turnUsage.Input, Output: k * turnUsage.Output, CacheWrite: k * turnUsage.CacheWrite, CacheRead: k * turnUsage.CacheRead}), r.Tokens, "node %s", r.Key)
			require.Equal(t, k, r.Turns)
			require.NotNil(t, r.Cost)
			require.InDelta(t, float64(k)*(1000*3+200*15+300*3.75+4000*0.3)/1e6, *r.Cost, 1e-12)
		}
		return rep
	}
	rep := checkByNode()
	require.Contains(t, rowKeys(rep), "phase-selection")
	require.GreaterOrEqual(t, len(rep.Rows), 2, "split by node: %v", rowKeys(rep))
	require.NotNil(t, rep.Budget)
	require.Equal(t, "capped", rep.Budget.State)
	require.Contains(t, rep.Estimate, "estimate")
	require.Equal(t, 1, w.count("session.budget_capped"))

	// The MCP tool beside the API, on the same socket, says the same.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", w.d.ControlSocket())
	}}}
	ms, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: "http://loopd/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
	require.NoError(t, err)
	mres, err := ms.CallTool(ctx, &mcp.CallToolParams{Name: "usage", Arguments: map[string]any{"workItem": ref, "by": "node"}})
	require.NoError(t, err)
	require.False(t, mres.IsError, "%v", mres.Content)
	tot := mres.StructuredContent.(map[string]any)["total"].(map[string]any)["tokens"].(map[string]any)["total"]
	require.Equal(t, float64(rep.Total.Tokens.Total), tot)
	require.NoError(t, ms.Close())

	// /metrics, the audit log, "needs you", the board's figure, the item page.
	turns := w.turnsByNode()
	require.Equal(t, float64(turns["phase-selection"])*1000, w.counter("theloop_tokens_total", map[string]string{"node": "phase-selection", "kind": "input", "model": "claude-sonnet-4-5", "harness": "claude"}))
	require.Equal(t, float64(sumTurns(turns))*4000, w.counter("theloop_tokens_total", map[string]string{"repository": repoFull, "kind": "cache_read"}))
	w.d.FlushLogs()
	audit, err := os.ReadFile(filepath.Join(w.cfg.StateRoot, "logs", daemon.AuditLogName))
	require.NoError(t, err)
	require.Contains(t, string(audit), `"event":"session.budget_capped"`)
	needs, err := cl.Attention(ctx, "budget")
	require.NoError(t, err)
	require.Len(t, needs, 1)
	require.Contains(t, needs[0].Why, "budget cap reached")
	require.Regexp(t, ` · spent ≈\$0\.0\d · \d+k tok \(estimate\)$`, needs[0].Why, "the figure in the needs-you entry")
	dash := dashboardPages(t, w)
	board := dash(w.d.DashboardURL() + "/")
	require.Regexp(t, `data-f="cost" title="estimate \(docs/usage.md\)">≈\$0\.0\d · \d+k tok</span>`, board)
	page := dash(w.d.DashboardURL() + "/item?ref=" + url.QueryEscape(ref))
	for node := range turns {
		require.Contains(t, page, `<tr data-node="`+node+`"`)
	}
	require.Contains(t, page, "budget: capped")

	// Paused: a comment does not reach the agent.
	_, err = w.sim.Comment(repoFull, n, human, "note while capped: use blue")
	require.NoError(t, err)
	w.waitIdle()
	require.NotContains(t, w.received(), "use blue")

	// An authorized resume lets it go on past that cap, for good.
	_, err = w.sim.Comment(repoFull, n, human, "the-loop resume")
	require.NoError(t, err)
	w.eventually("the override logged", func() bool { return w.count("session.budget_overridden") == 1 })
	_, err = w.sim.Comment(repoFull, n, human, "please do a turn now")
	require.NoError(t, err)
	w.eventually("the turn after resume pasted", func() bool { return strings.Contains(w.received(), "please do a turn now") })
	checkByNode()
	time.Sleep(300 * time.Millisecond) // a few polls: the overridden cap does not pause it again
	require.Equal(t, sessions.StatusActive, w.status(n))
	require.Equal(t, 1, w.count("session.budget_capped"))
	require.Equal(t, 1, w.count("session.budget_warning"), "one warning")
}

// turnsByNode is the stand-in harness's own account of its turns (their
// times), each placed at the node loopd's event log says the item stood
// at then (its last graph.started, graph.advanced or graph.forced at or
// before the turn).
func (w *world) turnsByNode() map[string]int {
	w.d.FlushLogs()
	evs, err := loop.ReadEvents(w.cfg.EventLog.Path, loop.EventQuery{Event: "graph."})
	require.NoError(w.t, err)
	type stay struct {
		at   time.Time
		node string
	}
	var stays []stay
	for _, e := range evs {
		v, _ := e.Get("to")
		if e.Event == "graph.started" {
			v, _ = e.Get("node")
		} else if e.Event != "graph.advanced" && e.Event != "graph.forced" {
			continue
		}
		if s, _ := v.(string); s != "" {
			stays = append(stays, stay{e.Time, s})
		}
	}
	sort.SliceStable(stays, func(i, j int) bool { return stays[i].at.Before(stays[j].at) })
	b, _ := os.ReadFile(filepath.Join(w.claude, "turns.log"))
	out := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		ts, _, _ := strings.Cut(l, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		require.NoError(w.t, err, "turns.log: %q", l)
		node := ""
		for _, s := range stays {
			if !s.at.After(at) {
				node = s.node
			}
		}
		out[node]++
	}
	return out
}

func sumTurns(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func rowKeys(rep api.UsageReport) []string {
	var out []string
	for _, r := range rep.Rows {
		out = append(out, r.Key)
	}
	return out
}

func (w *world) commentContains(n int, s string) bool {
	cs, err := w.sim.Comments(repoFull, n)
	if err != nil {
		return false
	}
	for _, c := range cs {
		if strings.Contains(c.Body, s) {
			return true
		}
	}
	return false
}

// The repository's daily cap pauses the session at its first turn; a
// raised budget, applied by a reload, lets it go on by itself.
func TestUsageDailyCapReleasedByARaisedBudget(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) {
		c.Usage = daemon.UsageConfig{Poll: 50 * time.Millisecond, Budget: loop.BudgetSettings{WarnAt: 0.8, DayTokens: 1000}}
	})
	usageHarness(t, w)
	n := w.openLabeled()
	w.eventually("the session paused at the daily cap", func() bool { return w.status(n) == sessions.StatusPaused })
	w.eventually("the cap's comment", func() bool { return w.commentContains(n, "the repository's budget for today") })
	rep, err := api.NewSocketClient(w.d.ControlSocket()).Usage(context.Background(), api.UsageQuery{Item: w.item(n).String()})
	require.NoError(t, err)
	require.Equal(t, "repository-day", rep.Budget.Scope)
	require.Nil(t, rep.Total.Cost, "no rate card: tokens, cost —")

	next := w.cfg
	next.Usage.Budget.DayTokens = 1_000_000
	res, err := w.d.Reload(next)
	require.NoError(t, err)
	require.Contains(t, res.Applied, "routing.budget, usage.rates")
	w.eventually("released by the raised budget", func() bool { return w.status(n) == sessions.StatusActive && w.count("session.budget_released") == 1 })
	require.Zero(t, w.count("session.budget_overridden"), "a release is not a resume")
}

// A restart of loopd neither loses nor counts twice: the ledger and where
// each record was read to are kept together; the record is read on from
// there (its parser primed with what was counted).
func TestUsageSurvivesARestart(t *testing.T) {
	w := newWorld(t, func(c *daemon.Config) { c.Usage = daemon.UsageConfig{Poll: 50 * time.Millisecond} })
	usageHarness(t, w)
	ctx := context.Background()
	n := w.openLabeled()
	ref := w.item(n).String()
	total := func() int64 {
		rep, err := api.NewSocketClient(w.d.ControlSocket()).Usage(ctx, api.UsageQuery{Item: ref})
		if err != nil {
			return -1
		}
		return rep.Total.Turns
	}
	w.eventually("the first turn counted", func() bool { return total() == 1 })
	w.waitIdle()
	w.stop()
	w.start()
	require.Equal(t, int64(1), total(), "kept across the restart")
	_, err := w.sim.Comment(repoFull, n, human, "please do a turn now")
	require.NoError(t, err)
	w.eventually("the turn after the restart", func() bool { return sumTurns(w.turnsByNode()) == 2 })
	w.eventually("counted once", func() bool { return total() == 2 })
	time.Sleep(200 * time.Millisecond) // a few polls more: nothing counted twice
	require.Equal(t, int64(2), total())
}

// A cap in estimated cost (routing.budget.item.cost) works as a cap in
// tokens does: the first turn, past warnAt of it, warns on the ticket; the
// second reaches it and pauses the session with the cap's comment; the
// report says capped, in cost.
func TestUsageCostCapPausesTheSession(t *testing.T) {
	const rate = (1000*3 + 200*15 + 300*3.75 + 4000*0.3) / 1e6 // one turn's estimate, in dollars
	w := newWorld(t, func(c *daemon.Config) {
		c.Usage = daemon.UsageConfig{Poll: 50 * time.Millisecond,
			Rates:  usage.Rates{"claude-sonnet-4-5": {Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.3}},
			Budget: loop.BudgetSettings{WarnAt: 0.5, ItemCost: 1.5 * rate}}
	})
	usageHarness(t, w)
	ctx := context.Background()
	cl := api.NewSocketClient(w.d.ControlSocket())
	n := w.openLabeled()
	ref := w.item(n).String()

	w.eventually("the warning on the ticket", func() bool { return w.commentContains(n, "budget warning") })
	require.Equal(t, sessions.StatusActive, w.status(n), "warned, not paused: one turn is under the cap")
	_, err := w.sim.Comment(repoFull, n, human, "the-loop execute")
	require.NoError(t, err)
	w.eventually("the session paused at its cost cap", func() bool { return w.status(n) == sessions.StatusPaused })
	w.eventually("the cap's comment on the ticket", func() bool { return w.commentContains(n, "paused at its budget cap") })
	rep, err := cl.Usage(ctx, api.UsageQuery{Item: ref})
	require.NoError(t, err)
	require.NotNil(t, rep.Budget)
	require.Equal(t, "capped", rep.Budget.State)
	require.NotNil(t, rep.Total.Cost)
	require.GreaterOrEqual(t, *rep.Total.Cost, 1.5*rate, "capped at or past the cost cap")
	require.Equal(t, 1, w.count("session.budget_capped"))
	require.Equal(t, 1, w.count("session.budget_warning"), "one warning")
}
