package githubsim

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
	"time"
)

// The builders below produce JSON objects with the fields and shapes of
// GitHub's (compare the shared fixtures' github-webhooks, beside the repository); REST answers and
// webhook payloads use the same objects, as GitHub does. s.mu must be held.

// apiURL is the API root written into "url" fields: the server's own REST
// root, so that a client following them stays on the stand-in.
func (s *Server) apiURL() string { return s.URL() }

// userID derives a stable numeric id from a login.
func userID(login string) int64 {
	h := sha256.Sum256([]byte("user:" + strings.ToLower(login)))
	return int64(binary.BigEndian.Uint32(h[:4])>>1) + 1
}

func nodeID(kind string, id int64) string {
	return base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%s%d", kind, id)))
}

func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func (s *Server) userJSON(login string) map[string]any {
	api := s.apiURL() + "/users/" + login
	typ := "User"
	if strings.HasSuffix(login, "[bot]") {
		typ = "Bot"
	}
	id := userID(login)
	return map[string]any{
		"login": login, "id": id, "node_id": nodeID("04:User", id),
		"avatar_url":          fmt.Sprintf("https://avatars.githubusercontent.com/u/%d?v=4", id),
		"gravatar_id":         "",
		"url":                 api,
		"html_url":            s.cfg.WebURL + "/" + login,
		"followers_url":       api + "/followers",
		"following_url":       api + "/following{/other_user}",
		"gists_url":           api + "/gists{/gist_id}",
		"starred_url":         api + "/starred{/owner}{/repo}",
		"subscriptions_url":   api + "/subscriptions",
		"organizations_url":   api + "/orgs",
		"repos_url":           api + "/repos",
		"events_url":          api + "/events{/privacy}",
		"received_events_url": api + "/received_events",
		"type":                typ,
		"site_admin":          false,
	}
}

func (s *Server) repoJSON(rp *repo) map[string]any {
	api := s.apiURL() + "/repos/" + rp.full()
	web := s.cfg.WebURL + "/" + rp.full()
	clone := rp.opts.CloneURL
	if clone == "" {
		clone = web + ".git"
	}
	m := map[string]any{
		"id": rp.id, "node_id": nodeID("010:Repository", rp.id), "name": rp.name, "full_name": rp.full(),
		"private": rp.opts.Private, "owner": s.userJSON(rp.owner), "html_url": web, "description": nil,
		"fork": false, "url": api,
		"created_at": ts(rp.created), "updated_at": ts(rp.created), "pushed_at": ts(rp.created),
		"git_url": strings.Replace(web, "https://", "git://", 1) + ".git", "clone_url": clone,
		"ssh_url": "git@" + strings.TrimPrefix(strings.TrimPrefix(s.cfg.WebURL, "https://"), "http://") + ":" + rp.full() + ".git",
		"svn_url": web, "homepage": nil, "size": 0, "stargazers_count": 0, "watchers_count": 0,
		"language": "Go", "has_issues": true, "has_projects": false, "has_downloads": true, "has_wiki": false,
		"has_pages": false, "forks_count": 0, "mirror_url": nil, "archived": false, "disabled": false,
		"open_issues_count": rp.openCount(), "license": nil, "forks": 0, "open_issues": rp.openCount(),
		"watchers": 0, "default_branch": rp.defaultBranch(), "is_template": false, "topics": []any{},
		"visibility":                  map[bool]string{true: "private", false: "public"}[rp.opts.Private],
		"web_commit_signoff_required": false, "custom_properties": map[string]any{},
	}
	for _, k := range []string{"forks", "keys", "collaborators", "teams", "hooks", "events", "assignees", "branches", "tags",
		"stargazers", "contributors", "subscribers", "subscription", "languages", "merges", "downloads", "deployments"} {
		m[k+"_url"] = api + "/" + k
	}
	for k, v := range map[string]string{
		"issue_events_url": "/issues/events{/number}", "blobs_url": "/git/blobs{/sha}", "git_tags_url": "/git/tags{/sha}",
		"git_refs_url": "/git/refs{/sha}", "trees_url": "/git/trees{/sha}", "statuses_url": "/statuses/{sha}",
		"commits_url": "/commits{/sha}", "git_commits_url": "/git/commits{/sha}", "comments_url": "/comments{/number}",
		"issue_comment_url": "/issues/comments{/number}", "contents_url": "/contents/{+path}",
		"compare_url": "/compare/{base}...{head}", "archive_url": "/{archive_format}{/ref}", "issues_url": "/issues{/number}",
		"pulls_url": "/pulls{/number}", "milestones_url": "/milestones{/number}",
		"notifications_url": "/notifications{?since,all,participating}", "labels_url": "/labels{/name}",
		"releases_url": "/releases{/id}",
	} {
		m[k] = api + v
	}
	return m
}

