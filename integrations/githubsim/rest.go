package githubsim

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// route is one REST endpoint: a method and a path pattern whose {x}
// segments become path values.
type route struct {
	method  string
	pattern []string
	h       http.HandlerFunc
}

func (s *Server) routes() {
	add := func(method, pattern string, h http.HandlerFunc) {
		s.table = append(s.table, route{method: method, pattern: strings.Split(strings.Trim(pattern, "/"), "/"), h: h})
	}
	// Literal segments are matched before wildcards, so issues/comments/{id}
	// wins over issues/{n}.
	add("GET", "/user", s.getUser)
	add("POST", "/graphql", s.graphql)
	add("GET", "/repos/{o}/{r}", s.withRepo(s.getRepo))
	add("GET", "/repos/{o}/{r}/issues", s.withRepo(s.listIssues))
	add("GET", "/repos/{o}/{r}/issues/comments", s.withRepo(s.listRepoComments)) // issueevents.go
	add("GET", "/repos/{o}/{r}/issues/events", s.withRepo(s.listRepoIssueEvents))
	add("GET", "/repos/{o}/{r}/issues/comments/{id}", s.withComment(s.getComment))
	add("PATCH", "/repos/{o}/{r}/issues/comments/{id}", s.withComment(s.patchComment))
	add("POST", "/repos/{o}/{r}/issues/comments/{id}/reactions", s.withComment(s.reactComment))
	add("GET", "/repos/{o}/{r}/pulls/comments/{id}", withItem(s, "id", func(rp *repo, id int64) *reviewComment { return rp.reviewC[id] }, s.getReviewComment))
	add("POST", "/repos/{o}/{r}/pulls/comments/{id}/reactions", withItem(s, "id", func(rp *repo, id int64) *reviewComment { return rp.reviewC[id] }, s.reactReviewComment))
	add("GET", "/repos/{o}/{r}/issues/{n}", s.withIssue(s.getIssue))
	add("PATCH", "/repos/{o}/{r}/issues/{n}", s.withIssue(s.patchIssue))
	add("GET", "/repos/{o}/{r}/issues/{n}/labels", s.withIssue(s.getLabels))
	add("POST", "/repos/{o}/{r}/issues/{n}/labels", s.withIssue(s.addLabels))
	add("DELETE", "/repos/{o}/{r}/issues/{n}/labels/{name}", s.withIssue(s.removeLabel))
	add("GET", "/repos/{o}/{r}/issues/{n}/comments", s.withIssue(s.listComments))
	add("POST", "/repos/{o}/{r}/issues/{n}/comments", s.withIssue(s.postComment))
	add("POST", "/repos/{o}/{r}/issues/{n}/reactions", s.withIssue(s.reactIssue))
	add("GET", "/repos/{o}/{r}/pulls", s.withRepo(s.listPulls))
	add("GET", "/repos/{o}/{r}/commits/{sha}/check-runs", s.withRepo(s.listCheckRuns))
	add("GET", "/repos/{o}/{r}/commits/{sha}/status", s.withRepo(s.combinedStatus))
	add("GET", "/repos/{o}/{r}/pulls/{n}", s.withIssue(s.getPull))
	add("GET", "/repos/{o}/{r}/pulls/{n}/reviews", s.withIssue(s.listReviews))
	add("GET", "/repos/{o}/{r}/pulls/{n}/comments", s.withIssue(s.listReviewComments))
	add("GET", "/repos/{o}/{r}/pulls/{n}/reviews/{id}", s.withIssue(s.getReview))
	s.authzRoutes(add)
	// hookdeliveries.go
	add("GET", "/repos/{o}/{r}/hooks", s.withRepo(s.listHooks))
	add("GET", "/repos/{o}/{r}/hooks/{id}/deliveries", s.withRepo(s.listRepoHookDeliveries))
	add("POST", "/repos/{o}/{r}/hooks/{id}/deliveries/{did}/attempts", s.withRepo(s.redeliverRepoAttempt))
	add("GET", "/orgs/{org}/hooks", s.listOrgHooks)
	add("GET", "/orgs/{org}/hooks/{id}/deliveries", s.listOrgHookDeliveries)
	add("POST", "/orgs/{org}/hooks/{id}/deliveries/{did}/attempts", s.redeliverOrgAttempt)
}

