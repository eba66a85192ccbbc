package githubsim_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/ops"
)

// TestUserTokenCommentsAsThatUser: a Config.Users token is a human's own
// client (the dashboard's operator): its comments are authored by that
// login, the bot's by the bot, and an unknown token is refused.
func TestUserTokenCommentsAsThatUser(t *testing.T) {
	s := startSim(t, githubsim.Config{BotLogin: "loop-bot", Users: map[string]string{"dana-token": "dana"}})
	require.NoError(t, s.AddRepo("demo/widgets", githubsim.RepoOptions{}))
	_, err := s.OpenIssue("demo/widgets", "dana", "Export CSV", "")
	require.NoError(t, err)
	call(t, client(t, s, "dana-token"), ops.GitHubAddComment, map[string]any{"ref": "github:demo/widgets#1", "body": "Approved."})
	call(t, client(t, s, testToken), ops.GitHubAddComment, map[string]any{"ref": "github:demo/widgets#1", "body": "noted"})
	_, err = client(t, s, "nobody").Call(t.Context(), ops.GitHubAddComment, map[string]any{"ref": "github:demo/widgets#1", "body": "x"})
	require.Error(t, err)
	require.NoError(t, s.AddUser("erin-token", "erin"))
	require.Error(t, s.AddUser("", "erin"))
	call(t, client(t, s, "erin-token"), ops.GitHubAddComment, map[string]any{"ref": "github:demo/widgets#1", "body": "LGTM"})
	cs, err := s.Comments("demo/widgets", 1)
	require.NoError(t, err)
	require.Len(t, cs, 3)
	require.Equal(t, "dana", cs[0].Author)
	require.Equal(t, "loop-bot", cs[1].Author)
	require.Equal(t, "erin", cs[2].Author)
}
