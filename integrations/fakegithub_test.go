package integrations

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeGitHub is an httptest server that behaves like the parts of GitHub's
// REST and GraphQL APIs theloop uses: issues, labels, comments, reviews,
// review comments, reactions, the issues list filtered by label, and
// closingIssuesReferences. Lists paginate with Link headers at pageSize
// items a page. Faults (status codes, rate-limit headers, slow answers) are
// queued per path.
type fakeGitHub struct {
	t      testing.TB
	srv    *httptest.Server
	prefix string // REST root path: "" (github.com) or "/api/v3" (GHE)
	// tokens accepted in Authorization ("Bearer x" or "token x").
	tokens   map[string]bool
	pageSize int

	mu                 sync.Mutex
	repos              map[string]map[int]*fakeIssue // "o/r" → number → issue
	nextID             int
	faults             []*fault
	requests           []fakeRequest
	graphqlUnsupported bool
	echoAuthInErrors   bool
	reactions          []string // "content path"
}

type fakeRequest struct {
	Method, Path, Query, Auth string
	Body                      string
}

type fakeIssue struct {
	Number         int
	Title, Body    string
	State, Author  string
	PR, Merged     bool
	Labels         []string
	Comments       []map[string]any
	Reviews        []map[string]any
	ReviewComments []map[string]any
	Closes         []string // "o/r#n"
}

// fault answers matching requests instead of the API.
type fault struct {
	method string // "" = any
	path   string // substring of the request path
	status int
	header map[string]string
	body   string
	times  int  // how many requests it answers (<=0: unlimited)
	slow   bool // block until the client gives up
	used   int
}

func newFakeGitHub(t testing.TB, prefix string, tokens ...string) *fakeGitHub {
	f := &fakeGitHub{t: t, prefix: prefix, tokens: map[string]bool{}, pageSize: 2, repos: map[string]map[int]*fakeIssue{}, nextID: 9000}
	for _, tok := range tokens {
		f.tokens[tok] = true
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /repos/{o}/{r}/issues/{n}", f.getIssue)
	mux.HandleFunc("GET /repos/{o}/{r}/pulls/{n}", f.getPull)
	mux.HandleFunc("GET /repos/{o}/{r}/issues", f.listIssues)
	mux.HandleFunc("GET /repos/{o}/{r}/issues/{n}/labels", f.getLabels)
	mux.HandleFunc("POST /repos/{o}/{r}/issues/{n}/labels", f.addLabels)
	mux.HandleFunc("DELETE /repos/{o}/{r}/issues/{n}/labels/{name}", f.removeLabel)
	mux.HandleFunc("GET /repos/{o}/{r}/issues/{n}/comments", f.listOf(func(is *fakeIssue) []map[string]any { return is.Comments }))
	mux.HandleFunc("POST /repos/{o}/{r}/issues/{n}/comments", f.addComment)
	mux.HandleFunc("GET /repos/{o}/{r}/pulls/{n}/reviews", f.listOf(func(is *fakeIssue) []map[string]any { return is.Reviews }))
	mux.HandleFunc("GET /repos/{o}/{r}/pulls/{n}/comments", f.listOf(func(is *fakeIssue) []map[string]any { return is.ReviewComments }))
	mux.HandleFunc("POST /repos/{o}/{r}/issues/comments/{id}/reactions", f.react)
	mux.HandleFunc("POST /repos/{o}/{r}/pulls/comments/{id}/reactions", f.react)
	mux.HandleFunc("POST /repos/{o}/{r}/issues/{n}/reactions", f.react)
	mux.HandleFunc("POST /graphql", f.graphql)
	mux.HandleFunc("POST /api/graphql", f.graphql)
	f.srv = httptest.NewServer(f.middleware(f.single(mux)))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the REST root, as configured in integrations.github.api.baseUrl.
func (f *fakeGitHub) URL() string { return f.srv.URL + f.prefix }

func (f *fakeGitHub) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		path := r.URL.Path
		if path != "/api/graphql" {
			if !strings.HasPrefix(path, f.prefix+"/") {
				http.NotFound(w, r)
				return
			}
			path = strings.TrimPrefix(path, f.prefix)
		}
		f.mu.Lock()
		f.requests = append(f.requests, fakeRequest{Method: r.Method, Path: path, Query: r.URL.RawQuery, Auth: r.Header.Get("Authorization"), Body: string(body)})
		var ft *fault
		for _, c := range f.faults {
			if (c.method == "" || c.method == r.Method) && strings.Contains(path, c.path) && (c.times <= 0 || c.used < c.times) {
				c.used++
				ft = c
				break
			}
		}
		echo := f.echoAuthInErrors
		f.mu.Unlock()
		if ft != nil {
			if ft.slow {
				<-r.Context().Done()
				return
			}
			for k, v := range ft.header {
				w.Header().Set(k, v)
			}
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(ft.status)
			_, _ = io.WriteString(w, ft.body)
			return
		}
		auth := r.Header.Get("Authorization")
		tok := strings.TrimPrefix(strings.TrimPrefix(auth, "Bearer "), "token ")
		if len(f.tokens) > 0 && !f.tokens[tok] {
			msg := "Bad credentials"
			if echo {
				msg += " for " + auth
			}
			writeJSON(w, http.StatusUnauthorized, map[string]any{"message": msg})
			return
		}
		r.URL.Path = path
		r.URL.RawPath = ""
		next.ServeHTTP(w, r)
	})
}

