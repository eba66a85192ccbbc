// Package jirasim is a Jira stand-in for tests: an httptest server speaking
// the part of Jira's REST API version 2 that theloop calls — an issue's
// labels (GET and PUT /rest/api/2/issue/KEY), its comments (GET and POST
// .../comment, GET .../comment/ID), its workflow transitions (GET and POST
// .../transitions) and Jira Cloud's enhanced JQL search (GET
// /rest/api/2/search/jql, a small JQL subset: see search.go) — with basic
// (email:token) or bearer (personal access token) auth, and Jira's error
// shape ({errorMessages, errors}). Registered webhooks (AddHook) receive
// comment_created and comment_updated as Jira Cloud's admin webhooks send
// them, signed with the hook's secret (webhooks.go). State lives in memory;
// the Go API reads it back. It is test-only and keeps no history beyond
// that.
package jirasim

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config is the stand-in's one account.
type Config struct {
	// Email and Token: basic auth email:token; with Email "" only a bearer
	// Token is accepted (Jira Data Center's personal access token).
	Email, Token string
	// Transitions are the workflow's transitions, available from every
	// status (default: DefaultTransitions).
	Transitions []Transition
	// Now is the stand-in's clock (default time.Now): comments' created
	// and updated times, issues' updated time, and the search's.
	Now func() time.Time
}

// Transition is one workflow transition.
type Transition struct {
	ID, Name, To string
}

// DefaultTransitions is a small workflow.
var DefaultTransitions = []Transition{
	{ID: "11", Name: "Start Progress", To: "In Progress"},
	{ID: "21", Name: "Request Review", To: "In Review"},
	{ID: "31", Name: "Close", To: "Done"},
}

// Issue is an issue as the stand-in holds it.
type Issue struct {
	Key      string
	Status   string
	Labels   []string
	Comments []Comment
	// Updated is when the issue last changed (a comment counts).
	Updated time.Time
}

// Comment is one comment on an issue. Author is the account's accountId
// (Jira Cloud).
type Comment struct {
	ID, Author, Body string
	Created, Updated time.Time
}

// Request is one request the stand-in received (Auth is the header as
// sent; tests use it to prove where a credential went).
type Request struct {
	Method, Path, Auth, Body string
}

// Server is a running stand-in. Close it.
type Server struct {
	cfg    Config
	srv    *httptest.Server
	mu     sync.Mutex
	issues map[string]*Issue
	reqs   []Request
	nextID int
	hooks  hooks // webhooks.go
}

// Start starts a stand-in on a loopback port.
func Start(cfg Config) *Server {
	if cfg.Transitions == nil {
		cfg.Transitions = DefaultTransitions
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, issues: map[string]*Issue{}, nextID: 10000}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the base URL to configure (integrations.jira.api.baseUrl).
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server (webhooks in flight are waited for).
func (s *Server) Close() {
	s.hooks.wg.Wait()
	s.srv.Close()
}

// AddIssue creates an issue in status "To Do".
func (s *Server) AddIssue(key string, labels ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issues[key] = &Issue{Key: key, Status: "To Do", Labels: append([]string{}, labels...), Updated: s.cfg.Now()}
}

// Issue returns a copy of the issue (false when there is none).
func (s *Server) Issue(key string) (Issue, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	is, ok := s.issues[key]
	if !ok {
		return Issue{}, false
	}
	c := *is
	c.Labels = slices.Clone(is.Labels)
	c.Comments = slices.Clone(is.Comments)
	return c, true
}

// Requests returns the requests so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func jiraError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"errorMessages": []string{msg}, "errors": map[string]any{}})
}

