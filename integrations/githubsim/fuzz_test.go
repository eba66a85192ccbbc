package githubsim

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzServeHTTP sends arbitrary methods, paths, queries and bodies to a
// server holding an issue, a comment and a pull request: no request may
// panic it, and every answer is JSON with a status GitHub could give.
func FuzzServeHTTP(f *testing.F) {
	seeds := []struct{ method, path, body string }{
		{"GET", "/repos/demo/widgets/issues/1", ""},
		{"GET", "/repos/demo/widgets/issues?labels=a,b&state=all&per_page=1&page=2", ""},
		{"POST", "/repos/demo/widgets/issues/1/labels", `{"labels":["loop:design"]}`},
		{"POST", "/repos/demo/widgets/issues/1/labels", `["x"]`},
		{"DELETE", "/repos/demo/widgets/issues/1/labels/loop%3Adesign", ""},
		{"POST", "/repos/demo/widgets/issues/1/comments", `{"body":"hi"}`},
		{"PATCH", "/repos/demo/widgets/issues/comments/1003", `{"body":"edited"}`},
		{"POST", "/repos/demo/widgets/issues/comments/1003/reactions", `{"content":"+1"}`},
		{"PATCH", "/repos/demo/widgets/issues/1", `{"state":"closed","title":"t"}`},
		{"POST", "/graphql", `{"query":"closingIssuesReferences","variables":{"owner":"demo","name":"widgets","number":2}}`},
		{"POST", "/graphql", `{"query":"closingIssuesReferences","variables":{"owner":"demo","name":"widgets","number":1e300}}`},
		{"GET", "/repos/demo/widgets/pulls/2/reviews?per_page=-1", ""},
		{"GET", "/repos/%zz/x/issues/1", ""},
		{"GET", "//repos//", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.body)
	}
	f.Fuzz(func(t *testing.T, method, path, body string) {
		s, err := newServer(Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.OpenIssue("demo/widgets", "dana", "t", "b", "bug"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Comment("demo/widgets", 1, "dana", "c"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.OpenPullRequest("demo/widgets", "dana", "pr", "Fixes #1"); err != nil {
			t.Fatal(err)
		}
		req, err := http.NewRequest(method, "http://sim.invalid/", strings.NewReader(body))
		if err != nil {
			return
		}
		u, err := req.URL.Parse(path)
		if err != nil {
			return
		}
		req.URL = u
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)
		res := w.Result()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode < 200 || res.StatusCode >= 500 {
			t.Fatalf("%s %s: status %d: %s", method, path, res.StatusCode, b)
		}
		if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
			t.Fatalf("%s %s: content type %q", method, path, res.Header.Get("Content-Type"))
		}
	})
}
