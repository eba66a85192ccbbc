package integrations

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// githubOperations are the GitHub operations (package ops documents each
// one's arguments and answer). Both transports implement every one and answer
// each with the same map; a malformed ref fails every operation with
// ErrInvalidRef.
var githubOperations = []graph.Operation{
	ops.GitHubAddComment, ops.GitHubSetLabels, ops.GitHubGetLabels, ops.GitHubListComments,
	ops.GitHubListReviews, ops.GitHubListReviewComments, ops.GitHubGetIssue,
	ops.GitHubListItemsByLabel, ops.GitHubAddReaction, ops.GitHubClosingIssues, ops.GitHubGetComment,
	ops.GitHubListPulls, ops.GitHubListCheckRuns, ops.GitHubCombinedStatus,
	ops.GitHubTeamMembership, ops.GitHubCollaboratorPermission, ops.GitHubGetFile,
	ops.GitHubListHooks, ops.GitHubListHookDeliveries, ops.GitHubRedeliverHookDelivery,
	ops.GitHubListRepoComments, ops.GitHubListRepoIssues, ops.GitHubListRepoIssueEvents,
}

// maxPages bounds pagination (100 items a page).
const maxPages = 50

// reactionContents are the reactions GitHub accepts.
var reactionContents = map[string]bool{
	"+1": true, "-1": true, "laugh": true, "confused": true, "heart": true, "hooray": true, "rocket": true, "eyes": true,
}

// ghRequest is one GitHub exchange, independent of the transport that makes it.
type ghRequest struct {
	method string
	// path is relative to the REST root, query included
	// ("repos/o/r/issues/1/labels?per_page=100"), or "graphql".
	path string
	// body is JSON; nil for none.
	body []byte
	// host is the ref's host; "" = the transport's default host.
	host string
	// repo is the owner/repo the request is about when its path does not
	// say (graphql): a GitHub App finds its installation by it.
	repo string
}

// githubTransport makes single GitHub exchanges. Retries, pagination,
// label arithmetic and decoding live above it in github, shared by every
// transport — which is why both answer identically.
type githubTransport interface {
	name() string
	// do makes one request. It returns an error only when it obtained no
	// HTTP answer at all.
	do(ctx context.Context, req ghRequest) (response, error)
	// nextPath turns a Link rel="next" URL into a request path, refusing a
	// URL outside the API root it was obtained from.
	nextPath(link string) (string, error)
	// checkHost refuses a ref host the transport cannot serve.
	checkHost(host string) error
	// webHost is the browser host of issues on host ("" = default).
	webHost(host string) string
	// authHint says how to fix rejected credentials.
	authHint() string
}

type github struct {
	t      githubTransport
	policy *retryPolicy
}

func (g *github) operations() map[graph.Operation]opFunc {
	return map[graph.Operation]opFunc{
		ops.GitHubAddComment:         g.addComment,
		ops.GitHubSetLabels:          g.setLabels,
		ops.GitHubGetLabels:          g.getLabels,
		ops.GitHubListComments:       g.listComments,
		ops.GitHubListReviews:        g.listReviews,
		ops.GitHubListReviewComments: g.listReviewComments,
		ops.GitHubGetIssue:           g.getIssue,
		ops.GitHubListItemsByLabel:   g.listItemsByLabel,
		ops.GitHubAddReaction:        g.addReaction,
		ops.GitHubClosingIssues:      g.closingIssues,
		ops.GitHubGetComment:         g.getComment,
		ops.GitHubListPulls:          g.listPulls,
		ops.GitHubListCheckRuns:      g.listCheckRuns,
		ops.GitHubCombinedStatus:     g.combinedStatus,

		ops.GitHubTeamMembership:         g.teamMembership,
		ops.GitHubCollaboratorPermission: g.collaboratorPermission,
		ops.GitHubGetFile:                g.getFile,
		// github_hookdeliveries.go
		ops.GitHubListHooks:             g.listHooks,
		ops.GitHubListHookDeliveries:    g.listHookDeliveries,
		ops.GitHubRedeliverHookDelivery: g.redeliverHookDelivery,
		// github_repoactivity.go
		ops.GitHubListRepoComments:    g.listRepoComments,
		ops.GitHubListRepoIssues:      g.listRepoIssues,
		ops.GitHubListRepoIssueEvents: g.listRepoIssueEvents,
	}
}

