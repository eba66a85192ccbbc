package githubsim

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// A repository's activity as GitHub's REST API lists it for the whole
// repository: its issue events (GET /repos/{owner}/{repo}/issues/events,
// newest first) and its issue comments (GET /repos/{owner}/{repo}/issues/
// comments, with sort, direction and since). What a poller reads when no
// webhook came.

// issueEvent is one entry of a repository's issue events.
type issueEvent struct {
	id      int64
	event   string // labeled, unlabeled, closed, reopened, merged
	actor   string
	label   string
	issue   *issue
	created time.Time
}

// recordEvent appends an issue event at the time of the change it
// records (is.updated, which the change has just set); s.mu held.
func (s *Server) recordEvent(rp *repo, is *issue, event, actor, label string) {
	rp.events = append(rp.events, &issueEvent{id: s.newID(), event: event, actor: actor, label: label, issue: is, created: is.updated})
}

func (s *Server) issueEventJSON(rp *repo, e *issueEvent) map[string]any {
	m := map[string]any{
		"id": e.id, "node_id": nodeID("010:IssueEvent", e.id), "url": fmt.Sprintf("%s/repos/%s/issues/events/%d", s.apiURL(), rp.full(), e.id),
		"actor": s.userJSON(e.actor), "event": e.event, "commit_id": nil, "commit_url": nil, "created_at": ts(e.created),
		"performed_via_github_app": nil, "issue": s.issueJSON(rp, e.issue),
	}
	if e.label != "" {
		m["label"] = map[string]any{"name": e.label, "color": labelColor(e.label)}
	}
	return m
}

// listRepoIssueEvents serves GET /repos/{o}/{r}/issues/events: every
// issue event of the repository, newest first, paginated.
func (s *Server) listRepoIssueEvents(w http.ResponseWriter, r *http.Request, rp *repo) {
	items := make([]any, 0, len(rp.events))
	for i := len(rp.events) - 1; i >= 0; i-- {
		items = append(items, s.issueEventJSON(rp, rp.events[i]))
	}
	s.paginate(w, r, items)
}

// sinceQuery reads the since parameter ("" = none); a malformed one is
// GitHub's 422.
func sinceQuery(w http.ResponseWriter, r *http.Request) (time.Time, bool) {
	v := r.URL.Query().Get("since")
	if v == "" {
		return time.Time{}, true
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		unprocessable(w, "since must be an ISO 8601 timestamp (YYYY-MM-DDTHH:MM:SSZ)")
		return time.Time{}, false
	}
	return t, true
}

// listRepoComments serves GET /repos/{o}/{r}/issues/comments: by
// ascending id unless sort (created|updated) is given, then by it in
// direction (asc, the default here as on GitHub for this endpoint, or
// desc); since keeps those updated at or after it.
func (s *Server) listRepoComments(w http.ResponseWriter, r *http.Request, rp *repo) {
	q := r.URL.Query()
	since, ok := sinceQuery(w, r)
	if !ok {
		return
	}
	sortBy, dir := q.Get("sort"), q.Get("direction")
	if (sortBy != "" && sortBy != "created" && sortBy != "updated") || (dir != "" && dir != "asc" && dir != "desc") {
		unprocessable(w, "sort must be created or updated, direction asc or desc")
		return
	}
	cs := make([]*comment, 0, len(rp.comments))
	for _, c := range rp.comments {
		if !since.IsZero() && c.updated.Before(since) {
			continue
		}
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b *comment) int {
		if sortBy != "" {
			ta, tb := a.created, b.created
			if sortBy == "updated" {
				ta, tb = a.updated, b.updated
			}
			c := ta.Compare(tb)
			if dir == "desc" {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return cmp.Compare(a.id, b.id)
	})
	items := make([]any, 0, len(cs))
	for _, c := range cs {
		items = append(items, s.commentJSON(rp, c))
	}
	s.paginate(w, r, items)
}