// dispatch finds the route for method and the escaped path and serves it;
// anything else is GitHub's 404.
func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, escapedPath string) {
	raw := strings.Split(strings.Trim(escapedPath, "/"), "/")
	segs := make([]string, len(raw))
	for i, p := range raw {
		u, err := url.PathUnescape(p)
		if err != nil {
			notFound(w)
			return
		}
		segs[i] = u
	}
	for _, rt := range s.table {
		if rt.method != r.Method || len(rt.pattern) != len(segs) {
			continue
		}
		ok := true
		for i, p := range rt.pattern {
			if !strings.HasPrefix(p, "{") && p != segs[i] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		for i, p := range rt.pattern {
			if strings.HasPrefix(p, "{") {
				r.SetPathValue(strings.Trim(p, "{}"), segs[i])
			}
		}
		rt.h(w, r)
		return
	}
	notFound(w)
}

func notFound(w http.ResponseWriter) { writeError(w, http.StatusNotFound, "Not Found") }

// withRepo resolves {o}/{r} under the lock and calls h with it held; an
// unknown repository is 404.
func (s *Server) withRepo(h func(http.ResponseWriter, *http.Request, *repo)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		rp := s.lookupRepo(r.PathValue("o"), r.PathValue("r"))
		if rp == nil {
			notFound(w)
			return
		}
		h(w, r, rp)
	}
}

// withItem resolves {o}/{r} and the positive number in the path value key
// (get finds it in the repository) under the lock, and calls h with it
// held; anything malformed or unknown is 404.
func withItem[T any](s *Server, key string, get func(*repo, int64) *T, h func(http.ResponseWriter, *http.Request, *repo, *T)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseInt(r.PathValue(key), 10, 64)
		if err != nil || id <= 0 {
			notFound(w)
			return
		}
		s.withRepo(func(w http.ResponseWriter, r *http.Request, rp *repo) {
			it := get(rp, id)
			if it == nil {
				notFound(w)
				return
			}
			h(w, r, rp, it)
		})(w, r)
	}
}

// withIssue resolves {o}/{r}/{n} under the lock and calls h with it held.
func (s *Server) withIssue(h func(http.ResponseWriter, *http.Request, *repo, *issue)) http.HandlerFunc {
	return withItem(s, "n", func(rp *repo, n int64) *issue {
		if n > math.MaxInt {
			return nil
		}
		return rp.issues[int(n)]
	}, h)
}

// withComment resolves {o}/{r} and the issue comment {id} the same way.
func (s *Server) withComment(h func(http.ResponseWriter, *http.Request, *repo, *comment)) http.HandlerFunc {
	return withItem(s, "id", func(rp *repo, id int64) *comment { return rp.comments[id] }, h)
}

// decode reads a JSON object body into v, answering 400 itself on failure.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return false
	}
	return true
}

// decodeCommentBody reads {"body": "..."}, a comment's body, answering 400
// or 422 itself when it is not there or not acceptable.
func decodeCommentBody(w http.ResponseWriter, r *http.Request) (string, bool) {
	var in struct {
		Body *string `json:"body"`
	}
	if !decode(w, r, &in) {
		return "", false
	}
	if in.Body == nil || checkText("body", *in.Body, maxBody, true) != nil {
		unprocessable(w, "body is missing, empty or longer than 65536 characters")
		return "", false
	}
	return *in.Body, true
}

func unprocessable(w http.ResponseWriter, msg string) {
	writeError(w, http.StatusUnprocessableEntity, "Validation Failed: "+msg)
}