// ref parses and checks the "ref" argument.
func (g *github) ref(args map[string]any) (workitem.Ref, error) {
	s, err := argString(args, "ref", true)
	if err != nil {
		return workitem.Ref{}, err
	}
	r, err := workitem.Parse(s)
	if err != nil {
		return workitem.Ref{}, fail(ErrInvalidRef, "%v", err)
	}
	if r.Provider != "github" {
		return workitem.Ref{}, fail(ErrInvalidRef, "ref %q names provider %q; github operations need a github: ref", clip(s, 80), r.Provider)
	}
	if err := g.t.checkHost(r.Host); err != nil {
		return workitem.Ref{}, err
	}
	return r, nil
}

func issuePath(r workitem.Ref, rest string) string {
	return fmt.Sprintf("repos/%s/%s/issues/%d%s", r.Owner, r.Repo, r.Number, rest)
}

func pullPath(r workitem.Ref, rest string) string {
	return fmt.Sprintf("repos/%s/%s/pulls/%d%s", r.Owner, r.Repo, r.Number, rest)
}

// exchange makes req with retries and returns the answer, whatever its status.
func (g *github) exchange(ctx context.Context, st *callState, req ghRequest, idempotent bool) (response, error) {
	return g.policy.do(ctx, st, idempotent, func(ctx context.Context) (response, error) { return g.t.do(ctx, req) })
}

// send makes req and insists on a 2xx answer.
func (g *github) send(ctx context.Context, st *callState, req ghRequest, idempotent bool, what string) (response, error) {
	resp, err := g.exchange(ctx, st, req, idempotent)
	if err != nil {
		return resp, err
	}
	if resp.status/100 != 2 {
		return resp, g.statusFailure(resp, what)
	}
	return resp, nil
}

// statusFailure describes a non-2xx answer that is neither a rate limit
// nor a retried 5xx.
func (g *github) statusFailure(resp response, what string) *failure {
	detail := fmt.Sprintf("HTTP %d", resp.status)
	if m := githubMessage(resp.body); m != "" {
		detail += ": " + m
	}
	f := &failure{status: resp.status}
	switch resp.status {
	case http.StatusUnauthorized:
		f.kinds = []error{ErrUnauthorized}
		f.msg = fmt.Sprintf("GitHub rejected the credentials (%s) — %s", detail, g.t.authHint())
	case http.StatusForbidden:
		f.kinds = []error{ErrForbidden}
		f.msg = fmt.Sprintf("GitHub refused %s (%s) — the credentials lack permission on this repository", what, detail)
	case http.StatusNotFound, http.StatusGone:
		f.kinds = []error{ErrNotFound}
		f.msg = fmt.Sprintf("%s does not exist or is not visible to these credentials (%s) — check the ref and the credentials' access", what, detail)
	default:
		f.kinds = []error{ErrRejected}
		f.msg = fmt.Sprintf("GitHub rejected %s (%s)", what, detail)
	}
	return f
}

// list reads every page of a list endpoint, handing each page to each.
func (g *github) list(ctx context.Context, st *callState, host, path, what string, each func([]byte) error) error {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	p := path + sep + "per_page=100"
	for page := 1; ; page++ {
		resp, err := g.send(ctx, st, ghRequest{method: http.MethodGet, path: p, host: host}, true, what)
		if err != nil {
			return err
		}
		if err := each(resp.body); err != nil {
			return err
		}
		next := nextLink(resp.header.Values("Link"))
		if next == "" {
			return nil
		}
		if page >= maxPages {
			return fail(ErrRejected, "%s has more than %d pages; refusing to read further", what, maxPages)
		}
		if p, err = g.t.nextPath(next); err != nil {
			return err
		}
	}
}

