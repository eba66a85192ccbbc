package ingress

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func repoJSON(full string) map[string]any {
	return map[string]any{"full_name": full, "html_url": "https://github.com/" + full}
}

// TestRouterExtraction covers every extraction form of docs/daemon.md §4.1.
func TestRouterExtraction(t *testing.T) {
	pr := func(extra map[string]any) map[string]any {
		p := map[string]any{"number": 9, "html_url": "https://github.com/octo/repo/pull/9", "head": map[string]any{"ref": "feature"}, "body": ""}
		for k, v := range extra {
			p[k] = v
		}
		return p
	}
	tests := []struct {
		name    string
		event   string
		payload map[string]any
		want    []string
		sources [][]RefSource
	}{
		{"issue comment on an issue", "issue_comment", map[string]any{
			"action": "created", "repository": repoJSON("octo/repo"),
			"issue":   map[string]any{"number": 15},
			"comment": map[string]any{"id": 1, "body": "hi", "user": map[string]any{"login": "alice"}}, "sender": map[string]any{"login": "alice"},
		}, []string{"github:octo/repo#15"}, [][]RefSource{{RefFromEntity}}},
		{"issues event", "issues", map[string]any{
			"action": "opened", "repository": repoJSON("octo/repo"), "issue": map[string]any{"number": 3}, "sender": map[string]any{"login": "alice"},
		}, []string{"github:octo/repo#3"}, nil},
		{"PR: branch issue-<n>", "pull_request", map[string]any{
			"action": "opened", "repository": repoJSON("octo/repo"), "sender": map[string]any{"login": "alice"},
			"pull_request": pr(map[string]any{"head": map[string]any{"ref": "Issue-12-fix"}}),
		}, []string{"github:octo/repo#12", "github:octo/repo#9"}, [][]RefSource{{RefFromBranch}, {RefFromEntity}}},
		{"PR: branch issue/<n>", "pull_request", map[string]any{
			"action": "opened", "repository": repoJSON("octo/repo"), "sender": map[string]any{"login": "alice"},
			"pull_request": pr(map[string]any{"head": map[string]any{"ref": "feat/issue/7"}}),
		}, []string{"github:octo/repo#7", "github:octo/repo#9"}, nil},
		{"PR: closing keywords in every form", "pull_request", map[string]any{
			"action": "opened", "repository": repoJSON("octo/repo"), "sender": map[string]any{"login": "alice"},
			"pull_request": pr(map[string]any{"body": "Fixes #3\ncloses: other/lib#4 and Resolves https://github.com/octo/repo/issues/5\nfixed GH-6\nfixes https://evil.example.com/octo/repo/issues/8\nsee #10\nfixes #9"}),
		}, []string{"github:octo/repo#3", "github:other/lib#4", "github:octo/repo#5", "github:octo/repo#6", "github:octo/repo#9"},
			[][]RefSource{{RefFromKeyword}, {RefFromKeyword}, {RefFromKeyword}, {RefFromKeyword}, {RefFromEntity}}},
		{"PR: closingIssuesReferences (poll shape) in every repository form", "pull_request", map[string]any{
			"action": "labeled", "repository": repoJSON("octo/repo"), "sender": map[string]any{"login": "alice"},
			"pull_request": pr(map[string]any{"closingIssuesReferences": []any{
				map[string]any{"number": 1, "repository": map[string]any{"nameWithOwner": "a/b"}},
				map[string]any{"number": 2, "repository": map[string]any{"owner": map[string]any{"login": "c"}, "name": "d"}},
				map[string]any{"number": 3, "url": "https://github.com/e/f/issues/3"},
				map[string]any{"number": 4},
				map[string]any{"number": "5"},
				map[string]any{"number": 9},
			}, "body": "fixes #4", "head": map[string]any{"ref": "issue-4"}}),
		}, []string{"github:a/b#1", "github:c/d#2", "github:e/f#3", "github:octo/repo#4", "github:octo/repo#9"},
			[][]RefSource{{RefFromClosingReference}, {RefFromClosingReference}, {RefFromClosingReference}, {RefFromClosingReference, RefFromBranch, RefFromKeyword}, {RefFromEntity}}},
		{"comment on a PR (issue with pull_request key)", "issue_comment", map[string]any{
			"action": "created", "repository": repoJSON("octo/repo"),
			"issue":   map[string]any{"number": 9, "pull_request": map[string]any{"url": "x"}, "body": "closes #2"},
			"comment": map[string]any{"id": 1, "body": "ok", "user": map[string]any{"login": "alice"}}, "sender": map[string]any{"login": "alice"},
		}, []string{"github:octo/repo#2", "github:octo/repo#9"}, nil},
		{"workflow_run", "workflow_run", map[string]any{
			"action": "completed", "repository": repoJSON("octo/repo"),
			"workflow_run": map[string]any{"pull_requests": []any{map[string]any{"number": 9}}, "head_branch": "issue-4"},
		}, []string{"github:octo/repo#9", "github:octo/repo#4"}, nil},
		{"check_run", "check_run", map[string]any{
			"action": "completed", "repository": repoJSON("octo/repo"),
			"check_run": map[string]any{"check_suite": map[string]any{"pull_requests": []any{map[string]any{"number": 9}}, "head_branch": "issue-4"}},
		}, []string{"github:octo/repo#9", "github:octo/repo#4"}, nil},
		{"check_run: PRs on the run itself (GitHub's shape)", "check_run", map[string]any{
			"action": "completed", "repository": repoJSON("octo/repo"),
			"check_run": map[string]any{
				"pull_requests": []any{map[string]any{"number": 9, "head": map[string]any{"ref": "issue-4-fix"}}},
				"check_suite":   map[string]any{"pull_requests": []any{}, "head_branch": "issue-4-fix"},
			},
		}, []string{"github:octo/repo#9", "github:octo/repo#4"}, [][]RefSource{{RefFromEntity}, {RefFromBranch}}},
		{"check_run: run and suite both list PRs, deduplicated", "check_run", map[string]any{
			"action": "created", "repository": repoJSON("octo/repo"),
			"check_run": map[string]any{
				"pull_requests": []any{map[string]any{"number": 9}, map[string]any{"number": 10}},
				"check_suite":   map[string]any{"pull_requests": []any{map[string]any{"number": 10}}, "head_branch": "main"},
			},
		}, []string{"github:octo/repo#9", "github:octo/repo#10"}, [][]RefSource{{RefFromEntity}, {RefFromEntity}}},
		{"check_run: only a head branch on the run", "check_run", map[string]any{
			"action": "completed", "repository": repoJSON("octo/repo"),
			"check_run": map[string]any{"head_branch": "issue/17", "pull_requests": []any{}},
		}, []string{"github:octo/repo#17"}, [][]RefSource{{RefFromBranch}}},
		{"check_run: malformed PR entries are ignored", "check_run", map[string]any{
			"action": "completed", "repository": repoJSON("octo/repo"),
			"check_run": map[string]any{"pull_requests": []any{"x", map[string]any{"number": "9"}, map[string]any{"number": -1}, map[string]any{"number": 12}},
				"check_suite": "oops"},
		}, []string{"github:octo/repo#12"}, nil},
		{"check_suite", "check_suite", map[string]any{
			"action": "completed", "repository": repoJSON("octo/repo"),
			"check_suite": map[string]any{"pull_requests": []any{}, "head_branch": "issue-11"},
		}, []string{"github:octo/repo#11"}, nil},
		{"status", "status", map[string]any{
			"repository": repoJSON("octo/repo"),
			"branches":   []any{map[string]any{"name": "main"}, map[string]any{"name": "issue-21-x"}},
		}, []string{"github:octo/repo#21"}, nil},
		{"GitHub Enterprise host", "issues", map[string]any{
			"action": "opened", "repository": map[string]any{"full_name": "corp/app", "html_url": "https://GHE.example.com/corp/app"},
			"issue": map[string]any{"number": 2}, "sender": map[string]any{"login": "alice"},
		}, []string{"github:ghe.example.com/corp/app#2"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewRouter(testConfig(), RouterDeps{})
			require.NoError(t, err)
			ev, drop, err := r.Route(tc.event, "id-"+tc.name, mustJSON(t, tc.payload))
			require.NoError(t, err)
			require.Empty(t, drop)
			var got []string
			for _, w := range ev.WorkItems {
				got = append(got, w.String())
			}
			require.Equal(t, tc.want, got)
			if tc.sources != nil {
				pl, ok := readPayload(&doc{b: mustJSON(t, tc.payload)})
				require.True(t, ok)
				repo, _ := payloadRepo(&pl, prEntity(routedKind(tc.event), &pl))
				x := extract(routedKind(tc.event), &pl, repo)
				var got [][]RefSource
				for i := range x.refs {
					got = append(got, x.sourcesOf(i))
				}
				require.Equal(t, tc.sources, got)
			}
		})
	}
}

