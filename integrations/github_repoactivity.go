package integrations

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/theloop-dev/theloop/workitem"
)

// A repository's recent activity, read by the poller's repository pass
// when failed webhook deliveries cannot be redelivered: the comments,
// issues and issue events of the whole repository, not of one work item.
// Each listing reads at most repoActivityPages pages, so one pass spends a
// bounded number of calls; "more" tells the caller to continue from where
// the answer ends.

// repoActivityPages bounds the pages one listing reads.
const repoActivityPages = 3

// sinceArg reads the optional since argument, an RFC 3339 time.
func sinceArg(args map[string]any) (string, error) {
	s, err := argString(args, "since", false)
	if err != nil || s == "" {
		return "", err
	}
	if _, perr := time.Parse(time.RFC3339, s); perr != nil {
		return "", fail(ErrInvalidArgument, "argument \"since\": %q is not an RFC 3339 time (2006-01-02T15:04:05Z)", clip(s, 40))
	}
	return s, nil
}

// listBounded reads up to repoActivityPages pages of path and reports
// whether a further page exists.
func (g *github) listBounded(ctx context.Context, st *callState, host, path, what string, each func([]byte) error) (more bool, err error) {
	p := path + "&per_page=100"
	for page := 1; ; page++ {
		resp, err := g.send(ctx, st, ghRequest{method: http.MethodGet, path: p, host: host}, true, what)
		if err != nil {
			return false, err
		}
		if err := each(resp.body); err != nil {
			return false, err
		}
		next := nextLink(resp.header.Values("Link"))
		if next == "" {
			return false, nil
		}
		if page >= repoActivityPages {
			return true, nil
		}
		if p, err = g.t.nextPath(next); err != nil {
			return false, err
		}
	}
}

type ghRepoComment struct {
	ghComment
	IssueURL string `json:"issue_url"`
}

func (g *github) listRepoComments(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	return g.listSince(ctx, st, args, "issues/comments?sort=updated&direction=asc", "comments", "comments",
		func(b []byte, _, _, _ string) ([]any, error) { return decodeRepoComments(b) })
}

func (g *github) listRepoIssues(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	return g.listSince(ctx, st, args, "issues?state=all&sort=updated&direction=asc", "issues", "items", decodeRepoIssues)
}

// listSince reads a repository listing (sub, query included) updated since
// the since argument, a few pages at most, into answer key.
func (g *github) listSince(ctx context.Context, st *callState, args map[string]any, sub, what, key string,
	decode func(b []byte, host, owner, repo string) ([]any, error)) (map[string]any, error) {
	host, owner, repo, err := g.repoArg(args)
	if err != nil {
		return nil, err
	}
	since, err := sinceArg(args)
	if err != nil {
		return nil, err
	}
	path := fmt.Sprintf("repos/%s/%s/%s", owner, repo, sub)
	if since != "" {
		path += "&since=" + url.QueryEscape(since)
	}
	all := []any{}
	more, err := g.listBounded(ctx, st, host, path, fmt.Sprintf("the %s of %s/%s", what, owner, repo), func(b []byte) error {
		items, err := decode(b, host, owner, repo)
		all = append(all, items...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{key: all, "more": more}, nil
}

// issueNumberOf reads the number at the end of an issue's API URL
// (…/issues/{n}); 0 when it is not one.
func issueNumberOf(u string) int {
	i := len(u)
	for i > 0 && u[i-1] >= '0' && u[i-1] <= '9' {
		i--
	}
	if i == len(u) || i < len("/issues/") || u[i-len("/issues/"):i] != "/issues/" {
		return 0
	}
	n, err := strconv.Atoi(u[i:])
	if err != nil || n <= 0 || n > workitem.MaxNumber {
		return 0
	}
	return n
}

type ghRepoIssue struct {
	ghIssue
	CreatedAt string  `json:"created_at"`
	UpdatedAt string  `json:"updated_at"`
	ClosedAt  *string `json:"closed_at"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

type ghIssueEvent struct {
	ID        int64    `json:"id"`
	Actor     *ghUser  `json:"actor"`
	Event     string   `json:"event"`
	CreatedAt string   `json:"created_at"`
	Label     *ghLabel `json:"label"`
	Issue     *ghIssue `json:"issue"`
}

func (g *github) listRepoIssueEvents(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	host, owner, repo, err := g.repoArg(args)
	if err != nil {
		return nil, err
	}
	page, ok, err := argInt(args, "page")
	if err != nil {
		return nil, err
	}
	if !ok {
		page = 1
	}
	if page < 1 || page > maxPages {
		return nil, fail(ErrInvalidArgument, "argument \"page\" must be 1 to %d, not %d", maxPages, page)
	}
	path := fmt.Sprintf("repos/%s/%s/issues/events?per_page=100&page=%d", owner, repo, page)
	resp, err := g.send(ctx, st, ghRequest{method: http.MethodGet, path: path, host: host}, true, fmt.Sprintf("the issue events of %s/%s", owner, repo))
	if err != nil {
		return nil, err
	}
	out, err := decodeIssueEvents(resp.body)
	if err != nil {
		return nil, err
	}
	return map[string]any{"events": out, "more": nextLink(resp.header.Values("Link")) != ""}, nil
}

func decodeRepoComments(b []byte) ([]any, error) {
	cs, err := decodeArray[ghRepoComment]("a comment list", b)
	out := make([]any, 0, len(cs))
	for _, c := range cs {
		n := issueNumberOf(c.IssueURL)
		if c.ID <= 0 || n <= 0 {
			continue
		}
		out = append(out, map[string]any{
			"id": int(c.ID), "number": n, "author": c.User.login(), "body": c.Body, "url": c.HTMLURL,
			"createdAt": c.CreatedAt, "updatedAt": c.UpdatedAt,
		})
	}
	return out, err
}

func decodeRepoIssues(b []byte, host, owner, repo string) ([]any, error) {
	iss, err := decodeArray[ghRepoIssue]("an issue list", b)
	out := make([]any, 0, len(iss))
	for _, is := range iss {
		if is.Number <= 0 || is.Number > workitem.MaxNumber {
			continue
		}
		m := issueMap(is.ghIssue)
		m["createdAt"], m["updatedAt"], m["closedAt"] = is.CreatedAt, is.UpdatedAt, deref(is.ClosedAt)
		m["ref"] = workitem.Ref{Provider: "github", Host: host, Owner: owner, Repo: repo, Number: int(is.Number)}.String()
		out = append(out, m)
	}
	return out, err
}

func decodeIssueEvents(b []byte) ([]any, error) {
	evs, err := decodeArray[ghIssueEvent]("an issue event list", b)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(evs))
	for _, e := range evs {
		if e.ID <= 0 || e.Issue == nil || e.Issue.Number <= 0 || e.Issue.Number > workitem.MaxNumber {
			continue
		}
		m := issueMap(*e.Issue)
		m["id"], m["event"], m["actor"], m["createdAt"] = int(e.ID), e.Event, e.Actor.login(), e.CreatedAt
		m["label"] = ""
		if e.Label != nil {
			m["label"] = e.Label.Name
		}
		out = append(out, m)
	}
	return out, nil
}
