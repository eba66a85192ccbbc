package integrations

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/run/runtest"
)

// The canaries are credentials no output may contain: errors, event fields,
// results. Each scenario below makes a service (or gh) echo them back.
const (
	canaryGitHub = "ghp_CANARY_0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	canarySlack  = "xoxb-CANARY-1111-2222-abcdefabcdef"
	canaryJira   = "ATATT_CANARY_jira_token_998877"
)

// noCanary fails when any canary, or a canary's base64 form, appears in s.
func noCanary(t *testing.T, what, s string) {
	t.Helper()
	for _, c := range []string{canaryGitHub, canarySlack, canaryJira} {
		assert.NotContains(t, s, c, what)
		assert.NotContains(t, s, base64.StdEncoding.EncodeToString([]byte(c)), what)
	}
	assert.NotContains(t, s, base64.StdEncoding.EncodeToString([]byte(jiraEmail+":"+canaryJira)), what)
}

// checkOutputs asserts the call's error, result and every emitted event
// field are free of canaries.
func checkOutputs(t *testing.T, w *world, res map[string]any, err error) {
	t.Helper()
	if err != nil {
		noCanary(t, "error", err.Error())
		var e *Error
		require.ErrorAs(t, err, &e)
		for _, k := range e.Unwrap() {
			noCanary(t, "wrapped error", k.Error())
		}
	}
	b, _ := json.Marshal(res)
	noCanary(t, "result", string(b))
	for _, ev := range w.sink.Events() {
		for _, f := range ev.Fields {
			noCanary(t, "event field "+f.Key, fmt.Sprint(f.Value))
		}
	}
}

func TestCredentialsNeverLeak(t *testing.T) {
	t.Run("github api: a server that echoes the Authorization header", func(t *testing.T) {
		fg := newFakeGitHub(t, "", "some-other-token")
		seedFixture(fg)
		fg.echoAuthorization(canaryGitHub)
		w := newWorld(mapEnv{"GH_TOKEN": canaryGitHub})
		s := apiSet(t, fg, w)
		res, err := s.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#7"})
		requireKind(t, err, ErrUnauthorized)
		assert.Contains(t, err.Error(), "Bearer "+redacted, "the echo reached the message, scrubbed")
		checkOutputs(t, w, res, err)
		require.Equal(t, 1, w.sink.Count(EventCallFailed))
	})
	t.Run("github api: the token in returned data", func(t *testing.T) {
		fg := newFakeGitHub(t, "", canaryGitHub)
		seedFixture(fg)
		fg.openAt("octo/repo", 30, "dana", "leak "+canaryGitHub)
		_, err := fg.sim.Comment("octo/repo", 30, "dana", "token: "+canaryGitHub)
		require.NoError(t, err)
		w := newWorld(mapEnv{"GH_TOKEN": canaryGitHub})
		s := apiSet(t, fg, w)
		for _, op := range []graph.Operation{ops.GitHubGetIssue, ops.GitHubListComments} {
			res, err := s.Call(context.Background(), op, map[string]any{"ref": "github:octo/repo#30"})
			require.NoError(t, err)
			checkOutputs(t, w, res, err)
		}
		for _, r := range fg.requestsTo("") {
			noCanary(t, "request URL", r.Path+"?"+r.Query)
		}
	})
	t.Run("github api: a token from the secret command", func(t *testing.T) {
		fg := newFakeGitHub(t, "", "some-other-token")
		seedFixture(fg)
		fg.echoAuthorization(canaryGitHub)
		stub := runtest.NewStub(t)
		stub.Register("secret-tool lookup", run.Result{Stdout: []byte(canaryGitHub + "\n")}, nil)
		w := newWorld(mapEnv{})
		d := w.deps()
		d.Runner = stub
		s, err := New(Config{GitHub: &GitHubConfig{API: GitHubAPIConfig{BaseURL: fg.URL(), TokenCommand: []string{"secret-tool", "lookup", "gh"}}}}, d)
		require.NoError(t, err)
		res, err := s.Call(context.Background(), ops.GitHubGetLabels, map[string]any{"ref": "github:octo/repo#7"})
		requireKind(t, err, ErrUnauthorized)
		checkOutputs(t, w, res, err)
	})
	t.Run("github cli: gh printing the token on stderr", func(t *testing.T) {
		fg := fixtureServer(t, "")
		fake := installFakeGh(t, fg.URL(), testToken)
		t.Setenv("GH_TOKEN", canaryGitHub)
		setFakeGhScenario(t, "echo-token")
		w := newWorld(mapEnv{"GH_TOKEN": canaryGitHub})
		w.realPath = true
		s := w.set(t, Config{GitHub: &GitHubConfig{Transport: TransportCLI}})
		res, err := s.Call(context.Background(), ops.GitHubAddComment, map[string]any{"ref": "github:octo/repo#7", "body": "hello"})
		requireKind(t, err, ErrTransport)
		assert.Contains(t, err.Error(), redacted)
		checkOutputs(t, w, res, err)
		for _, c := range fake.calls(t) {
			noCanary(t, "gh argv", strings.Join(c.Args, " "))
			noCanary(t, "gh stdin", c.Stdin)
		}
	})
	t.Run("slack api: an error echoing the bot token", func(t *testing.T) {
		fs := newFakeService(t, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"ok": false, "error": "invalid_auth " + r.Header.Get("Authorization")})
		})
		fs.fault(serviceFault{path: "/chat.postMessage", status: 400, times: 1, body: "bad token " + canarySlack})
		w := newWorld(mapEnv{"GH_TOKEN": "t0ken-value", DefaultSlackBotTokenEnv: canarySlack})
		s := w.set(t, Config{Slack: &SlackConfig{Channel: "#x", API: SlackAPIConfig{BaseURL: fs.srv.URL}}})
		for range 2 {
			res, err := s.Call(context.Background(), ops.SlackPostMessage, map[string]any{"text": "x " + canarySlack})
			require.Error(t, err)
			checkOutputs(t, w, res, err)
		}
	})
	t.Run("jira: an error echoing basic auth and the token", func(t *testing.T) {
		fj := newFakeService(t, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"errorMessages": []string{"bad header " + r.Header.Get("Authorization"), "token " + canaryJira}})
		})
		w := newWorld(mapEnv{"GH_TOKEN": "t0ken-value", DefaultJiraEmailEnv: jiraEmail, DefaultJiraTokenEnv: canaryJira})
		s := w.set(t, Config{Jira: &JiraConfig{API: JiraAPIConfig{BaseURL: fj.srv.URL}}})
		res, err := s.Call(context.Background(), ops.JiraAddComment, map[string]any{"issue": "LOOP-1", "body": "x"})
		requireKind(t, err, ErrUnauthorized)
		assert.Contains(t, err.Error(), "Basic "+redacted)
		checkOutputs(t, w, res, err)
	})
	t.Run("unavailable providers and Verify", func(t *testing.T) {
		w := newWorld(mapEnv{DefaultSlackBotTokenEnv: canarySlack})
		s := w.set(t, Config{Slack: &SlackConfig{Transport: TransportAPI}})
		for _, p := range s.Providers() {
			noCanary(t, "provider info", fmt.Sprint(p))
		}
		err := s.Verify(verifyGraph(t, map[string][]graph.Operation{"notify": {ops.SlackPostMessage}, "label": {ops.GitHubSetLabels}}))
		require.Error(t, err)
		noCanary(t, "verify", err.Error())
	})
}