func (g *github) labels(ctx context.Context, st *callState, r workitem.Ref) ([]string, error) {
	var out []string
	err := g.list(ctx, st, r.Host, issuePath(r, "/labels"), "the labels of "+r.String(), func(b []byte) error {
		ls, err := decodeLabelNames(b)
		out = append(out, ls...)
		return err
	})
	return out, err
}

func (g *github) addComment(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	r, err := g.ref(args)
	if err != nil {
		return nil, err
	}
	body, err := argString(args, "body", true)
	if err != nil {
		return nil, err
	}
	payload, _ := json.Marshal(map[string]string{"body": body})
	resp, err := g.send(ctx, st, ghRequest{method: http.MethodPost, path: issuePath(r, "/comments"), body: payload, host: r.Host}, false, "a comment on "+r.String())
	if err != nil {
		return nil, err
	}
	return decodeCreatedComment(resp.body)
}

func (g *github) getLabels(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	r, err := g.ref(args)
	if err != nil {
		return nil, err
	}
	ls, err := g.labels(ctx, st, r)
	if err != nil {
		return nil, err
	}
	return map[string]any{"labels": toAnyStrings(ls)}, nil
}

// setLabels removes the issue's labels that start with replacePrefix
// (case-insensitively) and are not wanted, adds the wanted ones it lacks,
// and leaves every other label alone (docs/decisions.md §8). It changes
// labels one by one rather than replacing the set, so a label someone adds
// meanwhile survives. The result is GitHub's label list after the last
// change.
func (g *github) setLabels(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	r, err := g.ref(args)
	if err != nil {
		return nil, err
	}
	want, err := argStrings(args, "labels")
	if err != nil {
		return nil, err
	}
	for _, l := range want {
		if err := checkLabel("labels", l); err != nil {
			return nil, err
		}
	}
	prefix, err := argString(args, "replacePrefix", false)
	if err != nil {
		return nil, err
	}
	current, err := g.labels(ctx, st, r)
	if err != nil {
		return nil, err
	}
	var remove, add []string
	for _, l := range current {
		if prefix != "" && hasPrefixFold(l, prefix) && !containsFold(want, l) {
			remove = append(remove, l)
		}
	}
	for _, l := range want {
		if !containsFold(current, l) && !containsFold(add, l) {
			add = append(add, l)
		}
	}
	final := current
	for _, l := range remove {
		what := fmt.Sprintf("removing label %q from %s", l, r.String())
		resp, err := g.exchange(ctx, st, ghRequest{method: http.MethodDelete, path: issuePath(r, "/labels/"+url.PathEscape(l)), host: r.Host}, true)
		if err != nil {
			return nil, err
		}
		switch {
		case resp.status/100 == 2:
			if final, err = decodeLabelNames(resp.body); err != nil {
				return nil, err
			}
		case resp.status == http.StatusNotFound:
			// Already gone (removed meanwhile): the goal is met.
			final = without(final, l)
		default:
			return nil, g.statusFailure(resp, what)
		}
	}
	if len(add) > 0 {
		payload, _ := json.Marshal(map[string][]string{"labels": add})
		resp, err := g.send(ctx, st, ghRequest{method: http.MethodPost, path: issuePath(r, "/labels"), body: payload, host: r.Host}, true, "adding labels to "+r.String())
		if err != nil {
			return nil, err
		}
		if final, err = decodeLabelNames(resp.body); err != nil {
			return nil, err
		}
	}
	return map[string]any{"labels": toAnyStrings(final)}, nil
}

func without(list []string, s string) []string {
	out := make([]string, 0, len(list))
	for _, e := range list {
		if !strings.EqualFold(e, s) {
			out = append(out, e)
		}
	}
	return out
}