func (s *Server) authorized(r *http.Request) (string, bool) {
	a := r.Header.Get("Authorization")
	if s.cfg.Email != "" && a == "Basic "+base64.StdEncoding.EncodeToString([]byte(s.cfg.Email+":"+s.cfg.Token)) {
		return s.cfg.Email, true
	}
	if s.cfg.Token != "" && a == "Bearer "+s.cfg.Token {
		return "pat-user", true
	}
	return "", false
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Body: string(body)})
	user, ok := s.authorized(r)
	if !ok {
		jiraError(w, http.StatusUnauthorized, "You are not authenticated. Authentication required to perform this operation.")
		return
	}
	if r.URL.Path == "/rest/api/2/search/jql" && r.Method == http.MethodGet {
		s.search(w, r)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/rest/api/2/issue/")
	if !ok {
		jiraError(w, http.StatusNotFound, "null for uri: "+r.URL.Path)
		return
	}
	key, sub, _ := strings.Cut(rest, "/")
	is := s.issues[key]
	if is == nil {
		jiraError(w, http.StatusNotFound, "Issue does not exist or you do not have permission to see it.")
		return
	}
	if id, ok := strings.CutPrefix(sub, "comment/"); ok && r.Method == http.MethodGet {
		for _, c := range is.Comments {
			if c.ID == id {
				writeJSON(w, http.StatusOK, commentJSON(s.srv.URL, key, c))
				return
			}
		}
		jiraError(w, http.StatusNotFound, "Can not find a comment for the id: "+id+".")
		return
	}
	switch r.Method + " " + sub {
	case "GET ":
		writeJSON(w, http.StatusOK, map[string]any{"key": key, "fields": map[string]any{"labels": is.Labels, "status": map[string]any{"name": is.Status}}})
	case "PUT ":
		var in struct {
			Fields struct {
				Labels *[]string `json:"labels"`
			} `json:"fields"`
		}
		if json.Unmarshal(body, &in) != nil || in.Fields.Labels == nil {
			jiraError(w, http.StatusBadRequest, "the request body is not an issue update")
			return
		}
		for _, l := range *in.Fields.Labels {
			if l == "" || strings.ContainsAny(l, " \t\n") {
				writeJSON(w, http.StatusBadRequest, map[string]any{"errorMessages": []string{}, "errors": map[string]any{"labels": "The label '" + l + "' contains spaces which is invalid."}})
				return
			}
		}
		is.Labels = append([]string{}, *in.Fields.Labels...)
		w.WriteHeader(http.StatusNoContent)
	case "GET comment":
		out := make([]any, 0, len(is.Comments))
		for _, c := range is.Comments {
			out = append(out, commentJSON(s.srv.URL, key, c))
		}
		if r.URL.Query().Get("orderBy") == "-created" {
			slices.Reverse(out)
		}
		writeJSON(w, http.StatusOK, map[string]any{"startAt": 0, "total": len(out), "comments": out})
	case "POST comment":
		var in struct {
			Body string `json:"body"`
		}
		if json.Unmarshal(body, &in) != nil || strings.TrimSpace(in.Body) == "" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"errorMessages": []string{}, "errors": map[string]any{"comment": "Comment body can not be empty!"}})
			return
		}
		c := s.addComment(is, user, in.Body)
		writeJSON(w, http.StatusCreated, commentJSON(s.srv.URL, key, c))
	case "GET transitions":
		out := make([]any, 0, len(s.cfg.Transitions))
		for _, t := range s.cfg.Transitions {
			out = append(out, map[string]any{"id": t.ID, "name": t.Name, "to": map[string]any{"name": t.To}})
		}
		writeJSON(w, http.StatusOK, map[string]any{"transitions": out})
	case "POST transitions":
		var in struct {
			Transition struct {
				ID string `json:"id"`
			} `json:"transition"`
		}
		_ = json.Unmarshal(body, &in)
		for _, t := range s.cfg.Transitions {
			if t.ID == in.Transition.ID {
				is.Status = t.To
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		jiraError(w, http.StatusBadRequest, "Transition id '"+in.Transition.ID+"' is not valid for this issue.")
	default:
		jiraError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

// AddComment posts a comment as author (a person's accountId on Jira)
// and sends comment_created to the registered webhooks. It returns the
// comment's id ("" when the issue does not exist).
func (s *Server) AddComment(key, author, body string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	is := s.issues[key]
	if is == nil {
		return ""
	}
	return s.addComment(is, author, body).ID
}

// EditComment replaces a comment's body as editor and sends
// comment_updated (false when there is no such comment).
func (s *Server) EditComment(key, id, editor, body string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	is := s.issues[key]
	if is == nil {
		return false
	}
	for i := range is.Comments {
		if c := &is.Comments[i]; c.ID == id {
			c.Body, c.Updated = body, s.later(c.Created)
			is.Updated = c.Updated
			s.deliver("comment_updated", is, *c, editor)
			return true
		}
	}
	return false
}

// addComment adds a comment (s.mu held) and tells the webhooks.
func (s *Server) addComment(is *Issue, author, body string) Comment {
	s.nextID++
	now := s.cfg.Now()
	c := Comment{ID: strconv.Itoa(s.nextID), Author: author, Body: body, Created: now, Updated: now}
	is.Comments = append(is.Comments, c)
	is.Updated = now
	s.deliver("comment_created", is, c, author)
	return c
}

// later is the clock's now, but at least a millisecond after t: an edit
// always shows as updated ≠ created, as Jira's does.
func (s *Server) later(t time.Time) time.Time {
	now := s.cfg.Now()
	if !now.After(t.Add(time.Millisecond)) {
		now = t.Add(time.Second)
	}
	return now
}

// TimeFormat is how Jira's REST API writes times.
const TimeFormat = "2006-01-02T15:04:05.000-0700"

// commentJSON is a comment as REST API version 2 (and the webhook) shows
// it: a Cloud account as author.
func commentJSON(base, key string, c Comment) map[string]any {
	author := map[string]any{"accountId": c.Author, "displayName": c.Author, "self": base + "/rest/api/2/user?accountId=" + c.Author}
	return map[string]any{"id": c.ID, "self": base + "/rest/api/2/issue/" + key + "/comment/" + c.ID, "body": c.Body,
		"author": author, "updateAuthor": author, "created": c.Created.Format(TimeFormat), "updated": c.Updated.Format(TimeFormat)}
}
