package githubsim

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/internal/octokit"
	"github.com/theloop-dev/theloop/internal/required"
	"github.com/theloop-dev/theloop/ops"
)

// Held to GitHub's description (@octokit/openapi): every request the
// integrations send matches an operation's method, path, query parameters
// and body schema, and every answer githubsim serves on a route validates
// against that operation's response schema. Every route of githubsim is
// exercised: by the real client where it uses the route, else directly.

// exchange is one request and its answer, as the client saw them.
type exchange struct {
	method, path string
	query        url.Values
	reqBody      []byte
	status       int
	body         []byte
}

// recorder is an http.RoundTripper keeping every exchange.
type recorder struct {
	mu   sync.Mutex
	next http.RoundTripper
	seen []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	if req.Body != nil {
		reqBody, _ = io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	r.seen = append(r.seen, exchange{method: req.Method, path: req.URL.Path, query: req.URL.Query(), reqBody: reqBody, status: resp.StatusCode, body: body})
	r.mu.Unlock()
	return resp, nil
}

func loadSpec(t *testing.T) *octokit.Spec {
	t.Helper()
	p, ok := octokit.OpenAPIFile()
	if !ok {
		required.Skip(t, "octokit-openapi", octokit.SkipReason("@octokit/openapi", octokit.OpenAPIEnv))
	}
	spec, err := octokit.Load(p)
	require.NoError(t, err)
	return spec
}

func TestContractEveryRequestAndAnswerMatchesGitHubsDescription(t *testing.T) {
	spec := loadSpec(t)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	s, err := Start(Config{App: &AppConfig{ID: 9, Slug: "contract", PublicKey: &key.PublicKey}})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	rec := &recorder{next: http.DefaultTransport}
	set, err := integrations.New(integrations.Config{GitHub: &integrations.GitHubConfig{
		MaxAttempts: 1, API: integrations.GitHubAPIConfig{BaseURL: s.URL()},
		App: &integrations.GitHubAppConfig{AppID: 9, Slug: "contract"},
	}}, integrations.Deps{
		Env:        func(k string) (string, bool) { return keyPEM, k == integrations.DefaultGitHubAppKeyEnv },
		HTTPClient: &http.Client{Transport: rec},
	})
	require.NoError(t, err)
	call := func(op graph.Operation, args map[string]any) map[string]any {
		t.Helper()
		res, err := set.Call(context.Background(), op, args)
		require.NoError(t, err, "%s %v", op, args)
		return res
	}

	const repo = "demo/widgets"
	require.NoError(t, s.AddRepo(repo, RepoOptions{}))
	// A hook whose receiver answers 503: its deliveries are listed and
	// redelivered below (hookdeliveries.go).
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	t.Cleanup(down.Close)
	hook, err := s.AddHook(Hook{URL: down.URL + "/gh-webhook", Secret: "x"})
	require.NoError(t, err)
	_, err = s.AddInstallation(repo)
	require.NoError(t, err)
	_, err = s.OpenIssue(repo, "dana", "Export CSV", "Please.", "bug")
	require.NoError(t, err)
	ref := "github:" + repo + "#1"
	call(ops.GitHubGetIssue, map[string]any{"ref": ref})
	call(ops.GitHubSetLabels, map[string]any{"ref": ref, "labels": []string{"loop:design"}, "replacePrefix": "loop:"})
	call(ops.GitHubSetLabels, map[string]any{"ref": ref, "labels": []string{"loop:tasks"}, "replacePrefix": "loop:"})
	call(ops.GitHubGetLabels, map[string]any{"ref": ref})
	posted := call(ops.GitHubAddComment, map[string]any{"ref": ref, "body": "hello"})
	c, err := s.Comment(repo, 1, "dana", "Approved")
	require.NoError(t, err)
	call(ops.GitHubListComments, map[string]any{"ref": ref})
	call(ops.GitHubGetComment, map[string]any{"ref": ref, "commentId": int(c.ID)})
	call(ops.GitHubAddReaction, map[string]any{"ref": ref, "content": "eyes"})
	call(ops.GitHubAddReaction, map[string]any{"ref": ref, "content": "+1", "commentId": posted["id"]})
	call(ops.GitHubListItemsByLabel, map[string]any{"repo": repo, "label": "loop:tasks"})
	pr, err := s.OpenPullRequest(repo, "erin", "CSV", "Fixes #1")
	require.NoError(t, err)
	prRef := fmt.Sprintf("github:%s#%d", repo, pr.Number)
	rv, err := s.AddReview(repo, pr.Number, Review{Author: "dana", Body: "LGTM", State: "APPROVED"})
	require.NoError(t, err)
	rc, err := s.AddReviewComment(repo, pr.Number, ReviewComment{Author: "dana", Body: "nit", Path: "csv.go", Line: 3})
	require.NoError(t, err)
	call(ops.GitHubGetComment, map[string]any{"ref": prRef, "commentId": int(rv.ID), "commentType": "review"})
	call(ops.GitHubGetComment, map[string]any{"ref": prRef, "commentId": int(rc.ID), "commentType": "review-comment"})
	call(ops.GitHubListReviews, map[string]any{"ref": prRef})
	call(ops.GitHubListReviewComments, map[string]any{"ref": prRef})
	call(ops.GitHubAddReaction, map[string]any{"ref": prRef, "content": "rocket", "commentId": int(rc.ID), "commentType": "review-comment"})
	call(ops.GitHubClosingIssues, map[string]any{"ref": prRef})
	call(ops.GitHubListPulls, map[string]any{"repo": repo})
	// The repository's activity (the poller's repository pass).
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	require.NotEmpty(t, call(ops.GitHubListRepoComments, map[string]any{"repo": repo, "since": since})["comments"])
	require.NotEmpty(t, call(ops.GitHubListRepoIssues, map[string]any{"repo": repo, "since": since})["items"])
	require.NotEmpty(t, call(ops.GitHubListRepoIssueEvents, map[string]any{"repo": repo})["events"])
	sha := strings.Repeat("a", 40)
	call(ops.GitHubListCheckRuns, map[string]any{"ref": prRef, "sha": sha})
	call(ops.GitHubCombinedStatus, map[string]any{"ref": prRef, "sha": sha})
	s.SetTeam("demo", "reviewers", "dana")
	s.SetPermission(repo, "dana", "maintain")
	s.PutFile(repo, ".github/CODEOWNERS", "* @dana\n")
	call(ops.GitHubTeamMembership, map[string]any{"org": "demo", "team": "reviewers", "login": "dana", "repo": repo})
	call(ops.GitHubTeamMembership, map[string]any{"org": "demo", "team": "reviewers", "login": "mallory", "repo": repo})
	call(ops.GitHubCollaboratorPermission, map[string]any{"repo": repo, "login": "dana"})
	call(ops.GitHubGetFile, map[string]any{"repo": repo, "path": ".github/CODEOWNERS"})
	call(ops.GitHubGetFile, map[string]any{"repo": repo, "path": "docs/CODEOWNERS"})

	require.NoError(t, s.WaitDeliveries(context.Background()))
	call(ops.GitHubListHooks, map[string]any{"repo": repo})
	ds := call(ops.GitHubListHookDeliveries, map[string]any{"repo": repo, "hookId": int(hook)})["deliveries"].([]any)
	require.NotEmpty(t, ds)
	attempt := ds[0].(map[string]any)["id"].(int)
	call(ops.GitHubRedeliverHookDelivery, map[string]any{"repo": repo, "hookId": int(hook), "deliveryId": attempt})
	// The App's own hook, with the App's JWT.
	_, err = s.AddHook(Hook{URL: down.URL + "/gh-webhook", Secret: "x", App: true})
	require.NoError(t, err)
	_, err = s.Comment(repo, 1, "dana", "to the App's hook too")
	require.NoError(t, err)
	require.NoError(t, s.WaitDeliveries(context.Background()))
	ads := call(ops.GitHubListHookDeliveries, map[string]any{"app": true})["deliveries"].([]any)
	require.NotEmpty(t, ads)
	call(ops.GitHubRedeliverHookDelivery, map[string]any{"app": true, "deliveryId": ads[0].(map[string]any)["id"].(int)})

	// Routes the integrations do not use, asked directly (as a token
	// user would), so every route's answers are held to the description.
	tok := "direct-token"
	require.NoError(t, s.AddUser(tok, "dana"))
	direct := func(method, path, body string) {
		t.Helper()
		req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "token "+tok)
		resp, err := rec.RoundTrip(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
	}
	jwtReq := func(method, path string) {
		t.Helper()
		j := appJWT(t, key, 9)
		req, err := http.NewRequest(method, s.URL()+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+j)
		resp, err := rec.RoundTrip(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
	}
	direct("GET", "/user", "")
	direct("GET", "/repos/"+repo, "")
	direct("GET", "/repos/"+repo+"/issues", "")
	mine, err := s.Comment(repo, 1, "dana", "mine")
	require.NoError(t, err)
	direct("PATCH", fmt.Sprintf("/repos/%s/issues/comments/%d", repo, mine.ID), `{"body":"mine, edited"}`)
	direct("GET", "/repos/"+repo+"/contents/CODEOWNERS", "")
	direct("POST", fmt.Sprintf("/repos/%s/issues/comments/%d/reactions", repo, c.ID), `{"content":"heart"}`)
	direct("GET", fmt.Sprintf("/repos/%s/pulls/comments/%d", repo, rc.ID), "")
	direct("PATCH", "/repos/"+repo+"/issues/1", `{"title":"Export CSV files"}`)
	direct("GET", fmt.Sprintf("/repos/%s/pulls/%d", repo, pr.Number), "")
	direct("DELETE", "/repos/"+repo+"/issues/1/labels/bug", "")
	jwtReq("GET", "/app")
	// An organization's hook (the App client needs an installation id for
	// it): asked directly.
	orgHook, err := s.AddHook(Hook{URL: "http://127.0.0.1:1/gh-webhook", Org: "demo"})
	require.NoError(t, err)
	direct("GET", "/orgs/demo/hooks", "")
	direct("GET", fmt.Sprintf("/orgs/demo/hooks/%d/deliveries?per_page=2", orgHook), "")
	direct("GET", fmt.Sprintf("/orgs/demo/hooks/%d/deliveries?per_page=2", hook), "")
	direct("POST", fmt.Sprintf("/orgs/demo/hooks/%d/deliveries/%d/attempts", hook, attempt), "")

	exercised := map[string]bool{}
	for _, x := range rec.seen {
		path := x.path
		if path == "/graphql" {
			exercised["POST /graphql"] = true
			continue // GraphQL is not part of the REST description
		}
		op, ok := spec.Match(x.method, path)
		if !assertTrue(t, ok, "%s %s is not an operation of GitHub's REST API", x.method, path) {
			continue
		}
		if err := op.ValidateRequest(x.query, x.reqBody); err != nil {
			t.Errorf("request %s %s: %v", x.method, path, err)
		}
		if err := op.ValidateResponse(x.status, x.body); err != nil {
			t.Errorf("githubsim's answer to %s %s: %v", x.method, path, err)
		}
		exercised[x.method+" "+routeOf(s, x.method, path)] = true
	}
	for _, rt := range s.table {
		k := rt.method + " /" + strings.Join(rt.pattern, "/")
		if strings.Contains(k, "/contents/{p") && !strings.HasSuffix(k, "/contents/{p0}") && !strings.HasSuffix(k, "/contents/{p1}") {
			continue // deeper contents paths: the same handler
		}
		require.True(t, exercised[k], "githubsim route %s is not held to the description: exercise it in this test", k)
	}
	// The App's routes are served beside the table (app.go); their
	// answers were validated above.
	require.True(t, hasExchange(rec, "POST", "/access_tokens"), "an installation token was exchanged")
	require.True(t, hasExchange(rec, "GET", "/installation"), "the installation was found per repository")
}

func assertTrue(t *testing.T, ok bool, format string, args ...any) bool {
	t.Helper()
	if !ok {
		t.Errorf(format, args...)
	}
	return ok
}

func hasExchange(r *recorder, method, suffix string) bool {
	for _, x := range r.seen {
		if x.method == method && strings.HasSuffix(x.path, suffix) {
			return true
		}
	}
	return false
}

// routeOf names the githubsim route serving method on path.
func routeOf(s *Server, method, path string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for _, rt := range s.table {
		if rt.method != method || len(rt.pattern) != len(segs) {
			continue
		}
		ok := true
		for i, p := range rt.pattern {
			if !strings.HasPrefix(p, "{") && p != segs[i] {
				ok = false
				break
			}
		}
		if ok {
			return "/" + strings.Join(rt.pattern, "/")
		}
	}
	return path
}

// appJWT signs an App JWT as GitHub's documentation describes it.
func appJWT(t *testing.T, key *rsa.PrivateKey, appID int64) string {
	t.Helper()
	now := time.Now()
	j, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
		Issuer: fmt.Sprint(appID), IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute)), ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute)),
	}).SignedString(key)
	require.NoError(t, err)
	return j
}