func (s *Server) getUser(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The authenticated user as GET /user answers it (GitHub's public-user
	// shape; a token without the user scope sees no private fields).
	u := s.userJSON(s.cfg.BotLogin)
	for _, k := range []string{"name", "company", "blog", "location", "email", "hireable", "bio", "twitter_username"} {
		u[k] = nil
	}
	u["blog"] = ""
	u["public_repos"], u["public_gists"], u["followers"], u["following"] = 0, 0, 0, 0
	u["created_at"], u["updated_at"] = ts(s.now()), ts(s.now())
	writeJSON(w, http.StatusOK, u)
}

func (s *Server) getRepo(w http.ResponseWriter, r *http.Request, rp *repo) {
	// The full repository: what GET /repos/{owner}/{repo} adds to the
	// repository object of a payload.
	m := s.repoJSON(rp)
	m["has_discussions"], m["network_count"], m["subscribers_count"] = false, 0, 0
	writeJSON(w, http.StatusOK, m)
}

// paginate writes one page of items with GitHub's Link header; s.mu held.
func (s *Server) paginate(w http.ResponseWriter, r *http.Request, items []any) {
	q := r.URL.Query()
	per := s.cfg.PageSize
	if v := q.Get("per_page"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			per = n
		}
	}
	per = min(per, s.cfg.MaxPerPage)
	page := 1
	if v := q.Get("page"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 && n < 1<<20 {
			page = n
		}
	}
	last := max((len(items)+per-1)/per, 1)
	lo := min((page-1)*per, len(items))
	hi := min(page*per, len(items))
	link := func(p int) string {
		q.Set("page", strconv.Itoa(p))
		return s.URL() + r.URL.EscapedPath() + "?" + q.Encode()
	}
	var rels []string
	if page < last {
		rels = append(rels, fmt.Sprintf("<%s>; rel=\"next\"", link(page+1)), fmt.Sprintf("<%s>; rel=\"last\"", link(last)))
	}
	if page > 1 {
		rels = append(rels, fmt.Sprintf("<%s>; rel=\"prev\"", link(page-1)), fmt.Sprintf("<%s>; rel=\"first\"", link(1)))
	}
	if len(rels) > 0 {
		w.Header().Set("Link", strings.Join(rels, ", "))
	}
	b, err := json.Marshal(append([]any{}, items[lo:hi]...))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "Server Error")
		return
	}
	// A conditional request (If-None-Match with the page's ETag) is
	// answered 304 with no body, as GitHub does (and such an answer does
	// not count against GitHub's rate limit).
	sum := sha256.Sum256(append([]byte(w.Header().Get("Link")+"\x00"), b...))
	etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
	w.Header().Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && (inm == etag || strings.TrimPrefix(inm, "W/") == strings.TrimPrefix(etag, "W/")) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func (s *Server) listIssues(w http.ResponseWriter, r *http.Request, rp *repo) {
	q := r.URL.Query()
	state := q.Get("state")
	switch state {
	case "":
		state = "open"
	case "open", "closed", "all":
	default:
		unprocessable(w, "state must be open, closed or all")
		return
	}
	var want []string
	if l := q.Get("labels"); l != "" {
		for _, p := range strings.Split(l, ",") {
			if p = strings.TrimSpace(p); p != "" {
				want = append(want, p)
			}
		}
	}
	since, ok := sinceQuery(w, r) // issueevents.go
	if !ok {
		return
	}
	sortBy, dir := q.Get("sort"), q.Get("direction")
	if (sortBy != "" && sortBy != "created" && sortBy != "updated" && sortBy != "comments") || (dir != "" && dir != "asc" && dir != "desc") {
		unprocessable(w, "sort must be created, updated or comments, direction asc or desc")
		return
	}
	nums := make([]int, 0, len(rp.issues))
	for n := range rp.issues {
		nums = append(nums, n)
	}
	// GitHub's default: newest created first.
	slices.SortStableFunc(nums, func(a, b int) int {
		ia, ib := rp.issues[a], rp.issues[b]
		c := 0
		switch sortBy {
		case "updated":
			c = ia.updated.Compare(ib.updated)
		case "comments":
			c = cmp.Compare(len(ia.comments), len(ib.comments))
		}
		if c == 0 {
			c = cmp.Compare(a, b)
		}
		if dir != "asc" {
			c = -c
		}
		return c
	})
	items := []any{}
	for _, n := range nums {
		is := rp.issues[n]
		if state != "all" && is.state != state {
			continue
		}
		if !since.IsZero() && is.updated.Before(since) {
			continue
		}
		if !slices.ContainsFunc(want, func(l string) bool { return !hasFold(is.labels, l) }) {
			items = append(items, s.issueJSON(rp, is))
		}
	}
	s.paginate(w, r, items)
}

func (s *Server) getIssue(w http.ResponseWriter, r *http.Request, rp *repo, is *issue) {
	writeJSON(w, http.StatusOK, s.issueJSON(rp, is))
}

func (s *Server) getPull(w http.ResponseWriter, r *http.Request, rp *repo, is *issue) {
	if !is.pr {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, s.pullJSON(rp, is))
}

