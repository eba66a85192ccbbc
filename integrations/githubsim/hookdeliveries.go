package githubsim

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Webhooks and their deliveries, as GitHub documents them ("REST API
// endpoints for repository webhooks" and "for organization webhooks"):
//
//	GET  /repos/{o}/{r}/hooks                                       the hooks (every hook of the server)
//	GET  /repos/{o}/{r}/hooks/{id}/deliveries?per_page=&cursor=      newest first, cursor-paginated
//	POST /repos/{o}/{r}/hooks/{id}/deliveries/{did}/attempts          202: redelivered
//	GET  /orgs/{org}/hooks/{id}/deliveries, POST .../attempts         the same for the org's repositories
//
// A delivery's "id" is one attempt (Delivery.Attempt), its "guid" the
// X-GitHub-Delivery it was sent under; a redelivery is a new attempt with
// the same guid and redelivery: true. The server's hooks receive the
// events of every repository, so each repository (and organization) lists
// every hook, and a hook's deliveries are those of the repository asked.

func (s *Server) listHooks(w http.ResponseWriter, r *http.Request, rp *repo) {
	out := make([]any, 0, len(s.hooks))
	for _, h := range s.hooks {
		if h.Org == "" && !h.App {
			out = append(out, s.hookJSON(h, "Repository", "/repos/"+rp.full()))
		}
	}
	s.paginate(w, r, out)
}

// listOrgHooks is GET /orgs/{org}/hooks: the organization's hooks. An
// owner of no repository here is no organization (404, as GitHub answers
// for a user's login).
func (s *Server) listOrgHooks(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	org := r.PathValue("org")
	known := false
	for full := range s.repos {
		if owner, _, _ := strings.Cut(full, "/"); strings.EqualFold(owner, org) {
			known = true
		}
	}
	if !known {
		notFound(w)
		return
	}
	out := []any{}
	for _, h := range s.hooks {
		if strings.EqualFold(h.Org, org) {
			out = append(out, s.hookJSON(h, "Organization", "/orgs/"+org))
		}
	}
	s.paginate(w, r, out)
}

// hookJSON is a hook as GitHub lists it, under the REST path prefix.
func (s *Server) hookJSON(h Hook, typ, prefix string) map[string]any {
	at := s.now().UTC().Format(time.RFC3339)
	api := fmt.Sprintf("%s%s/hooks/%d", s.URL(), prefix, h.ID)
	j := map[string]any{"type": typ, "id": h.ID, "name": "web", "active": true, "events": []string{"*"},
		"config": map[string]any{"url": h.URL, "content_type": "json", "insecure_ssl": "0"},
		"url":    api, "ping_url": api + "/pings", "deliveries_url": api + "/deliveries",
		"created_at": at, "updated_at": at}
	if typ == "Repository" { // an organization's hook has neither (org-hook)
		j["test_url"] = api + "/test"
		j["last_response"] = map[string]any{"code": nil, "status": "unused", "message": nil}
	}
	return j
}

func (s *Server) listRepoHookDeliveries(w http.ResponseWriter, r *http.Request, rp *repo) {
	full := rp.full()
	s.listHookDeliveries(w, r, func(d Delivery) bool { return strings.EqualFold(d.Repo, full) })
}

func (s *Server) listOrgHookDeliveries(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	org := r.PathValue("org")
	s.listHookDeliveries(w, r, func(d Delivery) bool {
		owner, _, _ := strings.Cut(d.Repo, "/")
		return strings.EqualFold(owner, org)
	})
}

// hookID is the {id} of a known hook, or 0 (after answering 404).
func (s *Server) hookID(w http.ResponseWriter, r *http.Request) int64 {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err == nil && slices.ContainsFunc(s.hooks, func(h Hook) bool { return h.ID == id }) {
		return id
	}
	notFound(w)
	return 0
}

// listHookDeliveries answers one page of the hook's sent deliveries that
// match, newest first; the cursor is the last attempt id of the previous
// page. s.mu held.
func (s *Server) listHookDeliveries(w http.ResponseWriter, r *http.Request, match func(Delivery) bool) {
	hook := s.hookID(w, r)
	if hook == 0 {
		return
	}
	s.listDeliveriesOf(w, r, hook, match)
}

// appHookID is the App's own hook, or 0 (after answering 404).
func (s *Server) appHookID(w http.ResponseWriter) int64 {
	for _, h := range s.hooks {
		if h.App {
			return h.ID
		}
	}
	notFound(w)
	return 0
}

// listDeliveriesOf is listHookDeliveries for a hook already found.
func (s *Server) listDeliveriesOf(w http.ResponseWriter, r *http.Request, hook int64, match func(Delivery) bool) {
	q := r.URL.Query()
	per := s.cfg.PageSize
	if n, err := strconv.Atoi(q.Get("per_page")); err == nil && n > 0 {
		per = n
	}
	per = min(per, s.cfg.MaxPerPage)
	var below int64 = 1 << 62
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil || n <= 0 {
			unprocessable(w, "invalid cursor")
			return
		}
		below = n
	}
	all := s.Deliveries()
	var page []any
	more := false
	for i := len(all) - 1; i >= 0; i-- {
		d := all[i]
		if d.HookID != hook || d.Attempt == 0 || d.Attempt >= below || !match(d) {
			continue
		}
		if len(page) == per {
			more = true
			break
		}
		status := "OK"
		if !d.OK() {
			status = fmt.Sprintf("Invalid HTTP Response: %d", d.Status)
			if d.Status == 0 {
				status = "failed to connect to host"
			}
		}
		page = append(page, map[string]any{"id": d.Attempt, "guid": d.ID, "delivered_at": d.Sent.UTC().Format(time.RFC3339),
			"redelivery": d.Redelivery, "duration": d.Duration.Seconds(), "status": status, "status_code": d.Status,
			"event": d.Event, "action": nullable(d.Action), "installation_id": nil, "repository_id": nil})
		below = d.Attempt
	}
	if more {
		q.Set("cursor", strconv.FormatInt(below, 10))
		w.Header().Set("Link", fmt.Sprintf("<%s%s?%s>; rel=\"next\"", s.URL(), r.URL.EscapedPath(), q.Encode()))
	}
	writeJSON(w, http.StatusOK, append([]any{}, page...))
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *Server) redeliverRepoAttempt(w http.ResponseWriter, r *http.Request, rp *repo) {
	full := rp.full()
	s.redeliverAttempt(w, r, func(d Delivery) bool { return strings.EqualFold(d.Repo, full) })
}

