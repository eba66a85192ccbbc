package githubsim_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/ops"
)

// The real client lists a hook's deliveries page by page (cursor), newest
// first, for a repository and for its organization, and asks for a
// redelivery, which the stand-in sends under the same guid.
func TestRealClientHookDeliveries(t *testing.T) {
	var answer atomic.Int32
	answer.Store(http.StatusServiceUnavailable)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(int(answer.Load())) }))
	defer recv.Close()
	s := startSim(t, githubsim.Config{PageSize: 2})
	set := client(t, s, testToken)
	require.NoError(t, s.AddRepo("octo/demo", githubsim.RepoOptions{}))
	hook, err := s.AddHook(githubsim.Hook{URL: recv.URL + "/gh-webhook", Secret: "x"})
	require.NoError(t, err)
	for range 3 {
		_, err := s.OpenIssue("octo/demo", "dana", "t", "b")
		require.NoError(t, err)
	}
	require.NoError(t, s.WaitDeliveries(context.Background()))

	hooks := call(t, set, ops.GitHubListHooks, map[string]any{"repo": "octo/demo"})["hooks"].([]any)
	require.Len(t, hooks, 1)
	require.Equal(t, int(hook), hooks[0].(map[string]any)["id"])
	require.Equal(t, recv.URL+"/gh-webhook", hooks[0].(map[string]any)["url"])

	var all []map[string]any
	for _, scope := range []map[string]any{{"repo": "octo/demo"}, {"org": "octo"}} {
		all = nil
		cursor := ""
		for page := 0; page < 5; page++ {
			args := map[string]any{"hookId": int(hook)}
			for k, v := range scope {
				args[k] = v
			}
			if cursor != "" {
				args["cursor"] = cursor
			}
			res := call(t, set, ops.GitHubListHookDeliveries, args)
			for _, d := range res["deliveries"].([]any) {
				all = append(all, d.(map[string]any))
			}
			if cursor = res["cursor"].(string); cursor == "" {
				break
			}
		}
		require.Len(t, all, 3, "%v: every delivery, over two pages", scope)
		require.Greater(t, all[0]["id"].(int), all[2]["id"].(int), "newest first")
		require.Equal(t, 503, all[0]["statusCode"])
		require.Equal(t, "issues", all[0]["event"])
	}

	answer.Store(http.StatusAccepted)
	call(t, set, ops.GitHubRedeliverHookDelivery, map[string]any{"repo": "octo/demo", "hookId": int(hook), "deliveryId": all[2]["id"]})
	require.NoError(t, s.WaitDeliveries(context.Background()))
	ds := s.Deliveries()
	last := ds[len(ds)-1]
	require.True(t, last.Redelivery)
	require.Equal(t, all[2]["guid"], last.ID)
	require.True(t, last.OK())
	require.Equal(t, 1, s.RedeliveryRequests())

	_, err = set.Call(context.Background(), ops.GitHubRedeliverHookDelivery, map[string]any{"repo": "octo/demo", "hookId": int(hook), "deliveryId": 1})
	require.Error(t, err, "an unknown attempt is 404")
	_, err = set.Call(context.Background(), ops.GitHubListHookDeliveries, map[string]any{"repo": "octo/demo", "hookId": 0})
	require.Error(t, err)
}