func (s *Server) patchIssue(w http.ResponseWriter, r *http.Request, rp *repo, is *issue) {
	var in struct {
		Title *string `json:"title"`
		Body  *string `json:"body"`
		State *string `json:"state"`
	}
	if !decode(w, r, &in) {
		return
	}
	if in.State != nil && *in.State != "open" && *in.State != "closed" {
		unprocessable(w, "state must be open or closed")
		return
	}
	if in.Title != nil && checkText("title", *in.Title, maxTitle, true) != nil {
		unprocessable(w, "title must be 1–256 characters")
		return
	}
	if in.Body != nil && checkText("body", *in.Body, maxBody, false) != nil {
		unprocessable(w, "body is too long (maximum is 65536 characters)")
		return
	}
	changes := map[string]any{}
	if in.Title != nil && *in.Title != is.title {
		changes["title"] = map[string]any{"from": is.title}
		is.title = *in.Title
	}
	if in.Body != nil && *in.Body != is.body {
		changes["body"] = map[string]any{"from": is.body}
		is.body = *in.Body
	}
	if len(changes) > 0 {
		is.updated = s.now()
		if !is.pr {
			s.emit("issues", "edited", rp, is, nil, s.cfg.BotLogin, map[string]any{"changes": changes})
		}
	}
	if in.State != nil {
		s.setStateLocked(rp, is, s.cfg.BotLogin, *in.State)
	}
	writeJSON(w, http.StatusOK, s.issueJSON(rp, is))
}

func (s *Server) getLabels(w http.ResponseWriter, r *http.Request, rp *repo, is *issue) {
	s.paginate(w, r, s.labelsJSON(rp, is.labels))
}

func (s *Server) addLabels(w http.ResponseWriter, r *http.Request, rp *repo, is *issue) {
	// GitHub accepts {"labels": [...]} and a bare array.
	var raw json.RawMessage
	if !decode(w, r, &raw) {
		return
	}
	var labels []string
	var obj struct {
		Labels []string `json:"labels"`
	}
	if json.Unmarshal(raw, &labels) != nil {
		if json.Unmarshal(raw, &obj) != nil {
			unprocessable(w, "labels must be an array of strings")
			return
		}
		labels = obj.Labels
	}
	if len(labels) > 100 {
		unprocessable(w, "at most 100 labels")
		return
	}
	for _, l := range labels {
		if checkLabel(l) != nil {
			unprocessable(w, "label names must be 1–50 characters on one line")
			return
		}
	}
	for _, l := range labels {
		s.addLabelLocked(rp, is, s.cfg.BotLogin, l)
	}
	writeJSON(w, http.StatusOK, s.labelsJSON(rp, is.labels))
}

func (s *Server) removeLabel(w http.ResponseWriter, r *http.Request, rp *repo, is *issue) {
	name := r.PathValue("name")
	if !s.removeLabelLocked(rp, is, s.cfg.BotLogin, name) {
		writeError(w, http.StatusNotFound, "Label does not exist")
		return
	}
	writeJSON(w, http.StatusOK, s.labelsJSON(rp, is.labels))
}

func (s *Server) listComments(w http.ResponseWriter, r *http.Request, rp *repo, is *issue) {
	items := make([]any, 0, len(is.comments))
	for _, c := range is.comments {
		items = append(items, s.commentJSON(rp, c))
	}
	s.paginate(w, r, items)
}

func (s *Server) postComment(w http.ResponseWriter, r *http.Request, rp *repo, is *issue) {
	body, ok := decodeCommentBody(w, r)
	if !ok {
		return
	}
	c := s.commentLocked(rp, is, s.author(r), body)
	w.Header().Set("Location", fmt.Sprintf("%s/repos/%s/issues/comments/%d", s.URL(), rp.full(), c.id))
	writeJSON(w, http.StatusCreated, s.commentJSON(rp, c))
}

func (s *Server) getComment(w http.ResponseWriter, r *http.Request, rp *repo, c *comment) {
	writeJSON(w, http.StatusOK, s.commentJSON(rp, c))
}

func (s *Server) patchComment(w http.ResponseWriter, r *http.Request, rp *repo, c *comment) {
	body, ok := decodeCommentBody(w, r)
	if !ok {
		return
	}
	// GitHub lets a comment's author edit it (and admins, not modelled).
	editor := s.author(r)
	if !strings.EqualFold(c.author, editor) {
		writeError(w, http.StatusForbidden, "Must have admin rights to Repository.")
		return
	}
	if body != c.body {
		s.editCommentLocked(rp, c, editor, body)
	}
	writeJSON(w, http.StatusOK, s.commentJSON(rp, c))
}

