package integrations

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/integrations/githubsim"
)

// fakeGitHub is the tests' GitHub: integrations/githubsim — the one GitHub
// stand-in every test in the repository uses — on a clock the test sets,
// with the fixture most tests read (seedFixture) and the few helpers they
// assert with. Lists are capped at two items a page so that every list
// call walks GitHub's Link header.
type fakeGitHub struct {
	t     testing.TB
	sim   *githubsim.Server
	clock *setClock
	fx    fixtureIDs
}

// fixtureIDs are the ids GitHub gave the fixture's comments, reviews and
// review comments (index 0 unused: c[1] is "comment 1").
type fixtureIDs struct {
	c  [6]int64 // issue 7's comments 1..5
	r  [4]int64 // PR 8's reviews: 1 APPROVED by dana, 2 PENDING by a deleted account, 3 COMMENTED by lee
	rc [3]int64 // PR 8's review comments: 1 on main.go, 2 outdated
}

// setClock is GitHub's clock in these tests: fixed until a test sets it.
type setClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *setClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *setClock) set(s string) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// newFakeGitHub starts a GitHub whose REST root is at prefix ("" for
// github.com, "/api/v3" for GitHub Enterprise Server) and which accepts
// token.
func newFakeGitHub(t testing.TB, prefix, token string) *fakeGitHub {
	clock := &setClock{}
	clock.set("2026-02-01T00:00:00Z")
	sim, err := githubsim.Start(githubsim.Config{Token: token, APIPrefix: prefix, Now: clock.Now, MaxPerPage: 2, PageSize: 2})
	require.NoError(t, err)
	t.Cleanup(sim.Close)
	return &fakeGitHub{t: t, sim: sim, clock: clock}
}

// URL is the REST root, as configured in integrations.github.api.baseUrl.
func (f *fakeGitHub) URL() string { return f.sim.URL() }

// fault is a githubsim.Fault in the tests' shorthand: path is a substring
// of the path under the REST root.
type fault struct {
	method string // "" = any
	path   string
	status int
	header map[string]string
	body   string
	times  int  // how many requests it answers (<=0: unlimited)
	slow   bool // hold the request until the client gives up
}

func (f *fakeGitHub) fault(ft fault) {
	f.sim.InjectFault(githubsim.Fault{Method: ft.method, PathContains: ft.path, Status: ft.status, Header: ft.header, Body: ft.body, Times: ft.times, Slow: ft.slow})
}

// noGraphQLClosingIssues makes GitHub answer the closingIssuesReferences
// query as a server without the field does (GitHub Enterprise before 3.x).
func (f *fakeGitHub) noGraphQLClosingIssues() {
	f.sim.InjectFault(githubsim.Fault{Method: http.MethodPost, Path: "/graphql", Status: http.StatusOK,
		Body: `{"errors":[{"message":"Field 'closingIssuesReferences' doesn't exist on type 'PullRequest'"}]}`})
}

// echoAuthorization makes GitHub refuse every request with a message that
// echoes the Authorization header the client sent ("Bearer " + token), as
// careless proxies do: what a client must never pass on unscrubbed.
func (f *fakeGitHub) echoAuthorization(token string) {
	f.sim.InjectFault(githubsim.Fault{Status: http.StatusUnauthorized,
		Body: fmt.Sprintf(`{"message":"Bad credentials for Bearer %s"}`, token)})
}

// requestsTo is every request whose path contains substr.
func (f *fakeGitHub) requestsTo(substr string) []githubsim.Request {
	var out []githubsim.Request
	for _, r := range f.sim.Requests() {
		if strings.Contains(r.Path, substr) {
			out = append(out, r)
		}
	}
	return out
}

func (f *fakeGitHub) requestCount() int { return len(f.sim.Requests()) }

// reactionList is every reaction GitHub accepted, "content path", in order.
func (f *fakeGitHub) reactionList() []string {
	var out []string
	for _, r := range f.requestsTo("/reactions") {
		if r.Method == http.MethodPost && r.Status < 300 {
			out = append(out, r.Body+" "+r.Path)
		}
	}
	return out
}

func (f *fakeGitHub) labelsOf(repo string, n int) []string {
	is, err := f.sim.Issue(repo, n)
	require.NoError(f.t, err)
	return is.Labels
}

