package githubsim_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/ops"
)

// TestConcurrentUse has people and theloop's client change the same issues
// at once (run with -race): every change lands and every change produces
// exactly one delivery, per issue in the order the changes were made.
func TestConcurrentUse(t *testing.T) {
	rc := newReceiver(t, "k")
	s := startSim(t, githubsim.Config{Hooks: []githubsim.Hook{{URL: rc.srv.URL, Secret: "k"}}})
	const issues, perIssue = 4, 15
	for i := range issues {
		_, err := s.OpenIssue("demo/widgets", "dana", fmt.Sprintf("issue %d", i), "")
		require.NoError(t, err)
	}
	set := client(t, s, testToken)
	var wg sync.WaitGroup
	for i := 1; i <= issues; i++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range perIssue {
				_, err := s.Comment("demo/widgets", i, "dana", fmt.Sprintf("human %d", j))
				assert.NoError(t, err)
			}
		}()
		go func() {
			defer wg.Done()
			ref := fmt.Sprintf("github:demo/widgets#%d", i)
			for j := range perIssue {
				_, err := set.Call(t.Context(), ops.GitHubAddComment, map[string]any{"ref": ref, "body": fmt.Sprintf("bot %d", j)})
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	wait(t, s)
	got := rc.got()
	require.Len(t, got, issues+issues*2*perIssue)
	next := map[string]map[string]int{} // issue → author → next index
	for _, g := range got[issues:] {
		n := str(g.payload, "issue", "number")
		who := str(g.payload, "sender", "login")
		if next[n] == nil {
			next[n] = map[string]int{}
		}
		body := str(g.payload, "comment", "body")
		prefix := map[string]string{"dana": "human", "theloop-bot": "bot"}[who]
		require.Equal(t, fmt.Sprintf("%s %d", prefix, next[n][who]), body, "issue %s", n)
		next[n][who]++
	}
	for i := 1; i <= issues; i++ {
		cs, err := s.Comments("demo/widgets", i)
		require.NoError(t, err)
		require.Len(t, cs, 2*perIssue)
	}
}
