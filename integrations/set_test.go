package integrations

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/run"
	"github.com/theloop-dev/theloop/run/runtest"
)

func TestTransportResolution(t *testing.T) {
	tests := []struct {
		name        string
		cfg         Config
		env         mapEnv
		gh          bool
		want        map[string]string // provider → transport
		unavailable map[string][]string
	}{
		{name: "no config: github auto, token first", env: mapEnv{"GH_TOKEN": "t0ken-value"}, gh: true,
			want: map[string]string{"github": "api"}},
		{name: "GITHUB_TOKEN counts too", cfg: Config{GitHub: &GitHubConfig{Transport: "auto"}}, env: mapEnv{"GITHUB_TOKEN": "t0ken-value"},
			want: map[string]string{"github": "api"}},
		{name: "auto falls to gh without a token", env: mapEnv{"GH_TOKEN": "   "}, gh: true,
			want: map[string]string{"github": "cli"}},
		{name: "a configured tokenEnv replaces the defaults", cfg: Config{GitHub: &GitHubConfig{API: GitHubAPIConfig{TokenEnv: []string{"LOOP_GH"}}}},
			env: mapEnv{"GH_TOKEN": "t0ken-value"}, gh: true, want: map[string]string{"github": "cli"}},
		{name: "a token command counts as a configured token", cfg: Config{GitHub: &GitHubConfig{API: GitHubAPIConfig{TokenCommand: []string{"pass", "show", "gh"}}}},
			gh: true, want: map[string]string{"github": "api"}},
		{name: "auto with neither fails closed naming both remedies",
			want:        map[string]string{"github": "auto"},
			unavailable: map[string][]string{"github": {"GH_TOKEN or GITHUB_TOKEN", "`gh`", "gh auth login", "export a token"}}},
		{name: "explicit api is never swapped for gh", cfg: Config{GitHub: &GitHubConfig{Transport: "api"}}, gh: true,
			want:        map[string]string{"github": "api"},
			unavailable: map[string][]string{"github": {"transport api", "no token in GH_TOKEN or GITHUB_TOKEN", "transport: cli"}}},
		{name: "explicit cli is never swapped for a token", cfg: Config{GitHub: &GitHubConfig{Transport: "cli"}}, env: mapEnv{"GH_TOKEN": "t0ken-value"},
			want:        map[string]string{"github": "cli"},
			unavailable: map[string][]string{"github": {"transport cli", "not found on PATH", "gh auth login"}}},
		{name: "explicit cli with gh", cfg: Config{GitHub: &GitHubConfig{Transport: "cli"}}, env: mapEnv{"GH_TOKEN": "t0ken-value"}, gh: true,
			want: map[string]string{"github": "cli"}},
		{name: "slack auto prefers the bot token", cfg: Config{Slack: &SlackConfig{Channel: "#loop"}},
			env:  mapEnv{"GH_TOKEN": "t0ken-value", DefaultSlackBotTokenEnv: "xoxb-123456", DefaultSlackWebhookURLEnv: "https://hooks.slack.com/services/T/B/X"},
			want: map[string]string{"github": "api", "slack": "api"}},
		{name: "slack auto takes the webhook", cfg: Config{Slack: &SlackConfig{}},
			env:  mapEnv{"GH_TOKEN": "t0ken-value", DefaultSlackWebhookURLEnv: "https://hooks.slack.com/services/T/B/X"},
			want: map[string]string{"github": "api", "slack": "webhook"}},
		{name: "slack auto with neither", cfg: Config{Slack: &SlackConfig{}}, env: mapEnv{"GH_TOKEN": "t0ken-value"},
			want:        map[string]string{"github": "api", "slack": "auto"},
			unavailable: map[string][]string{"slack": {DefaultSlackBotTokenEnv, DefaultSlackWebhookURLEnv}}},
		{name: "slack api needs a channel", cfg: Config{Slack: &SlackConfig{Transport: "api"}}, env: mapEnv{"GH_TOKEN": "t0ken-value", DefaultSlackBotTokenEnv: "xoxb-123456"},
			want:        map[string]string{"github": "api", "slack": "api"},
			unavailable: map[string][]string{"slack": {"integrations.slack.channel"}}},
		{name: "slack webhook explicit without its URL", cfg: Config{Slack: &SlackConfig{Transport: "webhook"}}, env: mapEnv{"GH_TOKEN": "t0ken-value", DefaultSlackBotTokenEnv: "xoxb-123456"},
			want:        map[string]string{"github": "api", "slack": "webhook"},
			unavailable: map[string][]string{"slack": {DefaultSlackWebhookURLEnv}}},
		{name: "jira basic auth", cfg: Config{Jira: &JiraConfig{API: JiraAPIConfig{BaseURL: "https://x.atlassian.net"}}},
			env:  mapEnv{"GH_TOKEN": "t0ken-value", DefaultJiraEmailEnv: "a@b.c", DefaultJiraTokenEnv: "jira-token"},
			want: map[string]string{"github": "api", "jira": "api"}},
		{name: "jira bearer auth", cfg: Config{Jira: &JiraConfig{API: JiraAPIConfig{BaseURL: "https://jira.corp", EmailEnv: "-"}}},
			env:  mapEnv{"GH_TOKEN": "t0ken-value", DefaultJiraTokenEnv: "jira-token"},
			want: map[string]string{"github": "api", "jira": "api"}},
		{name: "jira without email", cfg: Config{Jira: &JiraConfig{API: JiraAPIConfig{BaseURL: "https://x.atlassian.net"}}},
			env:         mapEnv{"GH_TOKEN": "t0ken-value", DefaultJiraTokenEnv: "jira-token"},
			want:        map[string]string{"github": "api", "jira": "api"},
			unavailable: map[string][]string{"jira": {DefaultJiraEmailEnv, `emailEnv: "-"`}}},
		{name: "jira without token", cfg: Config{Jira: &JiraConfig{API: JiraAPIConfig{BaseURL: "https://x.atlassian.net"}}},
			env:         mapEnv{"GH_TOKEN": "t0ken-value"},
			want:        map[string]string{"github": "api", "jira": "api"},
			unavailable: map[string][]string{"jira": {DefaultJiraTokenEnv}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(tc.env)
			if tc.gh {
				w.ghPath = "/usr/bin/gh"
			}
			s := w.set(t, tc.cfg)
			got := map[string]string{}
			for _, p := range s.Providers() {
				got[p.Name] = p.Transport
				wantWords := tc.unavailable[p.Name]
				if len(wantWords) == 0 {
					assert.Empty(t, p.Unavailable, p.Name)
					assert.NotEmpty(t, p.Operations, p.Name)
					continue
				}
				for _, word := range wantWords {
					assert.Contains(t, p.Unavailable, word, p.Name)
				}
				// Calls fail with the same remedy, and never reach a transport.
				op := map[string]graph.Operation{"github": ops.GitHubGetIssue, "slack": ops.SlackPostMessage, "jira": ops.JiraTransition}[p.Name]
				_, err := s.Call(context.Background(), op, map[string]any{"ref": "github:o/r#1", "text": "x", "issue": "A-1", "transition": "Done"})
				e := requireKind(t, err, ErrProviderUnavailable)
				assert.Contains(t, e.Error(), wantWords[0])
				assert.Zero(t, e.Attempts)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestExplicitCLIWithATokenStillUsesGh(t *testing.T) {
	fg := fixtureServer(t, "")
	fake := installFakeGh(t, fg.URL(), testToken)
	w := newWorld(mapEnv{"GH_TOKEN": testToken})
	w.realPath = true
	s := w.set(t, Config{GitHub: &GitHubConfig{Transport: TransportCLI, API: GitHubAPIConfig{BaseURL: "https://api.github.invalid"}}})
	_, err := s.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#7"})
	require.NoError(t, err)
	assert.Len(t, fake.calls(t), 1)
	require.Len(t, fg.requestsTo("/issues/7"), 1)
	assert.True(t, fg.requestsTo("/issues/7")[0].Authenticated, "gh sent its own login's token")
}

func TestTokenCommand(t *testing.T) {
	fg := fixtureServer(t, "")
	stub := runtest.NewStub(t)
	stub.Register("pass show github/theloop", run.Result{Stdout: []byte(testToken + "\n")}, nil)
	w := newWorld(mapEnv{})
	d := w.deps()
	d.Runner = stub
	s, err := New(Config{GitHub: &GitHubConfig{API: GitHubAPIConfig{BaseURL: fg.URL(), TokenCommand: []string{"pass", "show", "github/theloop"}}}}, d)
	require.NoError(t, err)
	for range 2 {
		_, err = s.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#7"})
		require.NoError(t, err)
	}
	assert.Len(t, stub.Calls(), 1, "the command runs once; the token stays in memory")

	t.Run("a failing command names neither its output nor the token", func(t *testing.T) {
		stub := runtest.NewStub(t)
		stub.Register("pass show", run.Result{Stdout: []byte("partial-secret-output"), Stderr: []byte("gpg: decryption failed"), ExitCode: 2},
			&run.ExitError{Result: run.Result{ExitCode: 2}})
		d := w.deps()
		d.Runner = stub
		s, err := New(Config{GitHub: &GitHubConfig{API: GitHubAPIConfig{BaseURL: fg.URL(), TokenCommand: []string{"pass", "show", "x"}}}}, d)
		require.NoError(t, err)
		_, err = s.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:octo/repo#7"})
		e := requireKind(t, err, ErrNoCredentials)
		assert.NotContains(t, e.Error(), "partial-secret-output")
		assert.Contains(t, e.Error(), "token command pass failed (exit 2)")
		assert.Equal(t, 1, e.Attempts)
	})
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		keys []string
	}{
		{"unknown github transport", Config{GitHub: &GitHubConfig{Transport: "sdk"}}, []string{"integrations.github.transport", `"sdk"`}},
		{"plain http base URL", Config{GitHub: &GitHubConfig{API: GitHubAPIConfig{BaseURL: "http://ghe.corp/api/v3"}}}, []string{"integrations.github.api.baseUrl", "https"}},
		{"base URL with credentials", Config{GitHub: &GitHubConfig{API: GitHubAPIConfig{BaseURL: "https://u:p@ghe.corp"}}}, []string{"integrations.github.api.baseUrl"}},
		{"not a URL", Config{GitHub: &GitHubConfig{API: GitHubAPIConfig{BaseURL: "ghe.corp"}}}, []string{"integrations.github.api.baseUrl"}},
		{"token env must be a name", Config{GitHub: &GitHubConfig{API: GitHubAPIConfig{TokenEnv: []string{"ghp_abc-def"}}}}, []string{"integrations.github.api.tokenEnv"}},
		{"negative timeout and attempts", Config{GitHub: &GitHubConfig{TimeoutSeconds: -1, MaxAttempts: -2}}, []string{"integrations.github.timeoutSeconds", "integrations.github.maxAttempts"}},
		{"cli host", Config{GitHub: &GitHubConfig{CLI: GitHubCLIConfig{Host: "https://ghe.corp"}}}, []string{"integrations.github.cli.host"}},
		{"slack transport", Config{Slack: &SlackConfig{Transport: "sdk"}}, []string{"integrations.slack.transport"}},
		{"slack env names", Config{Slack: &SlackConfig{API: SlackAPIConfig{TokenEnv: "xoxb-1"}, Webhook: SlackWebhookConfig{URLEnv: "https://hooks.slack.com/x"}}}, []string{"integrations.slack.api.tokenEnv", "integrations.slack.webhook.urlEnv"}},
		{"jira cli is refused with the fix", Config{Jira: &JiraConfig{Transport: "cli", API: JiraAPIConfig{BaseURL: "https://x.atlassian.net"}}}, []string{"integrations.jira.transport", "transport: api"}},
		{"jira needs a base URL", Config{Jira: &JiraConfig{}}, []string{"integrations.jira.api.baseUrl", "is required"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, newWorld(mapEnv{}).deps())
			require.ErrorIs(t, err, ErrInvalidConfig)
			for _, k := range tc.keys {
				assert.Contains(t, err.Error(), k)
			}
		})
	}
	for _, ok := range []string{"https://api.github.com", "https://ghe.corp/api/v3/", "http://127.0.0.1:8080", "http://localhost/api/v3", "http://[::1]:9/"} {
		assert.NoError(t, Config{GitHub: &GitHubConfig{API: GitHubAPIConfig{BaseURL: ok}}}.Validate(), ok)
	}
}

func TestConfigDecodesFromTheCLIConfig(t *testing.T) {
	src := `
github:
  transport: api
  timeoutSeconds: 12.5
  maxAttempts: 4
  api:
    baseUrl: https://ghe.corp/api/v3
    tokenEnv: [LOOP_GH_TOKEN, GH_TOKEN]
    tokenCommand: [pass, show, gh]
  cli:
    binary: /opt/gh/bin/gh
    host: ghe.corp
slack:
  transport: webhook
  channel: "#the-loop"
  api:
    tokenEnv: LOOP_SLACK
  webhook:
    urlEnv: LOOP_SLACK_HOOK
jira:
  transport: api
  api:
    baseUrl: https://example.atlassian.net
    emailEnv: LOOP_JIRA_EMAIL
    tokenEnv: LOOP_JIRA_TOKEN
`
	var cfg Config
	require.NoError(t, yaml.UnmarshalWithOptions([]byte(src), &cfg, yaml.DisallowUnknownField()))
	require.NoError(t, cfg.Validate())
	assert.Equal(t, Config{
		GitHub: &GitHubConfig{Transport: "api", TimeoutSeconds: 12.5, MaxAttempts: 4,
			API: GitHubAPIConfig{BaseURL: "https://ghe.corp/api/v3", TokenEnv: []string{"LOOP_GH_TOKEN", "GH_TOKEN"}, TokenCommand: []string{"pass", "show", "gh"}},
			CLI: GitHubCLIConfig{Binary: "/opt/gh/bin/gh", Host: "ghe.corp"}},
		Slack: &SlackConfig{Transport: "webhook", Channel: "#the-loop", API: SlackAPIConfig{TokenEnv: "LOOP_SLACK"}, Webhook: SlackWebhookConfig{URLEnv: "LOOP_SLACK_HOOK"}},
		Jira:  &JiraConfig{Transport: "api", API: JiraAPIConfig{BaseURL: "https://example.atlassian.net", EmailEnv: "LOOP_JIRA_EMAIL", TokenEnv: "LOOP_JIRA_TOKEN"}},
	}, cfg)

	var bad Config
	err := yaml.UnmarshalWithOptions([]byte("github:\n  token: ghp_x\n"), &bad, yaml.DisallowUnknownField())
	require.Error(t, err, "a credential written into the config is an unknown key")
}

// verifyGraph compiles a graph whose hooks declare needs.
func verifyGraph(t *testing.T, needs map[string][]graph.Operation) *graph.Graph {
	t.Helper()
	reg := graph.NewRegistry()
	var names []string
	for name, ops := range needs {
		reg.Register(graph.HookSpec{Name: name, Needs: ops, Run: func(context.Context, *graph.HookContext) graph.HookResult { return graph.Pass(nil) }})
		names = append(names, name)
	}
	return graphtest.NewGraph("pdlc-test").
		Node(graph.NodeSpec{ID: "design", Entry: graphtest.Hooks(names...)}).
		Node(graph.NodeSpec{ID: "done", Terminal: true}).
		Edge("design", "pass", "done").
		Start("design").
		MustCompile(reg)
}

func TestVerify(t *testing.T) {
	g := verifyGraph(t, map[string][]graph.Operation{
		"set-phase-label": {ops.GitHubSetLabels},
		"request-review":  {ops.GitHubAddComment, ops.GitHubListComments},
		"notify":          {ops.SlackPostMessage},
		"jira-sync":       {ops.JiraTransition},
		"typo":            {"github.set-label"},
		"alien":           {"linear.create-issue"},
	})
	w := newWorld(mapEnv{"GH_TOKEN": "t0ken-value"})
	s := w.set(t, Config{})
	err := s.Verify(g)
	var ve *VerifyError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "pdlc-test", ve.Graph)
	byHook := map[string]VerifyProblem{}
	for _, p := range ve.Problems {
		byHook[p.Hook] = p
	}
	require.Len(t, byHook, 4, err.Error())
	assert.Contains(t, byHook["notify"].Reason, "integrations.slack")
	assert.Equal(t, ops.SlackPostMessage, byHook["notify"].Operation)
	assert.Contains(t, byHook["jira-sync"].Reason, "integrations.jira")
	assert.Contains(t, byHook["typo"].Reason, "github.set-labels")
	assert.Contains(t, byHook["alien"].Reason, `"linear"`)
	assert.ErrorIs(t, err, ErrProviderNotConfigured)
	assert.ErrorIs(t, err, ErrUnsupportedOperation)
	for _, want := range []string{`hook "notify" needs slack.post-message`, `hook "typo" needs github.set-label:`} {
		assert.Contains(t, err.Error(), want)
	}

	t.Run("a caller may downgrade unconfigured providers", func(t *testing.T) {
		var strict []VerifyProblem
		for _, p := range ve.Problems {
			if !errors.Is(p.Err, ErrProviderNotConfigured) {
				strict = append(strict, p)
			}
		}
		assert.Len(t, strict, 2) // the typo and the unknown provider stay fatal
	})
	t.Run("an unavailable provider names its remedy at load", func(t *testing.T) {
		g := verifyGraph(t, map[string][]graph.Operation{"set-phase-label": {ops.GitHubSetLabels}})
		s := newWorld(mapEnv{}).set(t, Config{})
		err := s.Verify(g)
		require.ErrorIs(t, err, ErrProviderUnavailable)
		assert.Contains(t, err.Error(), `hook "set-phase-label" needs github.set-labels: github transport auto: no token in GH_TOKEN or GITHUB_TOKEN`)
	})
	t.Run("everything configured verifies", func(t *testing.T) {
		g := verifyGraph(t, map[string][]graph.Operation{
			"set-phase-label": {ops.GitHubSetLabels}, "notify": {ops.SlackPostMessage}, "jira-sync": {ops.JiraAddComment, ops.JiraTransition}, "pure": nil,
		})
		s := newWorld(mapEnv{"GH_TOKEN": "t0ken-value", DefaultSlackWebhookURLEnv: "https://hooks.slack.com/services/T/B/X", DefaultJiraEmailEnv: "a@b.c", DefaultJiraTokenEnv: "jira-token"}).
			set(t, Config{Slack: &SlackConfig{}, Jira: &JiraConfig{API: JiraAPIConfig{BaseURL: "https://x.atlassian.net"}}})
		require.NoError(t, s.Verify(g))
	})
}

func TestCallRefusesUnknownOperations(t *testing.T) {
	w := newWorld(mapEnv{"GH_TOKEN": "t0ken-value"})
	s := w.set(t, Config{})
	tests := []struct {
		op   graph.Operation
		kind error
		want string
	}{
		{"github.frobnicate", ErrUnsupportedOperation, "github.add-comment"},
		{"slack.post-message", ErrProviderNotConfigured, "integrations.slack is not configured"},
		{"linear.create", ErrUnsupportedOperation, `no integration provider "linear"`},
		{"", ErrUnsupportedOperation, "no integration provider"},
	}
	for _, tc := range tests {
		_, err := s.Call(context.Background(), tc.op, nil)
		e := requireKind(t, err, tc.kind)
		assert.Contains(t, e.Error(), tc.want)
	}
	assert.Equal(t, len(tests), w.sink.Count(EventCallFailed))

	t.Run("hooks tell a deliberate absence from an outage through the graph package", func(t *testing.T) {
		_, err := s.Call(context.Background(), ops.SlackPostMessage, map[string]any{"text": "x"})
		assert.ErrorIs(t, err, graph.ErrUnsupportedOperation, "not configured: skip")
		unavailable := newWorld(mapEnv{}).set(t, Config{Slack: &SlackConfig{}})
		_, err = unavailable.Call(context.Background(), ops.SlackPostMessage, map[string]any{"text": "x"})
		assert.NotErrorIs(t, err, graph.ErrUnsupportedOperation, "configured but unusable: a recorded failure")
		_, err = unavailable.Call(context.Background(), ops.GitHubGetIssue, map[string]any{"ref": "github:o/r#1"})
		assert.NotErrorIs(t, err, graph.ErrUnsupportedOperation)
	})
}

func TestImplemented(t *testing.T) {
	assert.Equal(t, githubOperations, Implemented("github", "cli"))
	assert.Equal(t, Implemented("github", "api"), Implemented("github", "cli"))
	assert.Equal(t, []graph.Operation{ops.SlackPostMessage}, Implemented("slack", "webhook"))
	assert.Nil(t, Implemented("jira", "cli"))
	for _, op := range githubOperations {
		assert.True(t, strings.HasPrefix(string(op), "github."))
	}
	assert.True(t, errors.Is(&Error{kinds: []error{ErrServer}}, ErrServer))
}
