package daemon

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

func TestLinkageCacheIsBoundedLRU(t *testing.T) {
	c := newLinkageCache(linkageCacheSize)
	ref := func(n int) string {
		return linkKey(workitem.Ref{Provider: "github", Owner: "Octo", Repo: "Demo", Number: n})
	}
	for n := 1; n <= linkageCacheSize; n++ {
		c.put(ref(n), n%2 == 0)
	}
	// Touch #1 so #2 is the least recently used.
	v, ok := c.get(ref(1))
	require.True(t, ok)
	require.False(t, v)
	c.put(ref(1000), true)
	require.Equal(t, linkageCacheSize, c.len())
	_, ok = c.get(ref(2))
	require.False(t, ok, "the least recently used answer was evicted")
	_, ok = c.get(ref(1))
	require.True(t, ok)
	v, ok = c.get(linkKey(workitem.Ref{Provider: "github", Owner: "octo", Repo: "demo", Number: 1000}))
	require.True(t, ok, "names compare case-insensitively")
	require.True(t, v)
	c.put(ref(1000), false)
	v, _ = c.get(ref(1000))
	require.False(t, v, "a newer answer replaces the old")
}

func TestPrOf(t *testing.T) {
	ev := func(name, repo, payload string) *ingress.Event {
		return &ingress.Event{Event: name, Repo: repo, Payload: []byte(payload)}
	}
	for name, tc := range map[string]struct {
		ev                   *ingress.Event
		pr, branch           string
		merged, fork, wantOK bool
	}{
		"fork": {ev: ev("pull_request", "octo/demo", `{"repository":{"full_name":"octo/demo"},"pull_request":{"number":5,"head":{"ref":"main","repo":{"full_name":"mallory/demo"}}}}`),
			pr: "github:octo/demo#5", branch: "main", fork: true, wantOK: true},
		"same repo head": {ev: ev("pull_request", "octo/demo", `{"repository":{"full_name":"octo/demo"},"pull_request":{"number":5,"head":{"ref":"b","repo":{"full_name":"Octo/Demo"}}}}`),
			pr: "github:octo/demo#5", branch: "b", wantOK: true},
		"pull_request": {ev: ev("pull_request", "octo/demo", `{"pull_request":{"number":5,"merged":true,"head":{"ref":"feature/x"}}}`),
			pr: "github:octo/demo#5", branch: "feature/x", merged: true, wantOK: true},
		"review comment": {ev: ev("pull_request_review_comment", "ghe.example/octo/demo", `{"pull_request":{"number":6,"head":{"ref":"b"}}}`),
			pr: "github:ghe.example/octo/demo#6", branch: "b", wantOK: true},
		"comment on a PR":     {ev: ev("issue_comment", "octo/demo", `{"issue":{"number":7,"pull_request":{"url":"x"}}}`), pr: "github:octo/demo#7", wantOK: true},
		"comment on an issue": {ev: ev("issue_comment", "octo/demo", `{"issue":{"number":7}}`)},
		"null pull_request":   {ev: ev("issue_comment", "octo/demo", `{"issue":{"number":7,"pull_request":null}}`)},
		"hostile branch": {ev: ev("pull_request", "octo/demo", `{"pull_request":{"number":5,"head":{"ref":"--upload-pack=evil"}}}`),
			pr: "github:octo/demo#5", wantOK: true},
		"no number":   {ev: ev("pull_request", "octo/demo", `{"pull_request":{"head":{"ref":"b"}}}`)},
		"not json":    {ev: ev("pull_request", "octo/demo", `{`)},
		"no repo":     {ev: ev("pull_request", "", `{"pull_request":{"number":5}}`)},
		"bad repo":    {ev: ev("pull_request", "a b/c", `{"pull_request":{"number":5}}`)},
		"negative nr": {ev: ev("pull_request", "octo/demo", `{"pull_request":{"number":-5}}`)},
	} {
		t.Run(name, func(t *testing.T) {
			pe, ok := prOf(tc.ev)
			require.Equal(t, tc.wantOK, ok)
			if !ok {
				return
			}
			require.Equal(t, tc.pr, pe.PR.String())
			require.Equal(t, tc.branch, pe.Branch)
			require.Equal(t, tc.merged, pe.Merged)
			require.Equal(t, tc.fork, pe.Fork)
		})
	}
}

func FuzzPrOf(f *testing.F) {
	f.Add("pull_request", "octo/demo", `{"pull_request":{"number":5,"merged":true,"head":{"ref":"feature/x"}}}`)
	f.Add("issue_comment", "octo/demo", `{"issue":{"number":7,"pull_request":{}}}`)
	f.Add("issues", "h:1/o/r", `{"issue":{"number":1e3}}`)
	f.Fuzz(func(t *testing.T, name, repo, payload string) {
		pe, ok := prOf(&ingress.Event{Event: name, Repo: repo, Payload: []byte(payload)})
		if !ok {
			return
		}
		pr, branch := pe.PR, pe.Branch
		if _, err := workitem.Parse(pr.String()); err != nil || pr.Number <= 0 {
			t.Fatalf("accepted pull request %q: %v", pr, err)
		}
		if branch != "" && sessions.ValidateBranch(branch) != nil {
			t.Fatalf("accepted branch %q", branch)
		}
		_ = fmt.Sprint(pr)
	})
}