func (rp *repo) openCount() int {
	n := 0
	for _, is := range rp.issues {
		if is.state == "open" {
			n++
		}
	}
	return n
}

func (rp *repo) defaultBranch() string {
	if rp.opts.DefaultBranch == "" {
		return "main"
	}
	return rp.opts.DefaultBranch
}

// labelID derives a stable id for a label of a repository.
func labelID(rp *repo, name string) int64 {
	h := sha256.Sum256([]byte("label:" + rp.full() + ":" + strings.ToLower(name)))
	return int64(binary.BigEndian.Uint32(h[:4])>>1) + 1
}

func labelColor(name string) string {
	h := sha256.Sum256([]byte(strings.ToLower(name)))
	return fmt.Sprintf("%02x%02x%02x", h[0], h[1], h[2])
}

func (s *Server) labelJSON(rp *repo, name string) map[string]any {
	id := labelID(rp, name)
	return map[string]any{
		"id": id, "node_id": nodeID("05:Label", id),
		"url":  s.apiURL() + "/repos/" + rp.full() + "/labels/" + name,
		"name": name, "color": labelColor(name), "default": false, "description": nil,
	}
}

func (s *Server) labelsJSON(rp *repo, names []string) []any {
	out := make([]any, 0, len(names))
	for _, n := range names {
		out = append(out, s.labelJSON(rp, n))
	}
	return out
}

func reactionsJSON(url string, list []string) map[string]any {
	m := map[string]any{"url": url, "total_count": len(list)}
	for _, c := range []string{"+1", "-1", "laugh", "hooray", "confused", "heart", "rocket", "eyes"} {
		m[c] = 0
	}
	for _, r := range list {
		_, content, _ := strings.Cut(r, ":")
		if n, ok := m[content].(int); ok {
			m[content] = n + 1
		}
	}
	return m
}

func association(rp *repo, login string) string {
	if strings.EqualFold(login, rp.owner) {
		return "OWNER"
	}
	return "NONE"
}

func (s *Server) issueJSON(rp *repo, is *issue) map[string]any {
	api := s.apiURL() + "/repos/" + rp.full() + "/issues/" + fmt.Sprint(is.number)
	kind := "issues"
	if is.pr {
		kind = "pull"
	}
	web := fmt.Sprintf("%s/%s/%s/%d", s.cfg.WebURL, rp.full(), kind, is.number)
	var body any = is.body
	if is.body == "" {
		body = nil
	}
	m := map[string]any{
		"url": api, "repository_url": s.apiURL() + "/repos/" + rp.full(),
		"labels_url": api + "/labels{/name}", "comments_url": api + "/comments", "events_url": api + "/events",
		"html_url": web, "id": is.id, "node_id": nodeID("05:Issue", is.id), "number": is.number,
		"title": is.title, "user": s.userJSON(is.author), "labels": s.labelsJSON(rp, is.labels),
		"state": is.state, "locked": false, "assignee": nil, "assignees": []any{}, "milestone": nil,
		"comments": len(is.comments), "created_at": ts(is.created), "updated_at": ts(is.updated),
		"closed_at": ts(is.closed), "author_association": association(rp, is.author),
		"active_lock_reason": nil, "body": body, "reactions": reactionsJSON(api+"/reactions", is.reactions),
		"draft": false,
	}
	if is.state == "closed" {
		m["state_reason"] = "completed"
	} else {
		m["state_reason"] = nil
	}
	if is.pr {
		var merged any
		if is.merged {
			merged = ts(is.closed)
		}
		m["pull_request"] = map[string]any{
			"url":      s.apiURL() + "/repos/" + rp.full() + "/pulls/" + fmt.Sprint(is.number),
			"html_url": web, "diff_url": web + ".diff", "patch_url": web + ".patch", "merged_at": merged,
		}
	}
	return m
}

