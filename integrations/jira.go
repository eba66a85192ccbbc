package integrations

// Jira has one transport, api: REST API version 2, which Jira Cloud and
// Jira Data Center both serve.
//
// There is deliberately no cli transport. The best-kept Jira CLI
// (ankitpokhrel/jira-cli) authenticates with the same API token this
// transport reads from the environment — so, unlike gh, it would bring no
// SSO or enterprise login the api transport lacks — and it prints
// human-oriented text without the new comment's id, so its answers could not
// match the api transport's (R6.10). A `transport: cli` for jira is refused
// at load, naming transport api as the fix.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/lazyre"
	"github.com/theloop-dev/theloop/ops"
)

// jiraOperations are the Jira operations (see package ops).
var jiraOperations = []graph.Operation{ops.JiraAddComment, ops.JiraTransition}

var jiraKeyRE = lazyre.New(`^[A-Z][A-Z0-9_]*-[1-9][0-9]{0,9}$`)

func (s *Set) newJira(c JiraConfig, d Deps) *provider {
	p := &provider{name: "jira", transport: TransportAPI, timeout: timeoutOf(c.TimeoutSeconds)}
	emailEnv := orDefault(c.API.EmailEnv, DefaultJiraEmailEnv)
	tokenEnv := orDefault(c.API.TokenEnv, DefaultJiraTokenEnv)
	registerEnv(s.red, d.Env, tokenEnv)
	tok := &secret{what: "Jira API token", env: []string{tokenEnv}, fix: "export an API token (Jira Cloud) or a personal access token (Jira Data Center)",
		lookup: d.Env, runner: d.Runner, red: s.red}
	if !tok.present() {
		p.unavailable = failFinal(ErrProviderUnavailable, "jira transport api: %s is not set — export an API token (Jira Cloud) or a personal access token (Data Center)", tokenEnv)
		return p
	}
	var email *secret
	if emailEnv != "-" {
		email = &secret{what: "Jira account email", env: []string{emailEnv}, fix: "export the account's email",
			lookup: d.Env, runner: d.Runner, red: &redactor{}}
		if !email.present() {
			p.unavailable = failFinal(ErrProviderUnavailable, "jira transport api: %s is not set — export the account email (Jira Cloud basic auth), or set integrations.jira.api.emailEnv: \"-\" to send the token as a bearer personal access token (Data Center)", emailEnv)
			return p
		}
	}
	base, _ := serviceURL(c.API.BaseURL) // validated
	j := &jira{client: d.HTTPClient, base: base.String(), token: tok, email: email, red: s.red,
		policy: &retryPolicy{service: "Jira", maxAttempts: attemptsOf(c.MaxAttempts), clock: d.Clock, sleep: d.Sleep,
			rateHint: "retry later, or lower theloop's call rate"}}
	p.ops = map[graph.Operation]opFunc{ops.JiraAddComment: j.addComment, ops.JiraTransition: j.transition}
	return p
}

type jira struct {
	client *http.Client
	base   string
	token  *secret
	email  *secret // nil: bearer auth
	red    *redactor
	policy *retryPolicy
}

func (j *jira) authHint() string {
	if j.email == nil {
		return "check the personal access token in " + j.token.env[0]
	}
	return "check " + j.email.env[0] + " and the API token in " + j.token.env[0]
}

func (j *jira) header(ctx context.Context) (http.Header, error) {
	tok, err := j.token.get(ctx)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	if j.email == nil {
		h.Set("Authorization", "Bearer "+tok)
	} else {
		email, err := j.email.get(ctx)
		if err != nil {
			return nil, err
		}
		j.red.add(email + ":" + tok)
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(email+":"+tok)))
	}
	h.Set("Accept", "application/json")
	h.Set("Content-Type", "application/json")
	return h, nil
}

func jiraKey(args map[string]any) (string, error) {
	k, err := argString(args, "issue", true)
	if err != nil {
		return "", err
	}
	k = strings.TrimPrefix(strings.TrimSpace(k), "jira:")
	if !jiraKeyRE.MatchString(k) {
		return "", fail(ErrInvalidArgument, "argument \"issue\": %q is not a Jira issue key like PROJ-123", clip(k, 40))
	}
	return k, nil
}

func (j *jira) exchange(ctx context.Context, st *callState, method, path string, body []byte, idempotent bool, what string) (response, error) {
	h, err := j.header(ctx)
	if err != nil {
		return response{}, err
	}
	resp, err := j.policy.do(ctx, st, idempotent, httpAttempt(j.client, method, j.base+path, h, body))
	if err != nil {
		return resp, err
	}
	if resp.status/100 != 2 {
		return resp, j.statusFailure(resp, what)
	}
	return resp, nil
}