// single serves GET of one comment (issues/comments/{id}), review comment
// (pulls/comments/{id}) and review (pulls/{n}/reviews/{id}) — paths
// ServeMux cannot hold beside issues/{n}/labels — with GitHub's
// issue_url / pull_request_url added; everything else goes to next.
func (f *fakeGitHub) single(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		if r.Method != http.MethodGet || len(segs) < 6 || segs[0] != "repos" {
			next.ServeHTTP(w, r)
			return
		}
		repo := segs[1] + "/" + segs[2]
		api := f.srv.URL + f.prefix + "/repos/" + repo
		find := func(list func(*fakeIssue) []map[string]any, only int, id string) (map[string]any, int) {
			for n, is := range f.repos[repo] {
				if only != 0 && n != only {
					continue
				}
				for _, c := range list(is) {
					if fmt.Sprint(c["id"]) == id {
						out := map[string]any{}
						for k, v := range c {
							out[k] = v
						}
						return out, n
					}
				}
			}
			return nil, 0
		}
		var c map[string]any
		var n int
		switch {
		case len(segs) == 6 && segs[3] == "issues" && segs[4] == "comments":
			f.mu.Lock()
			c, n = find(func(is *fakeIssue) []map[string]any { return is.Comments }, 0, segs[5])
			f.mu.Unlock()
			if c != nil {
				c["issue_url"] = fmt.Sprintf("%s/issues/%d", api, n)
			}
		case len(segs) == 6 && segs[3] == "pulls" && segs[4] == "comments":
			f.mu.Lock()
			c, n = find(func(is *fakeIssue) []map[string]any { return is.ReviewComments }, 0, segs[5])
			f.mu.Unlock()
			if c != nil {
				c["pull_request_url"] = fmt.Sprintf("%s/pulls/%d", api, n)
			}
		case len(segs) == 7 && segs[3] == "pulls" && segs[5] == "reviews":
			pr, _ := strconv.Atoi(segs[4])
			f.mu.Lock()
			c, n = find(func(is *fakeIssue) []map[string]any { return is.Reviews }, pr, segs[6])
			f.mu.Unlock()
			if c != nil {
				c["pull_request_url"] = fmt.Sprintf("%s/pulls/%d", api, n)
			}
		default:
			next.ServeHTTP(w, r)
			return
		}
		if c == nil {
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
			return
		}
		writeJSON(w, http.StatusOK, c)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fault queues a fault; see fault.
func (f *fakeGitHub) fault(ft fault) *fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := ft
	f.faults = append(f.faults, &c)
	return &c
}

