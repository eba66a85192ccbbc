package integrations

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ops"
)

// serviceRequest is one request a fakeService received.
type serviceRequest struct {
	Method, Path, Auth, Body string
}

// serviceFault answers matching requests (path substring) instead of the
// handler, times times (<= 0: always).
type serviceFault struct {
	path   string
	status int
	header map[string]string
	body   string
	times  int
	used   int
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fakeService is an httptest server for Slack and Jira: it records
// requests, answers queued faults first, then delegates to handler.
type fakeService struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []serviceRequest
	faults  []*serviceFault
	handler http.HandlerFunc
}

func newFakeService(t *testing.T, handler http.HandlerFunc) *fakeService {
	f := &fakeService{handler: handler}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		f.mu.Lock()
		f.reqs = append(f.reqs, serviceRequest{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Body: string(body)})
		var ft *serviceFault
		for _, c := range f.faults {
			if strings.Contains(r.URL.Path, c.path) && (c.times <= 0 || c.used < c.times) {
				c.used++
				ft = c
				break
			}
		}
		f.mu.Unlock()
		if ft != nil {
			for k, v := range ft.header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(ft.status)
			_, _ = io.WriteString(w, ft.body)
			return
		}
		f.handler(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeService) fault(ft serviceFault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults = append(f.faults, &ft)
}

func (f *fakeService) requests() []serviceRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]serviceRequest(nil), f.reqs...)
}

const (
	slackToken   = "xoxb-slack-test-token-1234"
	webhookPath  = "/services/T0001/B0001/webhooksecretpart"
	jiraEmail    = "loop@example.com"
	jiraAPIToken = "jira-api-token-5678"
)

func newFakeSlack(t *testing.T) *fakeService {
	return newFakeService(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/chat.postMessage":
			var in struct{ Channel, Text string }
			_ = json.NewDecoder(r.Body).Decode(&in)
			ans := map[string]any{"ok": true, "channel": "C0001", "ts": "1700000000.000100"}
			switch {
			case r.Header.Get("Authorization") != "Bearer "+slackToken:
				ans = map[string]any{"ok": false, "error": "invalid_auth"}
			case in.Channel == "#private":
				ans = map[string]any{"ok": false, "error": "not_in_channel"}
			case in.Channel == "#gone":
				ans = map[string]any{"ok": false, "error": "channel_not_found"}
			case in.Channel == "#weird":
				ans = map[string]any{"ok": false, "error": "Some <b>odd</b>\nerror"}
			}
			writeJSON(w, http.StatusOK, ans)
		case r.URL.Path == webhookPath:
			var in map[string]any
			if json.NewDecoder(r.Body).Decode(&in) != nil || in["text"] == "" {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, "invalid_payload")
				return
			}
			_, _ = io.WriteString(w, "ok")
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "no_service")
		}
	})
}

func TestSlackAPI(t *testing.T) {
	fs := newFakeSlack(t)
	newSlack := func(t *testing.T, token string) (*Set, *world) {
		w := newWorld(mapEnv{"GH_TOKEN": "t0ken-value", DefaultSlackBotTokenEnv: token})
		return w.set(t, Config{Slack: &SlackConfig{Channel: "#the-loop", API: SlackAPIConfig{BaseURL: fs.srv.URL + "/api"}}}), w
	}
	s, _ := newSlack(t, slackToken)
	got, err := s.Call(context.Background(), ops.SlackPostMessage, map[string]any{"text": "issue-7 is at *design*"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{}, got)
	_, err = s.Call(context.Background(), ops.SlackPostMessage, map[string]any{"text": "hi", "channel": "C0999"})
	require.NoError(t, err)
	reqs := fs.requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "Bearer "+slackToken, reqs[0].Auth)
	assert.JSONEq(t, `{"channel":"#the-loop","text":"issue-7 is at *design*"}`, reqs[0].Body)
	assert.JSONEq(t, `{"channel":"C0999","text":"hi"}`, reqs[1].Body)

	errs := []struct {
		name  string
		token string
		args  map[string]any
		kind  error
		want  string
	}{
		{"bot not in channel", slackToken, map[string]any{"text": "x", "channel": "#private"}, ErrForbidden, "invite the bot"},
		{"unknown channel", slackToken, map[string]any{"text": "x", "channel": "#gone"}, ErrNotFound, "channel_not_found"},
		{"revoked token", "xoxb-revoked-000000", map[string]any{"text": "x"}, ErrUnauthorized, DefaultSlackBotTokenEnv},
		{"an odd error code is sanitised", slackToken, map[string]any{"text": "x", "channel": "#weird"}, ErrRejected, "(someboddberror)"},
		{"no text", slackToken, map[string]any{"channel": "#x"}, ErrInvalidArgument, `"text"`},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			s, w := newSlack(t, tc.token)
			_, err := s.Call(context.Background(), ops.SlackPostMessage, tc.args)
			e := requireKind(t, err, tc.kind)
			assert.Contains(t, e.Error(), tc.want)
			assert.Equal(t, 1, w.sink.Count(EventCallFailed))
		})
	}
	t.Run("429 waits for Retry-After; a 5xx is not reposted", func(t *testing.T) {
		fs.fault(serviceFault{path: "/chat.postMessage", status: 429, times: 1, header: map[string]string{"Retry-After": "1"}})
		s, w := newSlack(t, slackToken)
		_, err := s.Call(context.Background(), ops.SlackPostMessage, map[string]any{"text": "x"})
		require.NoError(t, err)
		assert.Equal(t, []time.Duration{time.Second}, w.sleep.recorded())

		fs.fault(serviceFault{path: "/chat.postMessage", status: 503, times: 1})
		_, err = s.Call(context.Background(), ops.SlackPostMessage, map[string]any{"text": "x"})
		e := requireKind(t, err, ErrServer)
		assert.Equal(t, 1, e.Attempts)
	})
}