func (j *jira) statusFailure(resp response, what string) *failure {
	detail := fmt.Sprintf("HTTP %d", resp.status)
	if m := jiraMessage(resp.body); m != "" {
		detail += ": " + m
	}
	f := &failure{status: resp.status}
	switch resp.status {
	case http.StatusUnauthorized:
		f.kinds, f.msg = []error{ErrUnauthorized}, fmt.Sprintf("Jira rejected the credentials (%s) — %s", detail, j.authHint())
	case http.StatusForbidden:
		f.kinds, f.msg = []error{ErrForbidden}, fmt.Sprintf("Jira refused %s (%s) — the account lacks permission", what, detail)
	case http.StatusNotFound:
		f.kinds, f.msg = []error{ErrNotFound}, fmt.Sprintf("%s: not found or not visible to the account (%s)", what, detail)
	default:
		f.kinds, f.msg = []error{ErrRejected}, fmt.Sprintf("Jira rejected %s (%s)", what, detail)
	}
	return f
}

// jiraMessage extracts Jira's error text ({errorMessages: [...], errors:
// {field: text}}), clipped; "" when there is none.
func jiraMessage(b []byte) string {
	var e struct {
		ErrorMessages []string          `json:"errorMessages"`
		Errors        map[string]string `json:"errors"`
	}
	if json.Unmarshal(b, &e) != nil {
		return ""
	}
	parts := append([]string(nil), e.ErrorMessages...)
	for k, v := range e.Errors {
		parts = append(parts, k+": "+v)
	}
	return clip(strings.Join(strings.Fields(strings.Join(parts, "; ")), " "), 200)
}

func (j *jira) addComment(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	key, err := jiraKey(args)
	if err != nil {
		return nil, err
	}
	body, err := argString(args, "body", true)
	if err != nil {
		return nil, err
	}
	payload, _ := json.Marshal(map[string]string{"body": body})
	resp, err := j.exchange(ctx, st, http.MethodPost, "/rest/api/2/issue/"+url.PathEscape(key)+"/comment", payload, false, "a comment on "+key)
	if err != nil {
		return nil, err
	}
	id, err := decodeJiraComment(resp.body)
	if err != nil {
		return nil, err
	}
	return map[string]any{"id": id}, nil
}

// decodeJiraComment reads the id of a created comment (a string in Jira's
// API).
func decodeJiraComment(b []byte) (string, error) {
	var c struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return "", fail(ErrTransport, "Jira answered the new comment with malformed JSON: %v", jsonProblem(err))
	}
	var s string
	if json.Unmarshal(c.ID, &s) == nil && s != "" {
		return clip(s, 40), nil
	}
	var n json.Number
	if json.Unmarshal(c.ID, &n) == nil && n != "" {
		return clip(n.String(), 40), nil
	}
	return "", fail(ErrTransport, "Jira answered the new comment without an id")
}

type jiraTransition struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	To   struct {
		Name string `json:"name"`
	} `json:"to"`
}

func decodeJiraTransitions(b []byte) ([]jiraTransition, error) {
	var ans struct {
		Transitions []jiraTransition `json:"transitions"`
	}
	if err := json.Unmarshal(b, &ans); err != nil {
		return nil, fail(ErrTransport, "Jira answered the transition list with malformed JSON: %v", jsonProblem(err))
	}
	return ans.Transitions, nil
}

// transition moves an issue through the transition whose id, name or
// target status matches (names case-insensitively).
func (j *jira) transition(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	key, err := jiraKey(args)
	if err != nil {
		return nil, err
	}
	want, err := argString(args, "transition", true)
	if err != nil {
		return nil, err
	}
	want = strings.TrimSpace(want)
	path := "/rest/api/2/issue/" + url.PathEscape(key) + "/transitions"
	resp, err := j.exchange(ctx, st, http.MethodGet, path, nil, true, "the transitions of "+key)
	if err != nil {
		return nil, err
	}
	ts, err := decodeJiraTransitions(resp.body)
	if err != nil {
		return nil, err
	}
	id := ""
	for _, match := range []func(jiraTransition) bool{
		func(t jiraTransition) bool { return t.ID == want },
		func(t jiraTransition) bool { return strings.EqualFold(t.Name, want) },
		func(t jiraTransition) bool { return strings.EqualFold(t.To.Name, want) },
	} {
		for _, t := range ts {
			if id == "" && t.ID != "" && match(t) {
				id = t.ID
			}
		}
	}
	if id == "" {
		var names []string
		for _, t := range ts {
			names = append(names, clip(t.Name, 40))
		}
		return nil, fail(ErrNotFound, "%s has no transition %q from its current status (available: %s) — fix the hook's transition parameter", key, clip(want, 60), strings.Join(names, ", "))
	}
	payload, _ := json.Marshal(map[string]any{"transition": map[string]string{"id": id}})
	if _, err := j.exchange(ctx, st, http.MethodPost, path, payload, false, "transition "+clip(want, 60)+" of "+key); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}
