package apiserver_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
)

// TestUsageOverTheSocket: GET /usage passes item, by and repository to
// the backend and answers its report; an unknown grouping is refused
// naming the valid ones; a daemon that counts no usage answers 503.
func TestUsageOverTheSocket(t *testing.T) {
	var got api.UsageQuery
	rep := api.UsageReport{By: "session", Rows: []api.UsageRow{{Key: "s1", Tokens: api.UsageTokens{Input: 3, Total: 3}, Turns: 1}}, Estimate: "estimate"}
	sock := serveSocket(t, func(apiserver.Peer) (string, error) { return "os-user:ops", nil },
		mux(apiserver.Backend{Usage: func(_ context.Context, q api.UsageQuery) (api.UsageReport, error) { got = q; return rep, nil }}))
	c := api.NewSocketClient(sock)
	ctx := context.Background()
	out, err := c.Usage(ctx, api.UsageQuery{Item: "github:o/r#1", By: "session", Repository: "o/r"})
	require.NoError(t, err)
	require.Equal(t, rep, out)
	require.Equal(t, api.UsageQuery{Item: "github:o/r#1", By: "session", Repository: "o/r"}, got)

	_, err = c.Usage(ctx, api.UsageQuery{By: "colour"})
	var ae *api.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusBadRequest, ae.Status)
	require.Contains(t, ae.Detail, `by "colour": use one of node, session, day`)

	sock = serveSocket(t, func(apiserver.Peer) (string, error) { return "os-user:ops", nil }, mux(apiserver.Backend{}))
	_, err = api.NewSocketClient(sock).Usage(ctx, api.UsageQuery{})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusServiceUnavailable, ae.Status)
}
