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
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// jiraOperations are the Jira operations (see package ops).
var jiraOperations = []graph.Operation{ops.JiraAddComment, ops.JiraTransition, ops.JiraSetLabels, ops.JiraListComments,
	ops.JiraGetComment, ops.JiraSearchIssues}

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
	p.ops = map[graph.Operation]opFunc{ops.JiraAddComment: j.addComment, ops.JiraTransition: j.transition,
		ops.JiraSetLabels: j.setLabels, ops.JiraListComments: j.listComments,
		ops.JiraGetComment: j.getComment, ops.JiraSearchIssues: j.searchIssues}
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
	key, err := workitem.ParseJiraKey(k)
	if err != nil {
		return "", fail(ErrInvalidArgument, "argument \"issue\": %q is not a Jira issue key like PROJ-123", clip(strings.TrimSpace(k), 40))
	}
	return key, nil
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

// setLabels adds labels to an issue; with replacePrefix it first drops the
// issue's other labels carrying the prefix. Jira takes the whole list in
// one PUT, so the issue's labels are read first (an idempotent GET, retried)
// and the PUT, which sets rather than adds, is safe to retry too.
func (j *jira) setLabels(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	key, err := jiraKey(args)
	if err != nil {
		return nil, err
	}
	want, err := argStrings(args, "labels")
	if err != nil {
		return nil, err
	}
	if len(want) == 0 {
		return nil, fail(ErrInvalidArgument, "argument \"labels\": name at least one label")
	}
	for _, l := range want {
		if l == "" || strings.ContainsAny(l, " \t\n") || len(l) > 255 {
			return nil, fail(ErrInvalidArgument, "argument \"labels\": %q is not a Jira label (no spaces, at most 255 bytes)", clip(l, 60))
		}
	}
	prefix, _ := args["replacePrefix"].(string)
	path := "/rest/api/2/issue/" + url.PathEscape(key)
	resp, err := j.exchange(ctx, st, http.MethodGet, path+"?fields=labels", nil, true, "the labels of "+key)
	if err != nil {
		return nil, err
	}
	var issue struct {
		Fields struct {
			Labels []string `json:"labels"`
		} `json:"fields"`
	}
	if err := json.Unmarshal(resp.body, &issue); err != nil {
		return nil, fail(ErrTransport, "Jira answered the labels of %s with malformed JSON: %v", key, jsonProblem(err))
	}
	keep := map[string]bool{}
	for _, l := range want {
		keep[strings.ToLower(l)] = true
	}
	out := []string{}
	for _, l := range issue.Fields.Labels {
		if prefix != "" && len(l) >= len(prefix) && strings.EqualFold(l[:len(prefix)], prefix) && !keep[strings.ToLower(l)] {
			continue
		}
		out = append(out, l)
		delete(keep, strings.ToLower(l))
	}
	for _, l := range want {
		if keep[strings.ToLower(l)] {
			out = append(out, l)
			delete(keep, strings.ToLower(l))
		}
	}
	payload, _ := json.Marshal(map[string]any{"fields": map[string]any{"labels": out}})
	if _, err := j.exchange(ctx, st, http.MethodPut, path, payload, true, "the labels of "+key); err != nil {
		return nil, err
	}
	labels := make([]any, len(out))
	for i, l := range out {
		labels[i] = l
	}
	return map[string]any{"labels": labels}, nil
}

// listComments reads an issue's latest 100 comments, oldest first.
func (j *jira) listComments(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	key, err := jiraKey(args)
	if err != nil {
		return nil, err
	}
	path := "/rest/api/2/issue/" + url.PathEscape(key) + "/comment?orderBy=-created&maxResults=100"
	resp, err := j.exchange(ctx, st, http.MethodGet, path, nil, true, "the comments of "+key)
	if err != nil {
		return nil, err
	}
	var ans struct {
		Comments []jiraCommentJSON `json:"comments"`
	}
	if err := json.Unmarshal(resp.body, &ans); err != nil {
		return nil, fail(ErrTransport, "Jira answered the comments of %s with malformed JSON: %v", key, jsonProblem(err))
	}
	out := make([]any, 0, len(ans.Comments))
	for i := len(ans.Comments) - 1; i >= 0; i-- {
		c := ans.Comments[i].fields()
		delete(c, "updatedAt")
		out = append(out, c)
	}
	return map[string]any{"comments": out}, nil
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}
