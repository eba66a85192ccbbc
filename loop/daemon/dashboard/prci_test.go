package dashboard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/api/login"
)

// fixture reads an octokit webhook fixture (skipped when the shared
// fixtures are not beside the worktree).
func fixture(t *testing.T, event, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "shared", "fixtures", "github-webhooks", event, name))
	if err != nil {
		t.Skipf("the shared webhook fixtures are not here (%v)", err)
	}
	return b
}

// A pull request's state, its review and its checks — check runs and
// commit statuses — are kept per work item and summed up for the row,
// the first failing check named with its link.
func TestPRCI(t *testing.T) {
	const ref = "github:Codertocat/Hello-World#1"
	var p PRCI
	p.Note("pull_request", []string{ref}, fixture(t, "pull_request", "opened.payload.json"))
	prs := p.PullRequests(ref)
	require.Len(t, prs, 1)
	require.Equal(t, 2, prs[0].Number)
	require.Equal(t, "open", prs[0].State)
	require.Equal(t, "https://github.com/Codertocat/Hello-World/pull/2", prs[0].URL)

	p.Note("pull_request_review", []string{ref}, fixture(t, "pull_request_review", "submitted.payload.json"))
	require.NotEmpty(t, p.PullRequests(ref)[0].Review)

	sha := "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	p.Note("check_run", []string{ref}, []byte(`{"action":"completed","check_run":{"name":"lint","status":"completed","conclusion":"failure","html_url":"https://github.com/Codertocat/Hello-World/runs/4","head_sha":"`+sha+`","pull_requests":[{"number":2}]}}`))
	p.Note("check_run", []string{ref}, []byte(`{"action":"completed","check_run":{"name":"test","status":"completed","conclusion":"success","head_sha":"`+sha+`","check_suite":{"pull_requests":[{"number":2}]}}}`))
	p.Note("status", []string{ref}, []byte(`{"sha":"`+sha+`","state":"pending","context":"ci/deploy","target_url":"javascript:alert(1)"}`))
	p.Note("check_run", []string{ref}, []byte(`{not json`))
	got := p.PullRequests(ref)[0]
	require.Equal(t, 1, got.Passing)
	require.Equal(t, 1, got.Failing)
	require.Equal(t, 1, got.Pending)
	require.Equal(t, "lint", got.FailingName)
	require.Equal(t, "https://github.com/Codertocat/Hello-World/runs/4", got.FailingURL)
	require.Contains(t, got.Summary(), "#2 open · checks 1 passing, 1 failing (lint), 1 pending")

	// A re-run that passes clears the failure.
	p.Note("check_run", []string{ref}, []byte(`{"check_run":{"name":"lint","status":"completed","conclusion":"success","pull_requests":[{"number":2}]}}`))
	require.Zero(t, p.PullRequests(ref)[0].Failing)
}

// The failing check appears on the item's row with its link.
func TestBoardShowsFailingCheck(t *testing.T) {
	src := &fakeSource{items: []Item{{Ref: "github:o/r#1", Repo: "o/r", State: StateWorking, Node: "implementation",
		PullRequests: []PullRequest{{Number: 5, State: "open", Passing: 2, Failing: 1, FailingName: "lint <x>", FailingURL: "https://github.com/o/r/runs/9"}}}}}
	d, err := New(Config{}, Deps{Source: src, Now: func() time.Time { return t0 }, Log: io.Discard})
	require.NoError(t, err)
	defer d.Close()
	id, err := d.auth.redeem(login.Mint(d.cfg.Key, t0), t0)
	require.NoError(t, err)
	req := httptest.NewRequest("GET", "http://127.0.0.1/", nil)
	req.AddCookie(&http.Cookie{Name: cookieName, Value: id})
	w := httptest.NewRecorder()
	d.Handler().ServeHTTP(w, req)
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	require.Contains(t, body, `<span data-f="ci">#5 open · checks 2 passing, 1 failing (lint &lt;x&gt;)</span>`)
	require.Contains(t, body, `<a data-f="cifail" class="cifail" href="https://github.com/o/r/runs/9" rel="noopener noreferrer">lint &lt;x&gt;</a>`)
	require.True(t, strings.Contains(body, "<th>PR · CI</th>"))
}