// set changes the fake's behaviour under its lock.
func (f *fakeGitHub) set(change func(f *fakeGitHub)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f)
}

func (f *fakeGitHub) requestsTo(substr string) []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeRequest
	for _, r := range f.requests {
		if strings.Contains(r.Path, substr) {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeGitHub) reactionList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.reactions...)
}

func (f *fakeGitHub) requestCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// put adds or replaces an issue.
func (f *fakeGitHub) put(repo string, is *fakeIssue) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.repos[repo] == nil {
		f.repos[repo] = map[int]*fakeIssue{}
	}
	if is.State == "" {
		is.State = "open"
	}
	f.repos[repo][is.Number] = is
}

func (f *fakeGitHub) issue(repo string, n int) *fakeIssue {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.repos[repo][n]
}

func (f *fakeGitHub) labelsOf(repo string, n int) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.repos[repo][n].Labels...)
}

// lookup finds the issue of a request; it answers 404 itself when absent.
func (f *fakeGitHub) lookup(w http.ResponseWriter, r *http.Request) *fakeIssue {
	n, _ := strconv.Atoi(r.PathValue("n"))
	is := f.repos[r.PathValue("o")+"/"+r.PathValue("r")][n]
	if is == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
	}
	return is
}

func labelObjs(ls []string) []any {
	out := []any{}
	for _, l := range ls {
		out = append(out, map[string]any{"name": l, "color": "ededed"})
	}
	return out
}

func (f *fakeGitHub) issueJSON(repo string, is *fakeIssue) map[string]any {
	m := map[string]any{
		"number": is.Number, "title": is.Title, "body": is.Body, "state": is.State,
		"user": map[string]any{"login": is.Author}, "labels": labelObjs(is.Labels),
		"html_url": fmt.Sprintf("https://github.com/%s/issues/%d", repo, is.Number),
	}
	if is.Body == "" {
		m["body"] = nil
	}
	if is.PR {
		pr := map[string]any{"url": "x", "merged_at": nil}
		if is.Merged {
			pr["merged_at"] = "2026-01-02T00:00:00Z"
		}
		m["pull_request"] = pr
	}
	return m
}

func (f *fakeGitHub) getIssue(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if is := f.lookup(w, r); is != nil {
		writeJSON(w, http.StatusOK, f.issueJSON(r.PathValue("o")+"/"+r.PathValue("r"), is))
	}
}

func (f *fakeGitHub) getPull(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	is := f.lookup(w, r)
	switch {
	case is == nil:
	case !is.PR:
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
	default:
		writeJSON(w, http.StatusOK, f.issueJSON(r.PathValue("o")+"/"+r.PathValue("r"), is))
	}
}

// paginate writes one page of items with GitHub's Link header.
func (f *fakeGitHub) paginate(w http.ResponseWriter, r *http.Request, items []any) {
	q := r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per <= 0 || per > f.pageSize {
		per = f.pageSize
	}
	page, _ := strconv.Atoi(q.Get("page"))
	if page <= 0 {
		page = 1
	}
	last := (len(items) + per - 1) / per
	if last == 0 {
		last = 1
	}
	lo, hi := (page-1)*per, page*per
	if lo > len(items) {
		lo = len(items)
	}
	if hi > len(items) {
		hi = len(items)
	}
	link := func(p int) string {
		q.Set("page", strconv.Itoa(p))
		return f.srv.URL + f.prefix + r.URL.Path + "?" + q.Encode()
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
	writeJSON(w, http.StatusOK, append([]any{}, items[lo:hi]...))
}

func (f *fakeGitHub) listOf(get func(*fakeIssue) []map[string]any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		is := f.lookup(w, r)
		if is == nil {
			return
		}
		var items []any
		for _, c := range get(is) {
			items = append(items, c)
		}
		f.paginate(w, r, items)
	}
}