func TestSlackWebhook(t *testing.T) {
	fs := newFakeSlack(t)
	hookURL := fs.srv.URL + webhookPath
	newHook := func(t *testing.T, url string) (*Set, *world) {
		w := newWorld(mapEnv{"GH_TOKEN": "t0ken-value", DefaultSlackWebhookURLEnv: url})
		return w.set(t, Config{Slack: &SlackConfig{Transport: TransportWebhook, Channel: "#the-loop"}}), w
	}
	s, _ := newHook(t, hookURL)
	got, err := s.Call(context.Background(), ops.SlackPostMessage, map[string]any{"text": "issue-7 needs review"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{}, got)
	_, err = s.Call(context.Background(), ops.SlackPostMessage, map[string]any{"text": "same channel", "channel": "#the-loop"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"text":"issue-7 needs review"}`, fs.requests()[0].Body)

	t.Run("a webhook cannot switch channels", func(t *testing.T) {
		_, err := s.Call(context.Background(), ops.SlackPostMessage, map[string]any{"text": "x", "channel": "#other"})
		e := requireKind(t, err, ErrInvalidArgument)
		assert.Contains(t, e.Error(), "transport: api")
	})
	t.Run("a revoked webhook names the fix, never the URL", func(t *testing.T) {
		s, w := newHook(t, fs.srv.URL+"/services/T0001/B0001/revokedsecretpart")
		_, err := s.Call(context.Background(), ops.SlackPostMessage, map[string]any{"text": "x"})
		e := requireKind(t, err, ErrUnauthorized)
		assert.Contains(t, e.Error(), "create a new incoming webhook")
		assert.NotContains(t, e.Error(), "revokedsecretpart")
		ev, _ := w.sink.Events()[0].Get("error")
		assert.NotContains(t, ev, "revokedsecretpart")
	})
	t.Run("a webhook URL that is not https is refused unquoted", func(t *testing.T) {
		s, _ := newHook(t, "http://hooks.example.com/services/plainsecretpart")
		_, err := s.Call(context.Background(), ops.SlackPostMessage, map[string]any{"text": "x"})
		e := requireKind(t, err, ErrInvalidConfig)
		assert.NotContains(t, e.Error(), "plainsecretpart")
		assert.Contains(t, e.Error(), DefaultSlackWebhookURLEnv)
	})
	t.Run("an unreachable webhook names neither URL nor secret", func(t *testing.T) {
		s, _ := newHook(t, "http://127.0.0.1:1/services/T/B/unreachablesecretpart")
		_, err := s.Call(context.Background(), ops.SlackPostMessage, map[string]any{"text": "x"})
		e := requireKind(t, err, ErrTransport)
		assert.NotContains(t, e.Error(), "unreachablesecretpart")
		assert.Equal(t, 1, e.Attempts, "a post is not retried after a lost connection")
	})
}

func newFakeJira(t *testing.T) (*fakeService, *[]string) {
	var moved []string
	var mu sync.Mutex
	fj := newFakeService(t, func(w http.ResponseWriter, r *http.Request) {
		basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(jiraEmail+":"+jiraAPIToken))
		if a := r.Header.Get("Authorization"); a != basic && a != "Bearer "+jiraAPIToken {
			writeJSON(w, http.StatusUnauthorized, map[string]any{"errorMessages": []string{"You are not authenticated."}})
			return
		}
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/rest/api/2/issue/"), "/")
		if len(parts) != 2 || parts[0] != "LOOP-7" {
			writeJSON(w, http.StatusNotFound, map[string]any{"errorMessages": []string{"Issue does not exist or you do not have permission to see it."}, "errors": map[string]any{}})
			return
		}
		switch r.Method + " " + parts[1] {
		case "POST comment":
			var in struct{ Body string }
			_ = json.NewDecoder(r.Body).Decode(&in)
			writeJSON(w, http.StatusCreated, map[string]any{"id": "10001", "body": in.Body})
		case "GET transitions":
			writeJSON(w, http.StatusOK, map[string]any{"expand": "transitions", "transitions": []any{
				map[string]any{"id": "11", "name": "Start Progress", "to": map[string]any{"name": "In Progress"}},
				map[string]any{"id": "31", "name": "Close", "to": map[string]any{"name": "Done"}},
			}})
		case "POST transitions":
			var in struct {
				Transition struct{ ID string } `json:"transition"`
			}
			_ = json.NewDecoder(r.Body).Decode(&in)
			mu.Lock()
			moved = append(moved, in.Transition.ID)
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		default:
			writeJSON(w, http.StatusMethodNotAllowed, map[string]any{})
		}
	})
	return fj, &moved
}

func TestJira(t *testing.T) {
	fj, moved := newFakeJira(t)
	newJira := func(t *testing.T, env mapEnv, api JiraAPIConfig) (*Set, *world) {
		env["GH_TOKEN"] = "t0ken-value"
		w := newWorld(env)
		api.BaseURL = fj.srv.URL
		return w.set(t, Config{Jira: &JiraConfig{API: api}}), w
	}
	s, _ := newJira(t, mapEnv{DefaultJiraEmailEnv: jiraEmail, DefaultJiraTokenEnv: jiraAPIToken}, JiraAPIConfig{})
	got, err := s.Call(context.Background(), ops.JiraAddComment, map[string]any{"issue": "LOOP-7", "body": "design approved"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"id": "10001"}, got)
	assert.JSONEq(t, `{"body":"design approved"}`, fj.requests()[0].Body)

	// By id, by name (case-insensitively), by target status.
	for _, tr := range []string{"31", "start progress", "Done"} {
		got, err := s.Call(context.Background(), ops.JiraTransition, map[string]any{"issue": "jira:LOOP-7", "transition": tr})
		require.NoError(t, err, tr)
		assert.Equal(t, map[string]any{}, got)
	}
	assert.Equal(t, []string{"31", "11", "31"}, *moved)

	t.Run("bearer personal access token", func(t *testing.T) {
		s, _ := newJira(t, mapEnv{DefaultJiraTokenEnv: jiraAPIToken}, JiraAPIConfig{EmailEnv: "-"})
		_, err := s.Call(context.Background(), ops.JiraAddComment, map[string]any{"issue": "LOOP-7", "body": "x"})
		require.NoError(t, err)
		reqs := fj.requests()
		assert.Equal(t, "Bearer "+jiraAPIToken, reqs[len(reqs)-1].Auth)
	})

	errs := []struct {
		name string
		env  mapEnv
		op   graph.Operation
		args map[string]any
		kind error
		want string
	}{
		{"unknown transition lists the available ones", nil, ops.JiraTransition, map[string]any{"issue": "LOOP-7", "transition": "Ship"}, ErrNotFound, "available: Start Progress, Close"},
		{"unknown issue", nil, ops.JiraAddComment, map[string]any{"issue": "LOOP-8", "body": "x"}, ErrNotFound, "Issue does not exist"},
		{"bad credentials", mapEnv{DefaultJiraEmailEnv: jiraEmail, DefaultJiraTokenEnv: "wrong-token-000"}, ops.JiraAddComment, map[string]any{"issue": "LOOP-7", "body": "x"}, ErrUnauthorized, DefaultJiraEmailEnv},
		{"not an issue key", nil, ops.JiraAddComment, map[string]any{"issue": "loop 7", "body": "x"}, ErrInvalidArgument, "PROJ-123"},
		{"no body", nil, ops.JiraAddComment, map[string]any{"issue": "LOOP-7"}, ErrInvalidArgument, `"body"`},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			env := tc.env
			if env == nil {
				env = mapEnv{DefaultJiraEmailEnv: jiraEmail, DefaultJiraTokenEnv: jiraAPIToken}
			}
			s, w := newJira(t, env, JiraAPIConfig{})
			_, err := s.Call(context.Background(), tc.op, tc.args)
			e := requireKind(t, err, tc.kind)
			assert.Contains(t, e.Error(), tc.want)
			assert.Equal(t, 1, w.sink.Count(EventCallFailed))
		})
	}
	t.Run("a 5xx on the transition list is retried, the transition itself is not", func(t *testing.T) {
		fj.fault(serviceFault{path: "/transitions", status: 502, times: 1})
		s, w := newJira(t, mapEnv{DefaultJiraEmailEnv: jiraEmail, DefaultJiraTokenEnv: jiraAPIToken}, JiraAPIConfig{})
		_, err := s.Call(context.Background(), ops.JiraTransition, map[string]any{"issue": "LOOP-7", "transition": "Close"})
		require.NoError(t, err)
		assert.Len(t, w.sleep.recorded(), 1)
	})
}