// fakeSHA is a stable 40-hex-digit commit id for a pull request's head.
func fakeSHA(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return fmt.Sprintf("%x", h[:20])
}

// branchJSON is a pull request's head or base.
func (s *Server) branchJSON(rp *repo, ref, sha string) map[string]any {
	return map[string]any{"label": rp.owner + ":" + ref, "ref": ref, "sha": sha, "user": s.userJSON(rp.owner), "repo": s.repoJSON(rp)}
}

// forkBranchJSON is a pull request's head in a fork of rp: the repository
// object is rp's with the fork's names (GitHub sends the fork's own).
func (s *Server) forkBranchJSON(rp *repo, fork, ref, sha string) map[string]any {
	owner, name, _ := splitRepo(fork)
	r := s.repoJSON(rp)
	web := s.cfg.WebURL + "/" + fork
	r["name"], r["full_name"], r["owner"], r["html_url"], r["fork"] = name, fork, s.userJSON(owner), web, true
	r["clone_url"], r["url"] = web+".git", s.apiURL()+"/repos/"+fork
	return map[string]any{"label": owner + ":" + ref, "ref": ref, "sha": sha, "user": s.userJSON(owner), "repo": r}
}

// pullJSON is a pull request as the pulls API and pull_request* webhooks
// carry it.
func (s *Server) pullJSON(rp *repo, is *issue) map[string]any {
	m := s.issueJSON(rp, is)
	delete(m, "pull_request")
	delete(m, "reactions")
	delete(m, "state_reason")
	delete(m, "repository_url")
	delete(m, "labels_url")
	delete(m, "events_url")
	api := s.apiURL() + "/repos/" + rp.full()
	self := fmt.Sprintf("%s/pulls/%d", api, is.number)
	issueAPI := fmt.Sprintf("%s/issues/%d", api, is.number)
	web := fmt.Sprintf("%s/%s/pull/%d", s.cfg.WebURL, rp.full(), is.number)
	head := fakeSHA(rp.full(), fmt.Sprint(is.number), is.head)
	m["url"] = self
	m["diff_url"], m["patch_url"], m["issue_url"] = web+".diff", web+".patch", issueAPI
	m["commits_url"], m["review_comments_url"] = self+"/commits", self+"/comments"
	m["review_comment_url"] = api + "/pulls/comments{/number}"
	m["comments_url"], m["statuses_url"] = issueAPI+"/comments", api+"/statuses/"+head
	m["head"] = s.branchJSON(rp, is.head, head)
	if is.headRepo != "" {
		m["head"] = s.forkBranchJSON(rp, is.headRepo, is.head, head)
	}
	m["base"] = s.branchJSON(rp, is.base, fakeSHA(rp.full(), is.base))
	m["_links"] = map[string]any{
		"self": map[string]any{"href": self}, "html": map[string]any{"href": web}, "issue": map[string]any{"href": issueAPI},
		"comments": map[string]any{"href": issueAPI + "/comments"}, "review_comments": map[string]any{"href": self + "/comments"},
		"review_comment": map[string]any{"href": api + "/pulls/comments{/number}"}, "commits": map[string]any{"href": self + "/commits"},
		"statuses": map[string]any{"href": api + "/statuses/" + head},
	}
	m["requested_reviewers"], m["requested_teams"] = []any{}, []any{}
	m["auto_merge"], m["merge_commit_sha"] = nil, nil
	m["draft"] = is.draft
	m["merged"] = is.merged
	m["merged_at"], m["merged_by"] = nil, nil
	if is.merged {
		m["merged_at"], m["merged_by"] = ts(is.closed), s.userJSON(is.mergedBy)
		m["merge_commit_sha"] = fakeSHA(rp.full(), fmt.Sprint(is.number), "merge")
	}
	m["mergeable"], m["rebaseable"], m["mergeable_state"] = nil, nil, "unknown"
	m["review_comments"] = len(is.reviewCs)
	m["maintainer_can_modify"] = false
	m["commits"], m["additions"], m["deletions"], m["changed_files"] = 1, 1, 0, 1
	return m
}