// TestRouterDrops covers the drop steps, in docs/daemon.md §4's order.
func TestRouterDrops(t *testing.T) {
	comment := func(login, body string) map[string]any {
		return map[string]any{
			"action": "created", "repository": repoJSON("octo/repo"), "issue": map[string]any{"number": 1},
			"comment": map[string]any{"id": 5, "body": body, "user": map[string]any{"login": login}}, "sender": map[string]any{"login": login},
		}
	}
	tests := []struct {
		name    string
		event   string
		payload map[string]any
		drop    DropReason
	}{
		{"event outside the filter", "push", comment("alice", "x"), DropDisabledEvent},
		{"repository not bound", "issue_comment", func() map[string]any {
			m := comment("alice", "x")
			m["repository"] = repoJSON("evil/repo")
			return m
		}(), DropRepositoryUnbound},
		{"same name on another host is not bound", "issue_comment", func() map[string]any {
			m := comment("alice", "x")
			m["repository"] = map[string]any{"full_name": "octo/repo", "html_url": "https://ghe.example.com/octo/repo"}
			return m
		}(), DropRepositoryUnbound},
		{"no repository", "issue_comment", map[string]any{"action": "created"}, DropRepositoryUnbound},
		{"no work item", "issue_comment", func() map[string]any {
			m := comment("alice", "x")
			delete(m, "issue")
			return m
		}(), DropNoWorkItem},
		{"self-authored, even by an authorized user", "issue_comment", comment("alice", "done\n\n<!-- the-loop:agent-comment -->\n"), DropSelfAuthored},
		{"self-authored by a stranger is self-authored first", "issue_comment", comment("mallory", "<!-- the-loop:agent-comment -->"), DropSelfAuthored},
		{"unauthorized commenter", "issue_comment", comment("mallory", "the-loop start"), DropUnauthorized},
		{"case differs: unauthorized", "issue_comment", comment("Alice", "ok"), DropUnauthorized},
		{"comment without a login", "issue_comment", comment("", "ok"), DropUnauthorized},
		{"unauthorized sender of an issues event", "issues", map[string]any{
			"action": "labeled", "repository": repoJSON("octo/repo"), "issue": map[string]any{"number": 1}, "sender": map[string]any{"login": "mallory"},
		}, DropUnauthorized},
		{"unauthorized reviewer", "pull_request_review", map[string]any{
			"action": "submitted", "repository": repoJSON("octo/repo"), "pull_request": map[string]any{"number": 2},
			"review": map[string]any{"id": 3, "body": "approved", "state": "approved", "user": map[string]any{"login": "mallory"}},
		}, DropUnauthorized},
		// docs/decisions.md §19: the actor and the author. A collaborator's edit of
		// an authorized user's comment arrives under the author's login.
		{"edit of alice's comment sent by mallory", "issue_comment", func() map[string]any {
			m := comment("alice", "Approved")
			m["action"], m["sender"] = "edited", map[string]any{"login": "mallory"}
			return m
		}(), DropSenderNotAuthor},
		{"created comment whose sender is another user", "issue_comment", func() map[string]any {
			m := comment("alice", "Approved")
			m["sender"] = map[string]any{"login": "bob"}
			return m
		}(), DropSenderNotAuthor},
		{"comment event without a sender", "issue_comment", func() map[string]any {
			m := comment("alice", "Approved")
			delete(m, "sender")
			return m
		}(), DropSenderNotAuthor},
		{"review submitted by someone else", "pull_request_review", map[string]any{
			"action": "submitted", "repository": repoJSON("octo/repo"), "pull_request": map[string]any{"number": 2},
			"review": map[string]any{"id": 3, "body": "approved", "state": "approved", "user": map[string]any{"login": "alice"}},
			"sender": map[string]any{"login": "mallory"},
		}, DropSenderNotAuthor},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := &logSink{}
			r, err := NewRouter(testConfig(), RouterDeps{Log: log})
			require.NoError(t, err)
			ev, drop, err := r.Route(tc.event, "d", mustJSON(t, tc.payload))
			require.NoError(t, err)
			require.Nil(t, ev)
			require.Equal(t, tc.drop, drop)
			require.Equal(t, []string{EventDropped}, log.names())
		})
	}
}

