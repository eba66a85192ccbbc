package integrations

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/theloop-dev/theloop/workitem"
)

// Fuzz targets for every parser of outside input: Link headers, gh's
// --include output, GitHub/Slack/Jira answers, PR bodies (closing keywords)
// and Retry-After. Run each briefly with
// `go test -fuzz=FuzzX -fuzztime=20s ./integrations`. Refs are parsed and
// fuzzed in package workitem.

func FuzzNextLink(f *testing.F) {
	for _, s := range []string{
		`<https://api.github.com/repositories/1/issues?labels=a,b&page=2>; rel="next", <https://api.github.com/repositories/1/issues?page=5>; rel="last"`,
		`<https://x/y?page=1>; rel="prev first", <https://x/y?page=3>; rel=next`,
		`<>; rel="next"`, `<a`, `;;;rel=next`, ``, `<x>; REL = "Next"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		next := nextLink([]string{s})
		if next != "" && !strings.Contains(s, "<"+next+">") {
			t.Fatalf("next %q is not a link target of %q", next, s)
		}
	})
}

func FuzzParseGhInclude(f *testing.F) {
	for _, s := range []string{
		"HTTP/2.0 200 OK\r\nContent-Type: application/json\r\nLink: <https://api.github.com/x?page=2>; rel=\"next\"\r\n\r\n[{\"name\":\"bug\"}]",
		"HTTP/1.1 204 No Content\r\nX-Github-Request-Id: 1\r\n\r\n",
		"HTTP/2.0 404 Not Found\r\n\r\n{\"message\":\"Not Found\"}",
		"HTTP/2.0 200 OK\n\n{}", "HTTP/2.0 999 Odd\r\n\r\n", "HTTP/2.0\r\n", "garbage", "",
		"HTTP/1.1 200 OK\r\nBad Header Line\r\n\r\nbody",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		resp, err := parseGhInclude(b)
		if err == nil && (resp.status < 100 || resp.status > 599 || len(resp.body) > len(b)) {
			t.Fatalf("accepted %q as status %d", b, resp.status)
		}
		_ = nextLink(resp.header.Values("Link"))
	})
}

func FuzzGitHubDecoders(f *testing.F) {
	for _, s := range []string{
		`[{"name":"bug"},{"name":"loop:design"}]`,
		`[{"id":1,"user":{"login":"a"},"body":"x","html_url":"u","created_at":"t"},{"id":2,"user":null,"body":null}]`,
		`[{"id":1,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-02T00:00:00Z"},{"id":2,"updated_at":null},{"id":3,"updated_at":7}]`,
		`[{"id":3,"user":{"login":"b"},"state":"APPROVED","submitted_at":null}]`,
		`[{"id":4,"path":"a.go","line":null,"original_line":7},{"line":-1}]`,
		`{"number":7,"title":"t","body":null,"state":"open","user":{"login":"d"},"labels":[{"name":"x"}],"pull_request":{"merged_at":"2026"}}`,
		`[{"number":8,"labels":[{"name":"a"}],"pull_request":{}},{"number":-3},{"number":1e30}]`,
		`{"data":{"repository":{"pullRequest":{"closingIssuesReferences":{"nodes":[{"number":7,"repository":{"nameWithOwner":"o/r"}},{"number":0},{"number":9,"repository":{"nameWithOwner":"../x"}}]}}}}}`,
		`{"id":5,"user":{"login":"alice"},"body":"Approved","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","issue_url":"https://api.github.com/repos/octo/repo/issues/7"}`,
		`{"id":6,"state":"APPROVED","submitted_at":"t","pull_request_url":"https://ghe.example/api/v3/repos/o/r/pulls/08"}`,
		`{"id":7,"issue_url":"https://x/repos/../r/issues/1"}`, `{"id":8,"issue_url":"/repos/o/r/issues/99999999999"}`, `{"id":-1}`,
		`[{"number":2,"body":null,"merged_at":"t","head":{"ref":"issue-1","sha":"0123456789abcdef0123456789abcdef01234567"},"user":null},{"number":0}]`,
		`{"total_count":1,"check_runs":[{"id":9,"name":"lint","status":"completed","conclusion":null,"html_url":"u"},{"id":"x"}]}`,
		`{"state":"failure","statuses":[{"context":"ci","state":"error","target_url":null}]}`,
		`[{"id":9,"issue_url":"https://api.github.com/repos/o/r/issues/3","user":{"login":"a"},"created_at":"t","updated_at":"t"},{"id":10,"issue_url":"/issues/"},{"id":11,"issue_url":"x/issues/0"}]`,
		`[{"id":12,"event":"labeled","actor":null,"created_at":"t","label":{"name":"bug"},"issue":{"number":4,"pull_request":{"merged_at":null}}},{"id":13,"issue":null},{"id":14,"event":"closed","label":null,"issue":{"number":-1}}]`,
		`[{"number":5,"created_at":"t","updated_at":"u","closed_at":null,"labels":[]}]`,
		`{"errors":[{"message":"nope"}]}`, `{"message":"Bad credentials"}`, `null`, `[]`, `{}`, `[1,2]`, `"s"`, ``, `[{"id":"x"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(v any, err error) {
			if err != nil {
				return
			}
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("decoded value is not JSON-shaped: %v", err)
			}
		}
		check(decodeLabelNames(b))
		check(decodeComments(b))
		check(decodeReviews(b))
		check(decodeReviewComments(b))
		check(decodeIssue(b))
		check(decodeItems(b, "", "o", "r"))
		check(decodeCreatedComment(b))
		check(decodeCheckRuns(b))
		check(decodeCombinedStatus(b))
		check(decodeRepoComments(b))
		check(decodeRepoIssues(b, "", "o", "r"))
		check(decodeIssueEvents(b))
		_ = issueNumberOf(string(b))
		pulls, err := decodePulls(b, "", "o", "r")
		check(pulls, err)
		for _, p := range pulls {
			if _, perr := workitem.Parse(p.(map[string]any)["ref"].(string)); perr != nil {
				t.Fatalf("a listed pull request's ref does not parse: %v", perr)
			}
		}
		for _, kind := range []string{CommentTypeIssue, CommentTypeReviewComment, CommentTypeReview} {
			m, err := decodeOneComment(b, kind, "")
			check(m, err)
			if err != nil {
				continue
			}
			if ref, _ := m["ref"].(string); ref != "" {
				if _, perr := workitem.Parse(ref); perr != nil {
					t.Fatalf("decoded ref %q does not parse: %v", ref, perr)
				}
			}
			if id, _ := m["id"].(int); id <= 0 {
				t.Fatalf("accepted a comment without a positive id: %v", m)
			}
		}
		refs, _, err := decodeClosing(b)
		if err == nil {
			for _, r := range refs {
				if r.Number <= 0 || !workitem.ValidName(r.Owner) || !workitem.ValidName(r.Repo) {
					t.Fatalf("invalid closing ref %+v", r)
				}
			}
		}
		if m := githubMessage(b); len(m) > 204 {
			t.Fatalf("message not clipped: %d bytes", len(m))
		}
	})
}

func FuzzClosingKeywords(f *testing.F) {
	for _, s := range []string{
		"Fixes #7", "closes: octo/other#3 and resolves #4", "Resolved https://github.com/octo/repo/issues/9",
		"prefixes #1", "FIXED #0", "fix #12, fix #12", "Closes https://evil.example/octo/repo/issues/5", "close\t#99999999999",
	} {
		f.Add(s, "github.com")
	}
	f.Fuzz(func(t *testing.T, body, host string) {
		seen := map[closingRef]bool{}
		for _, r := range parseClosingKeywords(body, "octo", "repo", host) {
			if r.Number <= 0 || r.Number > workitem.MaxNumber || !workitem.ValidName(r.Owner) || !workitem.ValidName(r.Repo) || seen[r] {
				t.Fatalf("bad or duplicate ref %+v from %q", r, body)
			}
			seen[r] = true
		}
	})
}

func FuzzServiceAnswers(f *testing.F) {
	for _, s := range []string{
		`{"ok":true,"ts":"1.2"}`, `{"ok":false,"error":"not_in_channel"}`, `{"ok":"yes"}`,
		`{"id":"10001"}`, `{"id":10002}`, `{"id":null}`,
		`{"transitions":[{"id":"11","name":"Start","to":{"name":"In Progress"}}]}`, `{"transitions":"x"}`,
		`{"errorMessages":["Issue does not exist"],"errors":{"summary":"required"}}`, `[]`, ``, `ok`, `no_service`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, code, err := decodeSlackAnswer(b); err == nil {
			for _, r := range code {
				if r != '_' && (r < 'a' || r > 'z') && (r < '0' || r > '9') {
					t.Fatalf("unsanitised Slack code %q", code)
				}
			}
		}
		if code := slackCode(string(b)); code == "" || len(code) > 61 {
			t.Fatalf("slackCode(%q) = %q", b, code)
		}
		_, _ = decodeJiraComment(b)
		_, _ = decodeJiraTransitions(b)
		if m := jiraMessage(b); !utf8.ValidString(m) && utf8.Valid(b) {
			t.Fatalf("jiraMessage broke UTF-8: %q", m)
		}
	})
}

func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"3", "0", "-1", "86401", "Wed, 21 Oct 2015 07:28:00 GMT", "soon", "", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := retryAfter(http.Header{"Retry-After": {v}}, now)
		if ok && (d < 0 || d > 24*time.Hour) {
			t.Fatalf("Retry-After %q → %s", v, d)
		}
	})
}