func (s *Server) commentJSON(rp *repo, c *comment) map[string]any {
	api := fmt.Sprintf("%s/repos/%s/issues/comments/%d", s.apiURL(), rp.full(), c.id)
	kind := "issues"
	if c.issue.pr {
		kind = "pull"
	}
	return map[string]any{
		"url": api, "html_url": fmt.Sprintf("%s/%s/%s/%d#issuecomment-%d", s.cfg.WebURL, rp.full(), kind, c.issue.number, c.id),
		"issue_url": fmt.Sprintf("%s/repos/%s/issues/%d", s.apiURL(), rp.full(), c.issue.number),
		"id":        c.id, "node_id": nodeID("012:IssueComment", c.id), "user": s.userJSON(c.author),
		"created_at": ts(c.created), "updated_at": ts(c.updated), "author_association": association(rp, c.author),
		"performed_via_github_app": nil, "body": c.body, "reactions": reactionsJSON(api+"/reactions", c.reactions),
	}
}

func (s *Server) reviewJSON(rp *repo, is *issue, r *Review) map[string]any {
	html := fmt.Sprintf("%s/%s/pull/%d#pullrequestreview-%d", s.cfg.WebURL, rp.full(), is.number, r.ID)
	pull := fmt.Sprintf("%s/repos/%s/pulls/%d", s.apiURL(), rp.full(), is.number)
	var user any
	if r.Author != "" {
		user = s.userJSON(r.Author)
	}
	return map[string]any{
		"id": r.ID, "node_id": nodeID("017:PullRequestReview", r.ID), "user": user, "body": r.Body,
		"state": r.State, "html_url": html, "pull_request_url": pull,
		"commit_id":    fakeSHA(rp.full(), fmt.Sprint(is.number), is.head),
		"submitted_at": ts(r.SubmittedAt), "author_association": association(rp, r.Author),
		"_links": map[string]any{"html": map[string]any{"href": html}, "pull_request": map[string]any{"href": pull}},
	}
}

func (s *Server) reviewCommentJSON(rp *repo, rc *reviewComment) map[string]any {
	var line, original any
	if rc.Line > 0 {
		line, original = rc.Line, rc.Line
	}
	if rc.OriginalLine > 0 {
		original = rc.OriginalLine
	}
	self := fmt.Sprintf("%s/repos/%s/pulls/comments/%d", s.apiURL(), rp.full(), rc.ID)
	html := fmt.Sprintf("%s/%s/pull/%d#discussion_r%d", s.cfg.WebURL, rp.full(), rc.issue.number, rc.ID)
	pull := fmt.Sprintf("%s/repos/%s/pulls/%d", s.apiURL(), rp.full(), rc.issue.number)
	sha := fakeSHA(rp.full(), fmt.Sprint(rc.issue.number), rc.issue.head)
	return map[string]any{
		"url": self, "pull_request_review_id": nil, "id": rc.ID, "node_id": nodeID("024:PullRequestReviewComment", rc.ID),
		"diff_hunk": "@@ -1 +1 @@", "path": rc.Path, "position": line, "original_position": original,
		"commit_id": sha, "original_commit_id": sha, "user": s.userJSON(rc.Author),
		"body": rc.Body, "created_at": ts(rc.CreatedAt), "updated_at": ts(rc.CreatedAt),
		"html_url": html, "pull_request_url": pull, "author_association": association(rp, rc.Author),
		"_links":     map[string]any{"self": map[string]any{"href": self}, "html": map[string]any{"href": html}, "pull_request": map[string]any{"href": pull}},
		"reactions":  reactionsJSON(self+"/reactions", rc.Reactions),
		"start_line": nil, "original_start_line": nil, "start_side": nil,
		"line": line, "original_line": original, "side": "RIGHT",
	}
}