func (f *fakeGitHub) listIssues(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	repo := r.PathValue("o") + "/" + r.PathValue("r")
	label, state := r.URL.Query().Get("labels"), r.URL.Query().Get("state")
	var nums []int
	for n := range f.repos[repo] {
		nums = append(nums, n)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(nums)))
	var items []any
	for _, n := range nums {
		is := f.repos[repo][n]
		if label != "" && !containsFold(is.Labels, label) {
			continue
		}
		if state != "all" && is.State != orDefault(state, "open") {
			continue
		}
		items = append(items, f.issueJSON(repo, is))
	}
	f.paginate(w, r, items)
}

func (f *fakeGitHub) getLabels(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if is := f.lookup(w, r); is != nil {
		f.paginate(w, r, labelObjs(is.Labels))
	}
}

func (f *fakeGitHub) addLabels(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	is := f.lookup(w, r)
	if is == nil {
		return
	}
	var in struct {
		Labels []string `json:"labels"`
	}
	if json.NewDecoder(r.Body).Decode(&in) != nil {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Invalid request"})
		return
	}
	for _, l := range in.Labels {
		if !containsFold(is.Labels, l) {
			is.Labels = append(is.Labels, l)
		}
	}
	writeJSON(w, http.StatusOK, labelObjs(is.Labels))
}

func (f *fakeGitHub) removeLabel(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	is := f.lookup(w, r)
	if is == nil {
		return
	}
	name := r.PathValue("name")
	if !containsFold(is.Labels, name) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Label does not exist"})
		return
	}
	is.Labels = without(is.Labels, name)
	writeJSON(w, http.StatusOK, labelObjs(is.Labels))
}

func (f *fakeGitHub) addComment(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	is := f.lookup(w, r)
	if is == nil {
		return
	}
	var in struct {
		Body string `json:"body"`
	}
	if json.NewDecoder(r.Body).Decode(&in) != nil || in.Body == "" {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed"})
		return
	}
	f.nextID++
	c := map[string]any{
		"id": f.nextID, "user": map[string]any{"login": "theloop-bot"}, "body": in.Body,
		"html_url":   fmt.Sprintf("https://github.com/%s/%s/issues/%d#issuecomment-%d", r.PathValue("o"), r.PathValue("r"), is.Number, f.nextID),
		"created_at": fmt.Sprintf("2026-02-01T00:00:%02dZ", f.nextID%60),
		"updated_at": fmt.Sprintf("2026-02-01T00:00:%02dZ", f.nextID%60),
	}
	is.Comments = append(is.Comments, c)
	writeJSON(w, http.StatusCreated, c)
}

func (f *fakeGitHub) react(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var in struct {
		Content string `json:"content"`
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	repo := r.PathValue("o") + "/" + r.PathValue("r")
	target := r.URL.Path
	if n, err := strconv.Atoi(r.PathValue("n")); err == nil {
		if f.repos[repo][n] == nil {
			writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
			return
		}
	}
	f.reactions = append(f.reactions, in.Content+" "+target)
	f.nextID++
	writeJSON(w, http.StatusCreated, map[string]any{"id": f.nextID, "content": in.Content})
}

func (f *fakeGitHub) graphql(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var in struct {
		Query     string `json:"query"`
		Variables struct {
			Owner  string `json:"owner"`
			Name   string `json:"name"`
			Number int    `json:"number"`
		} `json:"variables"`
	}
	if json.NewDecoder(r.Body).Decode(&in) != nil || !strings.Contains(in.Query, "closingIssuesReferences") {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON"})
		return
	}
	if f.graphqlUnsupported {
		writeJSON(w, http.StatusOK, map[string]any{"errors": []any{map[string]any{"message": "Field 'closingIssuesReferences' doesn't exist on type 'PullRequest'"}}})
		return
	}
	is := f.repos[in.Variables.Owner+"/"+in.Variables.Name][in.Variables.Number]
	if is == nil || !is.PR {
		writeJSON(w, http.StatusOK, map[string]any{
			"data":   map[string]any{"repository": map[string]any{"pullRequest": nil}},
			"errors": []any{map[string]any{"type": "NOT_FOUND", "message": fmt.Sprintf("Could not resolve to a PullRequest with the number of %d.", in.Variables.Number)}},
		})
		return
	}
	nodes := []any{}
	for _, c := range is.Closes {
		repo, num, _ := strings.Cut(c, "#")
		n, _ := strconv.Atoi(num)
		nodes = append(nodes, map[string]any{"number": n, "repository": map[string]any{"nameWithOwner": repo}})
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{"pullRequest": map[string]any{
		"closingIssuesReferences": map[string]any{"nodes": nodes},
	}}}})
}