func TestRouterClosesBypassAuthorizationAndLabel(t *testing.T) {
	r, err := NewRouter(testConfig(), RouterDeps{})
	require.NoError(t, err)
	closed := map[string]any{
		"action": "closed", "repository": repoJSON("octo/repo"), "issue": map[string]any{"number": 1}, "sender": map[string]any{"login": "mallory"},
	}
	ev, drop, err := r.Route("issues", "c1", mustJSON(t, closed))
	require.NoError(t, err)
	require.Empty(t, drop)
	require.Equal(t, "mallory", ev.Actor)

	labeled := map[string]any{
		"action": "labeled", "repository": repoJSON("octo/repo"), "issue": map[string]any{"number": 1, "labels": []any{}},
		"label": map[string]any{"name": "the-loop: auto-execute"}, "sender": map[string]any{"login": "alice"},
	}
	ev, _, err = r.Route("issues", "l1", mustJSON(t, labeled))
	require.NoError(t, err)
	require.True(t, ev.Labeled)
	onItem := map[string]any{
		"action": "created", "repository": repoJSON("octo/repo"),
		"issue":   map[string]any{"number": 1, "labels": []any{map[string]any{"name": "The-Loop: Auto-Execute"}}},
		"comment": map[string]any{"id": 1, "body": "x", "user": map[string]any{"login": "alice"}}, "sender": map[string]any{"login": "alice"},
	}
	ev, _, err = r.Route("issue_comment", "l2", mustJSON(t, onItem))
	require.NoError(t, err)
	require.True(t, ev.Labeled)
}