func (s *Server) listReviews(w http.ResponseWriter, r *http.Request, rp *repo, is *issue) {
	if !is.pr {
		notFound(w)
		return
	}
	items := make([]any, 0, len(is.reviews))
	for _, rv := range is.reviews {
		items = append(items, s.reviewJSON(rp, is, rv))
	}
	s.paginate(w, r, items)
}

func (s *Server) getReviewComment(w http.ResponseWriter, r *http.Request, rp *repo, rc *reviewComment) {
	writeJSON(w, http.StatusOK, s.reviewCommentJSON(rp, rc))
}

// getReview answers one review of the pull request; a review of another
// pull request, or of none, is 404 as on GitHub.
func (s *Server) getReview(w http.ResponseWriter, r *http.Request, rp *repo, is *issue) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if !is.pr || err != nil {
		notFound(w)
		return
	}
	for _, rv := range is.reviews {
		if rv.ID == id {
			writeJSON(w, http.StatusOK, s.reviewJSON(rp, is, rv))
			return
		}
	}
	notFound(w)
}

func (s *Server) listReviewComments(w http.ResponseWriter, r *http.Request, rp *repo, is *issue) {
	if !is.pr {
		notFound(w)
		return
	}
	items := make([]any, 0, len(is.reviewCs))
	for _, rc := range is.reviewCs {
		items = append(items, s.reviewCommentJSON(rp, rc))
	}
	s.paginate(w, r, items)
}

var reactionContents = []string{"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"}

// react applies a reaction body to list: 201 when new, 200 when the token's
// user had already reacted so, as GitHub answers.
func (s *Server) react(w http.ResponseWriter, r *http.Request, list *[]string) {
	var in struct {
		Content string `json:"content"`
	}
	if !decode(w, r, &in) {
		return
	}
	if !slices.Contains(reactionContents, in.Content) {
		unprocessable(w, "content must be one of +1 -1 laugh confused heart hooray rocket eyes")
		return
	}
	status := http.StatusOK
	if addReaction(list, s.cfg.BotLogin, in.Content) {
		status = http.StatusCreated
	}
	id := s.newID()
	writeJSON(w, status, map[string]any{
		"id": id, "node_id": nodeID("08:Reaction", id), "user": s.userJSON(s.cfg.BotLogin),
		"content": in.Content, "created_at": ts(s.now()),
	})
}

func (s *Server) reactIssue(w http.ResponseWriter, r *http.Request, rp *repo, is *issue) {
	s.react(w, r, &is.reactions)
}

func (s *Server) reactComment(w http.ResponseWriter, r *http.Request, rp *repo, c *comment) {
	s.react(w, r, &c.reactions)
}

func (s *Server) reactReviewComment(w http.ResponseWriter, r *http.Request, rp *repo, c *reviewComment) {
	s.react(w, r, &c.Reactions)
}

// graphql answers the one query theloop sends: a pull request's
// closingIssuesReferences. Anything else gets GitHub's error shape.
func (s *Server) graphql(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Query     string         `json:"query"`
		Variables map[string]any `json:"variables"`
	}
	if !decode(w, r, &in) {
		return
	}
	gqlErr := func(msg string) {
		writeJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]any{"type": "NOT_FOUND", "message": msg}}})
	}
	if !strings.Contains(in.Query, "closingIssuesReferences") {
		gqlErr("githubsim serves only the closingIssuesReferences query")
		return
	}
	owner, _ := in.Variables["owner"].(string)
	name, _ := in.Variables["name"].(string)
	num, _ := in.Variables["number"].(float64)
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.lookupRepo(owner, name)
	var is *issue
	if rp != nil && num > 0 && num < 1<<31 {
		is = rp.issues[int(num)]
	}
	if is == nil || !is.pr {
		gqlErr(fmt.Sprintf("Could not resolve to a PullRequest with the number of %v.", num))
		return
	}
	nodes := []any{}
	for _, ref := range closingRefs(is.body) {
		in := rp
		if ref.repo != "" {
			o, n, _ := strings.Cut(ref.repo, "/")
			in = s.lookupRepo(o, n)
		}
		if in == nil {
			continue // GitHub links only what exists
		}
		if t := in.issues[ref.number]; t != nil && !t.pr {
			nodes = append(nodes, map[string]any{"number": ref.number, "repository": map[string]any{"nameWithOwner": in.full()}})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{"pullRequest": map[string]any{
		"closingIssuesReferences": map[string]any{"nodes": nodes},
	}}}})
}
