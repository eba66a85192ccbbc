package apiserver_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
)

// TestAttentionOverTheSocket: GET /attention answers the backend's "needs
// you" list as it is (oldest first), over a real control socket to an
// admitted peer; kind=K keeps only those kinds, an unknown kind is refused
// naming the valid ones, and a daemon without the list answers 503.
func TestAttentionOverTheSocket(t *testing.T) {
	since := time.Date(2026, 5, 4, 8, 0, 0, 0, time.UTC)
	list := []api.AttentionItem{
		{Ref: "github:o/r#1", Title: "Widgets", Kind: "gate", Why: "design-approval waits for an authorized person's decision", Since: since, WaitingSeconds: 7200},
		{Ref: "github:o/r#2", Kind: "question", Why: "Blue or green?", Since: since.Add(time.Hour), WaitingSeconds: 3600},
		{Ref: "github:o/r#3", Kind: "capacity", Why: "node b declined it: at capacity (2 of 2 sessions)", Since: since.Add(90 * time.Minute), WaitingSeconds: 1800},
	}
	sock := serveSocket(t, func(apiserver.Peer) (string, error) { return "os-user:ops", nil },
		mux(apiserver.Backend{Attention: func(context.Context) ([]api.AttentionItem, error) { return list, nil }}))
	c := api.NewSocketClient(sock)
	ctx := context.Background()

	got, err := c.Attention(ctx)
	require.NoError(t, err)
	require.Equal(t, list, got)

	got, err = c.Attention(ctx, "question", "capacity")
	require.NoError(t, err)
	require.Equal(t, list[1:], got)

	got, err = c.Attention(ctx, "parked")
	require.NoError(t, err)
	require.NotNil(t, got)
	require.Empty(t, got)
	raw, err := c.Raw(ctx, "GET", api.AttentionPath, map[string][]string{"kind": {"parked"}}, nil)
	require.NoError(t, err)
	require.JSONEq(t, "[]", string(raw), "an empty list is [], never null")

	_, err = c.Attention(ctx, "gates")
	var ae *api.APIError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusBadRequest, ae.Status)
	require.Contains(t, ae.Detail, `kind "gates": use one of gate, question`)

	// A failing source is a 500 with its reason; none at all is a 503.
	sock = serveSocket(t, func(apiserver.Peer) (string, error) { return "os-user:ops", nil },
		mux(apiserver.Backend{Attention: func(context.Context) ([]api.AttentionItem, error) { return nil, errors.New("registry unreadable") }}))
	_, err = api.NewSocketClient(sock).Attention(ctx)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusInternalServerError, ae.Status)
	require.Contains(t, ae.Detail, "registry unreadable")
	sock = serveSocket(t, func(apiserver.Peer) (string, error) { return "os-user:ops", nil }, mux(apiserver.Backend{}))
	_, err = api.NewSocketClient(sock).Attention(ctx)
	require.ErrorAs(t, err, &ae)
	require.Equal(t, http.StatusServiceUnavailable, ae.Status)
}