func (g *github) listComments(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	r, err := g.ref(args)
	if err != nil {
		return nil, err
	}
	all := []any{}
	err = g.list(ctx, st, r.Host, issuePath(r, "/comments"), "the comments of "+r.String(), func(b []byte) error {
		cs, err := decodeComments(b)
		all = append(all, cs...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"comments": all}, nil
}

func (g *github) listReviews(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	r, err := g.ref(args)
	if err != nil {
		return nil, err
	}
	all := []any{}
	err = g.list(ctx, st, r.Host, pullPath(r, "/reviews"), "the reviews of "+r.String(), func(b []byte) error {
		rs, err := decodeReviews(b)
		all = append(all, rs...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"reviews": all}, nil
}

func (g *github) listReviewComments(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	r, err := g.ref(args)
	if err != nil {
		return nil, err
	}
	all := []any{}
	err = g.list(ctx, st, r.Host, pullPath(r, "/comments"), "the review comments of "+r.String(), func(b []byte) error {
		cs, err := decodeReviewComments(b)
		all = append(all, cs...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"comments": all}, nil
}

func (g *github) getIssue(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	r, err := g.ref(args)
	if err != nil {
		return nil, err
	}
	resp, err := g.send(ctx, st, ghRequest{method: http.MethodGet, path: issuePath(r, ""), host: r.Host}, true, r.String())
	if err != nil {
		return nil, err
	}
	return decodeIssue(resp.body)
}

// stateArg reads the optional state argument of a listing: open (the
// default), closed or all.
func stateArg(args map[string]any) (string, error) {
	state, err := argString(args, "state", false)
	if err != nil {
		return "", err
	}
	switch state {
	case "":
		return "open", nil
	case "open", "closed", "all":
		return state, nil
	}
	return "", fail(ErrInvalidArgument, "argument \"state\" must be open, closed or all, not %q", clip(state, 20))
}

// repoArg reads the repo argument ([host/]owner/repo) and checks its host
// against the transport's.
func (g *github) repoArg(args map[string]any) (host, owner, repo string, err error) {
	s, err := argString(args, "repo", true)
	if err != nil {
		return "", "", "", err
	}
	host, owner, repo, err = workitem.ParseRepo(s)
	if err != nil {
		return "", "", "", fail(ErrInvalidArgument, "%v", err)
	}
	if err := g.t.checkHost(host); err != nil {
		return "", "", "", err
	}
	return host, owner, repo, nil
}

func (g *github) listItemsByLabel(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	host, owner, repo, err := g.repoArg(args)
	if err != nil {
		return nil, err
	}
	label, err := argString(args, "label", true)
	if err != nil {
		return nil, err
	}
	if err := checkLabel("label", label); err != nil {
		return nil, err
	}
	if strings.Contains(label, ",") {
		return nil, fail(ErrInvalidArgument, "argument \"label\": %q contains a comma, which GitHub's label filter reads as a list", clip(label, 60))
	}
	state, err := stateArg(args)
	if err != nil {
		return nil, err
	}
	path := fmt.Sprintf("repos/%s/%s/issues?labels=%s&state=%s", owner, repo, url.QueryEscape(label), state)
	all := []any{}
	err = g.list(ctx, st, host, path, fmt.Sprintf("the items of %s/%s labelled %q", owner, repo, label), func(b []byte) error {
		items, err := decodeItems(b, host, owner, repo)
		all = append(all, items...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{"items": all}, nil
}

// addReaction reacts to a comment, or to the issue or PR itself when no
// commentId is given. commentType "review-comment" targets an inline review
// comment; the default is a conversation comment.
func (g *github) addReaction(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	r, err := g.ref(args)
	if err != nil {
		return nil, err
	}
	content, err := argString(args, "content", true)
	if err != nil {
		return nil, err
	}
	if !reactionContents[content] {
		return nil, fail(ErrInvalidArgument, "argument \"content\": %q is not one of +1 -1 laugh confused heart hooray rocket eyes", clip(content, 20))
	}
	id, hasID, err := argInt(args, "commentId")
	if err != nil {
		return nil, err
	}
	kind, err := argString(args, "commentType", false)
	if err != nil {
		return nil, err
	}
	var path, what string
	switch {
	case !hasID:
		path, what = issuePath(r, "/reactions"), "a reaction on "+r.String()
	case kind == "" || kind == "issue-comment":
		path, what = fmt.Sprintf("repos/%s/%s/issues/comments/%d/reactions", r.Owner, r.Repo, id), fmt.Sprintf("a reaction on comment %d of %s", id, r.String())
	case kind == "review-comment":
		path, what = fmt.Sprintf("repos/%s/%s/pulls/comments/%d/reactions", r.Owner, r.Repo, id), fmt.Sprintf("a reaction on review comment %d of %s", id, r.String())
	default:
		return nil, fail(ErrInvalidArgument, "argument \"commentType\" must be issue-comment or review-comment, not %q", clip(kind, 30))
	}
	payload, _ := json.Marshal(map[string]string{"content": content})
	// Reacting twice leaves one reaction: safe to retry.
	if _, err := g.send(ctx, st, ghRequest{method: http.MethodPost, path: path, body: payload, host: r.Host}, true, what); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}

// Kinds of comment github.get-comment reads (its commentType argument).
const (
	CommentTypeIssue  = "issue-comment"
	CommentTypeReview = "review"
	// CommentTypeReviewComment is an inline comment on a pull request's diff.
	CommentTypeReviewComment = "review-comment"
)

// getComment reads one comment, review comment or review by id, as GitHub
// holds it now. It is how the daemon re-reads a comment at its source
// before the comment may decide a gate, so what it answers comes from
// GitHub's own fields only (the issue or pull request it belongs to is
// read from issue_url / pull_request_url, never from the arguments).
func (g *github) getComment(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	r, err := g.ref(args)
	if err != nil {
		return nil, err
	}
	id, hasID, err := argInt(args, "commentId")
	if err != nil {
		return nil, err
	}
	if !hasID || id <= 0 {
		return nil, fail(ErrInvalidArgument, "argument \"commentId\" is required: the positive id of the comment to read")
	}
	kind, err := argString(args, "commentType", false)
	if err != nil {
		return nil, err
	}
	var path, what string
	switch kind {
	case "", CommentTypeIssue:
		kind = CommentTypeIssue
		path, what = fmt.Sprintf("repos/%s/%s/issues/comments/%d", r.Owner, r.Repo, id), fmt.Sprintf("comment %d of %s/%s", id, r.Owner, r.Repo)
	case CommentTypeReviewComment:
		path, what = fmt.Sprintf("repos/%s/%s/pulls/comments/%d", r.Owner, r.Repo, id), fmt.Sprintf("review comment %d of %s/%s", id, r.Owner, r.Repo)
	case CommentTypeReview:
		path, what = pullPath(r, fmt.Sprintf("/reviews/%d", id)), fmt.Sprintf("review %d of %s", id, r.String())
	default:
		return nil, fail(ErrInvalidArgument, "argument \"commentType\" must be issue-comment, review-comment or review, not %q", clip(kind, 30))
	}
	resp, err := g.send(ctx, st, ghRequest{method: http.MethodGet, path: path, host: r.Host}, true, what)
	if err != nil {
		return nil, err
	}
	return decodeOneComment(resp.body, kind, r.Host)
}

const closingQuery = `query($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) {
    pullRequest(number: $number) {
      closingIssuesReferences(first: 100) { nodes { number repository { nameWithOwner } } }
    }
  }
}`

// closingIssues lists the issues a pull request closes. It asks GraphQL's
// closingIssuesReferences (which also knows issues linked by hand in the
// sidebar); when GraphQL reports errors — a GitHub Enterprise too old for
// the field — it falls back to the closing keywords in the PR body. The
// result says which in "source" ("graphql" or "body"). "issues" holds the
// numbers of closed issues in the PR's own repository; "refs" holds every
// closed issue as a ref, other repositories included.
func (g *github) closingIssues(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	r, err := g.ref(args)
	if err != nil {
		return nil, err
	}
	q, _ := json.Marshal(map[string]any{
		"query":     closingQuery,
		"variables": map[string]any{"owner": r.Owner, "name": r.Repo, "number": r.Number},
	})
	resp, err := g.send(ctx, st, ghRequest{method: http.MethodPost, path: "graphql", body: q, host: r.Host, repo: r.Owner + "/" + r.Repo}, true, "the closing-issues query for "+r.String())
	if err != nil {
		return nil, err
	}
	refs, ok, err := decodeClosing(resp.body)
	if err != nil {
		return nil, err
	}
	source := "graphql"
	if !ok {
		source = "body"
		resp, err := g.send(ctx, st, ghRequest{method: http.MethodGet, path: pullPath(r, ""), host: r.Host}, true, "pull request "+r.String())
		if err != nil {
			return nil, err
		}
		pr, err := decodeObject[ghIssue]("a pull request", resp.body)
		if err != nil {
			return nil, err
		}
		refs = parseClosingKeywords(pr.Body, r.Owner, r.Repo, g.t.webHost(r.Host))
	}
	issues, all := []any{}, []any{}
	for _, c := range refs {
		if strings.EqualFold(c.Owner, r.Owner) && strings.EqualFold(c.Repo, r.Repo) {
			issues = append(issues, c.Number)
		}
		all = append(all, workitem.Ref{Provider: "github", Host: r.Host, Owner: c.Owner, Repo: c.Repo, Number: c.Number}.String())
	}
	return map[string]any{"issues": issues, "refs": all, "source": source}, nil
}

// nextLink returns the rel="next" URL of RFC 8288 Link header values, or "".
// URLs may contain commas (GitHub's labels filter), so the parser walks
// <...> targets rather than splitting on commas.
func nextLink(values []string) string {
	for _, v := range values {
		for len(v) > 0 {
			open := strings.IndexByte(v, '<')
			if open < 0 {
				break
			}
			end := strings.IndexByte(v[open:], '>')
			if end < 0 {
				break
			}
			target := v[open+1 : open+end]
			rest := v[open+end+1:]
			params := rest
			if nxt := strings.IndexByte(rest, '<'); nxt >= 0 {
				params = rest[:nxt]
			}
			// The separator before the next link belongs to neither.
			params = strings.TrimRight(params, ", \t")
			for _, p := range strings.Split(params, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(p), "=")
				if !ok || !strings.EqualFold(strings.TrimSpace(k), "rel") {
					continue
				}
				for _, rel := range strings.Fields(strings.Trim(strings.TrimSpace(val), `"`)) {
					if strings.EqualFold(rel, "next") {
						return target
					}
				}
			}
			v = rest
		}
	}
	return ""
}

// relativeAPIPath turns an absolute next-page URL into a request path under
// root (the API root's path, "" or "/api/v3"), keeping the query.
func relativeAPIPath(u *url.URL, root string) (string, error) {
	p := u.EscapedPath()
	root = strings.TrimRight(root, "/")
	if root != "" {
		if p != root && !strings.HasPrefix(p, root+"/") {
			return "", fail(ErrTransport, "GitHub's next-page link leaves the API root %s; refusing to follow it", root)
		}
		p = p[len(root):]
	}
	p = strings.TrimLeft(p, "/")
	if p == "" || strings.HasPrefix(p, "-") {
		return "", fail(ErrTransport, "GitHub's next-page link has no usable path; refusing to follow it")
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p, nil
}