func TestRouterFixturesEveryAction(t *testing.T) {
	// Every example payload of the routed events either routes or drops
	// for a stated reason; none is "invalid".
	for _, name := range []string{
		"issues/opened.payload.json", "issues/labeled.payload.json", "issues/edited.payload.json", "issues/deleted.payload.json",
		"issue_comment/created.payload.json", "issue_comment/edited.payload.json", "issue_comment/deleted.payload.json",
		"pull_request/opened.payload.json", "pull_request/closed.payload.json", "pull_request/labeled.payload.json",
		"pull_request/opened.with-null-body.json", "pull_request_review/submitted.payload.json",
		"pull_request_review/dismissed.payload.json", "pull_request_review_comment/created.payload.json",
	} {
		t.Run(name, func(t *testing.T) {
			body := fixture(t, name)
			r, err := NewRouter(testConfig(), RouterDeps{})
			require.NoError(t, err)
			event := name[:len(name)-len(name[indexByte(name, '/'):])]
			ev, drop, err := r.Route(event, "d-"+name, body)
			require.NoError(t, err)
			require.Empty(t, drop)
			require.NotEmpty(t, ev.WorkItems)
			require.Equal(t, "Codertocat", ev.Actor)
		})
	}
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func TestRouterControlOnlyOnCreated(t *testing.T) {
	r, err := NewRouter(testConfig(), RouterDeps{})
	require.NoError(t, err)
	body := func(action string) []byte {
		return mustJSON(t, map[string]any{
			"action": action, "repository": repoJSON("octo/repo"), "issue": map[string]any{"number": 1},
			"comment": map[string]any{"id": 5, "body": "the-loop start", "html_url": "https://github.com/octo/repo/issues/1#issuecomment-5", "updated_at": action, "user": map[string]any{"login": "alice"}},
			"sender":  map[string]any{"login": "alice"},
		})
	}
	ev, _, err := r.Route("issue_comment", "c", body("created"))
	require.NoError(t, err)
	require.Equal(t, &ControlCommand{Command: CmdStart, Actor: "alice", Note: "https://github.com/octo/repo/issues/1#issuecomment-5"}, ev.Control)
	ev, _, err = r.Route("issue_comment", "e", body("edited"))
	require.NoError(t, err)
	require.Nil(t, ev.Control, "an edit never executes a command")
}

func TestConfigValidate(t *testing.T) {
	c := testConfig()
	c.Repositories = []string{"not a repo"}
	_, err := c.Validate()
	require.ErrorIs(t, err, ErrInvalidConfig)
	c = testConfig()
	c.Path = "gh-webhook"
	_, err = c.Validate()
	require.ErrorIs(t, err, ErrInvalidConfig)
	c = testConfig()
	c.Control.Keywords = map[Command]string{"force": "the-loop force"}
	_, err = c.Validate()
	require.ErrorContains(t, err, "force is never a keyword")
	c = testConfig()
	c.Control.Keywords = map[Command]string{CmdStop: "the-loop start"}
	_, err = c.Validate()
	require.ErrorContains(t, err, "already the keyword")
	c = testConfig()
	c.Events = []string{"issue_comment"}
	c.Repositories = nil
	c.AuthorizedUsers = nil
	w, err := c.Validate()
	require.NoError(t, err)
	require.Len(t, w, 3)
}

func TestRepoBoundWildcard(t *testing.T) {
	b := newRepoBound([]string{"octo/*", "ghe.example.com/corp/app"})
	require.True(t, b.allows("", "OCTO", "anything"))
	require.False(t, b.allows("ghe.example.com", "octo", "x"))
	require.True(t, b.allows("ghe.example.com", "corp", "APP"))
	require.False(t, b.allows("", "corp", "app"))
}

func TestRouterBranchOnlyRefsAreMarked(t *testing.T) {
	r, err := NewRouter(testConfig(), RouterDeps{})
	require.NoError(t, err)
	ev, _, err := r.Route("pull_request", "b1", mustJSON(t, map[string]any{
		"action": "opened", "repository": repoJSON("octo/repo"), "sender": map[string]any{"login": "alice"},
		"pull_request": map[string]any{"number": 9, "head": map[string]any{"ref": "issue-12"}, "body": "fixes #3, also issue-3"},
	}))
	require.NoError(t, err)
	require.Len(t, ev.WorkItems, 3)
	require.Len(t, ev.BranchOnly, 1)
	require.Equal(t, "github:octo/repo#12", ev.BranchOnly[0].String())
}

// TestRouterCheckRunFixtures routes GitHub's published check_run examples:
// each names the pull requests listed on the run (check_run.pull_requests)
// and the issue of an issue-<n> head branch.
func TestRouterCheckRunFixtures(t *testing.T) {
	names, _ := filepath.Glob(filepath.Join(fixtureDir, "check_run", "*.json"))
	if len(names) == 0 {
		t.Skipf("no check_run example payloads at %s/check_run (the shared fixtures carry none yet); skipping", fixtureDir)
	}
	for _, path := range names {
		t.Run(filepath.Base(path), func(t *testing.T) {
			body, err := os.ReadFile(path)
			require.NoError(t, err)
			var m struct {
				Repository struct {
					FullName string `json:"full_name"`
				} `json:"repository"`
				CheckRun struct {
					PullRequests []struct {
						Number int `json:"number"`
					} `json:"pull_requests"`
				} `json:"check_run"`
			}
			require.NoError(t, json.Unmarshal(body, &m))
			cfg := testConfig()
			cfg.Repositories = append(cfg.Repositories, m.Repository.FullName)
			r, err := NewRouter(cfg, RouterDeps{})
			require.NoError(t, err)
			ev, drop, err := r.Route("check_run", "d-"+path, body)
			require.NoError(t, err)
			if len(m.CheckRun.PullRequests) == 0 {
				return // routes or drops as "no work item"; either is fine
			}
			require.Empty(t, drop)
			var got []string
			for _, w := range ev.WorkItems {
				got = append(got, w.String())
			}
			for _, pr := range m.CheckRun.PullRequests {
				require.Contains(t, got, "github:"+m.Repository.FullName+"#"+strconv.Itoa(pr.Number))
			}
		})
	}
}
