// Package jirasim is a Jira stand-in for tests: an httptest server speaking
// the part of Jira's REST API version 2 that theloop calls — an issue's
// labels (GET and PUT /rest/api/2/issue/KEY), its comments (GET and POST
// .../comment) and its workflow transitions (GET and POST .../transitions)
// — with basic (email:token) or bearer (personal access token) auth, and
// Jira's error shape ({errorMessages, errors}). State lives in memory; the
// Go API reads it back. It is test-only and keeps no history beyond that.
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
)

// Config is the stand-in's one account.
type Config struct {
	// Email and Token: basic auth email:token; with Email "" only a bearer
	// Token is accepted (Jira Data Center's personal access token).
	Email, Token string
	// Transitions are the workflow's transitions, available from every
	// status (default: DefaultTransitions).
	Transitions []Transition
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
}

// Comment is one comment on an issue.
type Comment struct {
	ID, Author, Body string
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
}

// Start starts a stand-in on a loopback port.
func Start(cfg Config) *Server {
	if cfg.Transitions == nil {
		cfg.Transitions = DefaultTransitions
	}
	s := &Server{cfg: cfg, issues: map[string]*Issue{}, nextID: 10000}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the base URL to configure (integrations.jira.api.baseUrl).
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// AddIssue creates an issue in status "To Do".
func (s *Server) AddIssue(key string, labels ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.issues[key] = &Issue{Key: key, Status: "To Do", Labels: append([]string{}, labels...)}
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
			out = append(out, map[string]any{"id": c.ID, "body": c.Body, "author": map[string]any{"name": c.Author}})
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
		s.nextID++
		c := Comment{ID: strconv.Itoa(s.nextID), Author: user, Body: in.Body}
		is.Comments = append(is.Comments, c)
		writeJSON(w, http.StatusCreated, map[string]any{"id": c.ID, "body": c.Body})
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

// AddComment posts a comment as author (a person on Jira).
func (s *Server) AddComment(key, author, body string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	is := s.issues[key]
	if is == nil {
		return false
	}
	s.nextID++
	is.Comments = append(is.Comments, Comment{ID: strconv.Itoa(s.nextID), Author: author, Body: body})
	return true
}