// seedFixture fills the fake with the data most tests use: issue 7 with
// labels and five comments (three pages), PR 8 with reviews, review
// comments and closing references, issue 9 closed.
func seedFixture(f *fakeGitHub) {
	var comments []map[string]any
	for i := 1; i <= 5; i++ {
		comments = append(comments, map[string]any{
			"id": 100 + i, "user": map[string]any{"login": fmt.Sprintf("user%d", i%2)}, "body": fmt.Sprintf("comment %d", i),
			"html_url": fmt.Sprintf("https://github.com/octo/repo/issues/7#issuecomment-%d", 100+i), "created_at": fmt.Sprintf("2026-01-0%dT10:00:00Z", i),
			"updated_at": fmt.Sprintf("2026-01-0%dT10:00:00Z", i),
		})
	}
	comments[2]["updated_at"] = "2026-01-08T09:30:00Z" // comment 3 was edited
	f.put("octo/repo", &fakeIssue{Number: 7, Title: "Add the thing", Body: "Please add it.", Author: "dana",
		Labels: []string{"bug", "loop:requirements", "the-loop: auto-execute", "Loop:Old"}, Comments: comments})
	f.put("octo/repo", &fakeIssue{Number: 8, Title: "Implement the thing", Body: "Fixes #7\n\nAlso closes octo/other#3.", Author: "sam", PR: true,
		Labels: []string{"the-loop: auto-execute"}, Closes: []string{"octo/repo#7", "octo/other#3"},
		Reviews: []map[string]any{
			{"id": 201, "user": map[string]any{"login": "dana"}, "body": "LGTM", "state": "APPROVED", "html_url": "https://github.com/octo/repo/pull/8#pullrequestreview-201", "submitted_at": "2026-01-05T00:00:00Z"},
			{"id": 202, "user": nil, "body": "", "state": "PENDING", "html_url": "https://github.com/octo/repo/pull/8#pullrequestreview-202"},
			{"id": 203, "user": map[string]any{"login": "lee"}, "body": "nit: naming", "state": "COMMENTED", "html_url": "https://github.com/octo/repo/pull/8#pullrequestreview-203", "submitted_at": "2026-01-06T00:00:00Z"},
		},
		ReviewComments: []map[string]any{
			{"id": 301, "user": map[string]any{"login": "lee"}, "body": "rename", "html_url": "https://github.com/octo/repo/pull/8#discussion_r301", "path": "main.go", "line": 12, "original_line": 10, "created_at": "2026-01-06T00:00:00Z", "updated_at": "2026-01-07T00:00:00Z"},
			{"id": 302, "user": map[string]any{"login": "lee"}, "body": "outdated", "html_url": "https://github.com/octo/repo/pull/8#discussion_r302", "path": "old.go", "line": nil, "original_line": 4, "created_at": "2026-01-06T00:01:00Z"},
		},
	})
	f.put("octo/repo", &fakeIssue{Number: 9, Title: "Old", Author: "dana", State: "closed", Labels: []string{"the-loop: auto-execute"}})
}
