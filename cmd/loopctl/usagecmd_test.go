package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
)

// TestUsageVerbCallsTheSocket: `loopctl usage [ITEM] --by` asks loopd's
// GET /usage with the item and grouping, prints the rows and the total
// with the estimate's label ("—" for a group with an unpriced model), the
// budget and the harnesses whose usage is unknown; --format json is the
// API's answer, --jq filters it; a bad grouping is refused by the API.
func TestUsageVerbCallsTheSocket(t *testing.T) {
	cost := 0.25
	var got api.UsageQuery
	sock := serveAPI(t, apiserver.Backend{Usage: func(_ context.Context, q api.UsageQuery) (api.UsageReport, error) {
		got = q
		return api.UsageReport{Item: q.Item, By: q.By, Estimate: "estimate: tokens × usage.rates",
			Rows: []api.UsageRow{
				{Key: "design", Tokens: api.UsageTokens{Input: 10, Output: 5, CacheWrite: 1, CacheRead: 100, Total: 116}, Turns: 2, Models: []string{"claude-sonnet-4-5"}, Cost: &cost},
				{Key: "implementation", Tokens: api.UsageTokens{Input: 7, Total: 7}, Turns: 1, Models: []string{"mystery"}, Unpriced: []string{"mystery"}},
			},
			Total:   api.UsageRow{Tokens: api.UsageTokens{Input: 17, Output: 5, CacheWrite: 1, CacheRead: 100, Total: 123}, Turns: 3},
			Budget:  &api.UsageBudget{Scope: "item", Unit: "tokens", Limit: 100, Used: 123, State: "capped"},
			Unknown: []string{"github:acme/widgets#9 (cursor)"}}, nil
	}})
	f, io := testFactory(t, t.TempDir(), nil)
	run := func(args ...string) int {
		io.out.Reset()
		io.err.Reset()
		return Main(append([]string{"loopctl", "usage"}, append(args, "--socket", sock)...), f)
	}
	require.Equal(t, exitOK, run("github:acme/widgets#42"), io.err.String())
	require.Equal(t, api.UsageQuery{Item: "github:acme/widgets#42", By: "node"}, got)
	out := io.out.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Regexp(t, `^NODE +INPUT +OUTPUT +CACHE WRITE +CACHE READ +TOTAL +TURNS +EST\. COST +MODELS$`, lines[0])
	require.Regexp(t, `^design +10 +5 +1 +100 +116 +2 +≈0\.25 +claude-sonnet-4-5$`, lines[1])
	require.Regexp(t, `^implementation +7 +0 +0 +0 +7 +1 +— +mystery$`, lines[2], "no rate: tokens shown, cost —")
	require.Regexp(t, `^total +17 +5 +1 +100 +123 +3 +— +$`, lines[3])
	require.Contains(t, out, "budget (item, tokens): capped — 123 of 100")
	require.Contains(t, out, "unknown: github:acme/widgets#9 (cursor) keeps no record theloop reads")
	require.Contains(t, out, "estimate: tokens × usage.rates")

	require.Equal(t, exitOK, run("--by", "day", "--repository", "acme/widgets", "--format", "json"), io.err.String())
	require.Equal(t, api.UsageQuery{By: "day", Repository: "acme/widgets"}, got)
	want, err := api.NewSocketClient(sock).Raw(context.Background(), "GET", api.UsagePath, map[string][]string{"by": {"day"}, "repository": {"acme/widgets"}}, nil)
	require.NoError(t, err)
	require.JSONEq(t, string(want), io.out.String())

	require.Equal(t, exitOK, run("--jq", `.rows[] | select(.cost == null) | .key`), io.err.String())
	require.Equal(t, "implementation\n", io.out.String())

	require.Equal(t, exitRefused, run("--by", "colour"))
	require.Contains(t, io.err.String(), `by "colour": use one of node, session, day, model, item, repository`)
	require.Equal(t, exitRefused, run("a", "b"))
}
