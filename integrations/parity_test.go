package integrations

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ops"
)

// cliSet returns a Set whose github provider uses the cli transport through
// the fake gh installed on PATH (found the way production finds it: go-gh's
// gh.Path).
func cliSet(t *testing.T, w *world, cfg GitHubConfig) *Set {
	t.Helper()
	w.realPath = true
	cfg.Transport = TransportCLI
	s := w.set(t, Config{GitHub: &cfg})
	require.Empty(t, s.Providers()[0].Unavailable)
	return s
}

type paritySteps []struct {
	op   graph.Operation
	args map[string]any
}

// The sequence both transports run: every operation, the writes in
// between, and the error paths.
var paritySequence = paritySteps{
	{ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#7"}},
	{ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#8"}},
	{ops.GitHubGetLabels, map[string]any{"ref": "github:octo/repo#7"}},
	{ops.GitHubSetLabels, map[string]any{"ref": "github:octo/repo#7", "labels": []string{"loop:design"}, "replacePrefix": "loop:"}},
	{ops.GitHubSetLabels, map[string]any{"ref": "github:octo/repo#7", "labels": []any{"loop:design"}, "replacePrefix": "loop:"}},
	{ops.GitHubGetLabels, map[string]any{"ref": "github:octo/repo#7"}},
	{ops.GitHubListComments, map[string]any{"ref": "github:octo/repo#7"}},
	{ops.GitHubAddComment, map[string]any{"ref": "github:octo/repo#7", "body": "🤖 ready for review\n\n`$(touch /tmp/pwned)` --help; echo 'x' \"y\"\n<!-- the-loop:agent-comment -->\n"}},
	{ops.GitHubListComments, map[string]any{"ref": "github:octo/repo#7"}},
	{ops.GitHubListReviews, map[string]any{"ref": "github:octo/repo#8"}},
	{ops.GitHubListReviewComments, map[string]any{"ref": "github:octo/repo#8"}},
	{ops.GitHubListItemsByLabel, map[string]any{"repo": "octo/repo", "label": "the-loop: auto-execute", "state": "all"}},
	{ops.GitHubAddReaction, map[string]any{"ref": "github:octo/repo#7", "commentId": 101, "content": "eyes"}},
	{ops.GitHubAddReaction, map[string]any{"ref": "github:octo/repo#7", "content": "rocket"}},
	{ops.GitHubClosingIssues, map[string]any{"ref": "github:octo/repo#8"}},
	{ops.GitHubGetComment, map[string]any{"ref": "github:octo/repo#7", "commentId": 103}},
	{ops.GitHubGetComment, map[string]any{"ref": "github:octo/repo#8", "commentId": "301", "commentType": "review-comment"}},
	{ops.GitHubGetComment, map[string]any{"ref": "github:octo/repo#8", "commentId": 201, "commentType": "review"}},
	// Errors: a missing issue, a ref that is not a PR, an invalid argument.
	{ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#404"}},
	{ops.GitHubClosingIssues, map[string]any{"ref": "github:octo/repo#7"}},
	{ops.GitHubAddComment, map[string]any{"ref": "github:octo/repo#7", "body": ""}},
	{ops.GitHubSetLabels, map[string]any{"ref": "github:octo/repo#404", "labels": []string{"loop:x"}, "replacePrefix": "loop:"}},
	{ops.GitHubGetComment, map[string]any{"ref": "github:octo/repo#7", "commentId": 990000001}},
	{ops.GitHubGetComment, map[string]any{"ref": "github:octo/repo#7", "commentId": 103, "commentType": "discussion"}},
}

// runParity runs steps over both Sets and requires identical results, and
// for failures identical kinds, statuses and attempt counts.
func runParity(t *testing.T, api, cli *Set, steps paritySteps) {
	t.Helper()
	for i, st := range steps {
		ra, ea := api.Call(context.Background(), st.op, st.args)
		rc, ec := cli.Call(context.Background(), st.op, st.args)
		name := fmt.Sprintf("step %d %s", i, st.op)
		require.Equal(t, ra, rc, name)
		require.Equal(t, ea == nil, ec == nil, "%s: api error %v, cli error %v", name, ea, ec)
		if ea != nil {
			var xa, xc *Error
			require.ErrorAs(t, ea, &xa)
			require.ErrorAs(t, ec, &xc)
			assert.Equal(t, xa.kinds, xc.kinds, "%s: %v / %v", name, ea, ec)
			assert.Equal(t, xa.Status, xc.Status, name)
			assert.Equal(t, xa.Attempts, xc.Attempts, name)
		}
	}
}

// TestBothGitHubTransportsAnswerAlike is R6.10 at the integration level:
// the same operations over the api transport (net/http) and the cli
// transport (gh api) against identical GitHubs return identical maps. The
// hooks-level version runs the shipped hooks over both.
func TestBothGitHubTransportsAnswerAlike(t *testing.T) {
	// Each gh call starts a process; the Enterprise root runs a shorter
	// sequence that still crosses pages, writes and GraphQL.
	for _, tc := range []struct {
		prefix string
		steps  paritySteps
	}{
		{"", paritySequence},
		{"/api/v3", paritySteps{paritySequence[3], paritySequence[6], paritySequence[7], paritySequence[14], paritySequence[15], paritySequence[18]}},
	} {
		prefix := tc.prefix
		t.Run("root "+orDefault(prefix, "/"), func(t *testing.T) {
			apiGH, cliGH := fixtureServer(t, prefix), fixtureServer(t, prefix)
			fake := installFakeGh(t, cliGH.URL(), testToken)
			api := apiSet(t, apiGH, newWorld(mapEnv{"GH_TOKEN": testToken}))
			cli := cliSet(t, newWorld(mapEnv{}), GitHubConfig{})

			runParity(t, api, cli, tc.steps)
			assert.Equal(t, apiGH.labelsOf("octo/repo", 7), cliGH.labelsOf("octo/repo", 7))
			assert.Equal(t, apiGH.comments("octo/repo", 7), cliGH.comments("octo/repo", 7))
			assert.Equal(t, apiGH.reactionList(), cliGH.reactionList())

			// The same faults on both sides: retried alike, failed alike.
			for _, g := range []*fakeGitHub{apiGH, cliGH} {
				g.fault(fault{path: "/issues/8", status: 502, times: 1})
				g.fault(fault{path: "/issues/7/labels", status: 500})
				g.fault(fault{method: http.MethodPost, path: "/issues/7/comments", status: 503})
				g.fault(fault{path: "/issues/9", status: 429, times: 1, header: map[string]string{"Retry-After": "1"}})
				g.noGraphQLClosingIssues()
			}
			runParity(t, api, cli, paritySteps{
				{ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#8"}},
				{ops.GitHubGetLabels, map[string]any{"ref": "github:octo/repo#7"}},
				{ops.GitHubAddComment, map[string]any{"ref": "github:octo/repo#7", "body": "x"}},
				{ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#9"}},
				{ops.GitHubClosingIssues, map[string]any{"ref": "github:octo/repo#8"}},
			})

			t.Run("bodies travel on stdin, never on the command line", func(t *testing.T) {
				calls := fake.calls(t)
				require.NotEmpty(t, calls)
				sawComment := false
				for _, c := range calls {
					require.GreaterOrEqual(t, len(c.Args), 4)
					assert.Equal(t, []string{"api", "--include", "--method"}, c.Args[:3])
					for _, a := range c.Args {
						assert.NotContains(t, a, "ready for review")
						assert.NotContains(t, a, "$(")
					}
					if c.Stdin != "" {
						assert.True(t, slices.Contains(c.Args, "--input"), "stdin without --input -: %v", c.Args)
						assert.True(t, json.Valid([]byte(c.Stdin)))
					}
					if strings.Contains(c.Stdin, "ready for review") {
						sawComment = true
					}
				}
				assert.True(t, sawComment, "the comment body reached gh on stdin")
			})
		})
	}
}

func TestGitHubCLITransport(t *testing.T) {
	t.Run("a ref's host becomes --hostname, else the configured host", func(t *testing.T) {
		gh := fixtureServer(t, "/api/v3")
		fake := installFakeGh(t, gh.URL(), testToken)
		s := cliSet(t, newWorld(mapEnv{}), GitHubConfig{CLI: GitHubCLIConfig{Host: "GHE.corp.example"}})
		_, err := s.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:other.example:8443/octo/repo#7"})
		require.NoError(t, err)
		_, err = s.Call(context.Background(), ops.GitHubListComments, map[string]any{"ref": "github:octo/repo#7"})
		require.NoError(t, err)
		calls := fake.calls(t)
		require.Len(t, calls, 4) // one issue, three comment pages
		assert.Equal(t, "other.example:8443", argAfter(calls[0].Args, "--hostname"))
		for _, c := range calls[1:] {
			assert.Equal(t, "ghe.corp.example", argAfter(c.Args, "--hostname"))
		}
		assert.Equal(t, "repos/octo/repo/issues/7/comments?page=2&per_page=100", calls[2].Args[len(calls[2].Args)-1])
	})
	t.Run("not logged in is final and names gh auth login", func(t *testing.T) {
		gh := fixtureServer(t, "")
		installFakeGh(t, gh.URL(), testToken)
		setFakeGhScenario(t, "not-logged-in")
		w := newWorld(mapEnv{})
		s := cliSet(t, w, GitHubConfig{})
		_, err := s.Call(context.Background(), ops.GitHubGetLabels, map[string]any{"ref": "github:octo/repo#7"})
		e := requireKind(t, err, ErrUnauthorized)
		assert.Equal(t, 1, e.Attempts)
		assert.Contains(t, e.Error(), "gh auth login")
		assert.Empty(t, w.sleep.recorded())
	})
	t.Run("output that is not an HTTP answer", func(t *testing.T) {
		gh := fixtureServer(t, "")
		installFakeGh(t, gh.URL(), testToken)
		setFakeGhScenario(t, "garbage")
		s := cliSet(t, newWorld(mapEnv{}), GitHubConfig{})
		_, err := s.Call(context.Background(), ops.GitHubGetLabels, map[string]any{"ref": "github:octo/repo#7"})
		requireKind(t, err, ErrTransport)
	})
	t.Run("a slow gh is killed at the deadline", func(t *testing.T) {
		gh := fixtureServer(t, "")
		gh.fault(fault{path: "/issues/7", slow: true})
		installFakeGh(t, gh.URL(), testToken)
		s := cliSet(t, newWorld(mapEnv{}), GitHubConfig{TimeoutSeconds: 0.3})
		_, err := s.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#7"})
		requireKind(t, err, ErrTimeout)
	})
	t.Run("gh removed after start-up", func(t *testing.T) {
		w := newWorld(mapEnv{})
		w.ghPath = "/nonexistent/gh"
		s := w.set(t, Config{GitHub: &GitHubConfig{Transport: TransportCLI}})
		_, err := s.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#7"})
		e := requireKind(t, err, ErrProviderUnavailable)
		assert.Contains(t, e.Error(), "install GitHub CLI")
	})
}

func argAfter(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