func (s *Server) redeliverOrgAttempt(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	org := r.PathValue("org")
	s.redeliverAttempt(w, r, func(d Delivery) bool {
		owner, _, _ := strings.Cut(d.Repo, "/")
		return strings.EqualFold(owner, org)
	})
}

// redeliverAttempt sends the attempt {did} of hook {id} again, under the
// same guid and signature, and answers 202 as GitHub does. s.mu held.
func (s *Server) redeliverAttempt(w http.ResponseWriter, r *http.Request, match func(Delivery) bool) {
	hook := s.hookID(w, r)
	if hook == 0 {
		return
	}
	s.redeliverAttemptOf(w, r.PathValue("did"), hook, match)
}

// redeliverAttemptOf is redeliverAttempt for a hook already found.
func (s *Server) redeliverAttemptOf(w http.ResponseWriter, attempt string, hook int64, match func(Delivery) bool) {
	did, err := strconv.ParseInt(attempt, 10, 64)
	if err != nil {
		notFound(w)
		return
	}
	for _, d := range s.Deliveries() {
		if d.Attempt == did && d.HookID == hook && match(d) {
			s.redeliveries++
			s.outbound.enqueue(Delivery{ID: d.ID, HookID: d.HookID, URL: d.URL, Event: d.Event, Action: d.Action, Repo: d.Repo,
				Number: d.Number, Sender: d.Sender, CommentID: d.CommentID, Body: d.Body, Header: d.Header.Clone(), Redelivery: true})
			writeJSON(w, http.StatusAccepted, map[string]any{})
			return
		}
	}
	notFound(w)
}

// RedeliveryRequests counts the redeliveries asked through the REST API.
func (s *Server) RedeliveryRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.redeliveries
}