func (f *fakeGitHub) comments(repo string, n int) []githubsim.Comment {
	cs, err := f.sim.Comments(repo, n)
	require.NoError(f.t, err)
	return cs
}

// openAt opens an issue numbered n (numbers only move on in a repository).
func (f *fakeGitHub) openAt(repo string, n int, author, title string, labels ...string) githubsim.Issue {
	require.NoError(f.t, f.sim.AddRepo(repo, githubsim.RepoOptions{FirstNumber: n}))
	is, err := f.sim.OpenIssue(repo, author, title, "", labels...)
	require.NoError(f.t, err)
	require.Equal(f.t, n, is.Number, "issue numbers only move on")
	return is
}

// seedFixture fills GitHub with the data most tests use, made as people
// would make it, at the times given: issue 7 with labels and five
// comments (three pages; comment 3 edited), PR 8 that closes #7 and
// octo/other#3, with reviews (one by a deleted account, pending) and
// review comments (one outdated), and issue 9, closed. The clock is left
// at 2026-02-01.
func seedFixture(f *fakeGitHub) {
	t, s, c := f.t, f.sim, f.clock
	must := func(err error) { t.Helper(); require.NoError(t, err) }
	c.set("2025-12-01T00:00:00Z")
	f.openAt("octo/other", 3, "dana", "Elsewhere")
	must(s.AddRepo("octo/repo", githubsim.RepoOptions{FirstNumber: 7}))
	is, err := s.OpenIssue("octo/repo", "dana", "Add the thing", "Please add it.", "bug", "loop:requirements", "the-loop: auto-execute", "Loop:Old")
	must(err)
	require.Equal(t, 7, is.Number)
	for i := 1; i <= 5; i++ {
		c.set(fmt.Sprintf("2026-01-%02dT10:00:00Z", i))
		cm, err := s.Comment("octo/repo", 7, []string{"user0", "user1"}[i%2], fmt.Sprintf("comment %d", i))
		must(err)
		f.fx.c[i] = cm.ID
	}
	c.set("2026-01-08T09:30:00Z")
	_, err = s.EditComment("octo/repo", f.fx.c[3], "user1", "comment 3")
	must(err)

	c.set("2026-01-04T12:00:00Z")
	pr, err := s.OpenPullRequestWith("octo/repo", githubsim.PullRequest{Author: "sam", Title: "Implement the thing",
		Body: "Fixes #7\n\nAlso closes octo/other#3.", Labels: []string{"the-loop: auto-execute"}})
	must(err)
	require.Equal(t, 8, pr.Number)
	c.set("2026-01-05T00:00:00Z")
	r, err := s.AddReview("octo/repo", 8, githubsim.Review{Author: "dana", Body: "LGTM", State: "APPROVED"})
	must(err)
	f.fx.r[1] = r.ID
	r, err = s.AddReview("octo/repo", 8, githubsim.Review{State: "PENDING"}) // a deleted account's draft
	must(err)
	f.fx.r[2] = r.ID
	c.set("2026-01-06T00:00:00Z")
	r, err = s.AddReview("octo/repo", 8, githubsim.Review{Author: "lee", Body: "nit: naming", State: "COMMENTED"})
	must(err)
	f.fx.r[3] = r.ID
	rc, err := s.AddReviewComment("octo/repo", 8, githubsim.ReviewComment{Author: "lee", Body: "rename", Path: "main.go", Line: 12, OriginalLine: 10})
	must(err)
	f.fx.rc[1] = rc.ID
	c.set("2026-01-06T00:01:00Z")
	rc, err = s.AddReviewComment("octo/repo", 8, githubsim.ReviewComment{Author: "lee", Body: "outdated", Path: "old.go", OriginalLine: 4})
	must(err)
	f.fx.rc[2] = rc.ID

	c.set("2026-01-07T00:00:00Z")
	old, err := s.OpenIssue("octo/repo", "dana", "Old", "", "the-loop: auto-execute")
	must(err)
	require.Equal(t, 9, old.Number)
	must(s.CloseIssue("octo/repo", 9, "dana"))
	c.set("2026-02-01T00:00:00Z")
}
