package integrations

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/theloop-dev/theloop/workitem"
)

// The decoders below turn GitHub REST answers into the JSON-shaped maps
// operations return. Both transports feed them the same bytes, which is what
// makes their results identical. They never panic on hostile input (see the
// fuzz tests) and drop fields they do not name.

type ghUser struct {
	Login string `json:"login"`
}

func (u *ghUser) login() string {
	if u == nil {
		return ""
	}
	return u.Login
}

type ghLabel struct {
	Name string `json:"name"`
}

type ghComment struct {
	ID        int64   `json:"id"`
	User      *ghUser `json:"user"`
	Body      string  `json:"body"`
	HTMLURL   string  `json:"html_url"`
	CreatedAt string  `json:"created_at"`
	// UpdatedAt moves on every edit; with ID it is the content identity
	// of the comment's current version (ingress.Event.ContentKey).
	UpdatedAt string `json:"updated_at"`
}

type ghReview struct {
	ID          int64   `json:"id"`
	User        *ghUser `json:"user"`
	Body        string  `json:"body"`
	State       string  `json:"state"`
	HTMLURL     string  `json:"html_url"`
	SubmittedAt string  `json:"submitted_at"`
}

type ghReviewComment struct {
	ID           int64   `json:"id"`
	User         *ghUser `json:"user"`
	Body         string  `json:"body"`
	HTMLURL      string  `json:"html_url"`
	Path         string  `json:"path"`
	Line         *int64  `json:"line"`
	OriginalLine *int64  `json:"original_line"`
	CreatedAt    string  `json:"created_at"`
	UpdatedAt    string  `json:"updated_at"`
}

type ghIssue struct {
	Number      int64     `json:"number"`
	Title       string    `json:"title"`
	Body        string    `json:"body"`
	State       string    `json:"state"`
	User        *ghUser   `json:"user"`
	Labels      []ghLabel `json:"labels"`
	HTMLURL     string    `json:"html_url"`
	PullRequest *struct {
		MergedAt *string `json:"merged_at"`
	} `json:"pull_request"`
}

func decodeArray[T any](what string, b []byte) ([]T, error) {
	var out []T
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fail(ErrTransport, "GitHub answered %s with something that is not the expected JSON array: %v", what, jsonProblem(err))
	}
	return out, nil
}

func decodeObject[T any](what string, b []byte) (T, error) {
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return out, fail(ErrTransport, "GitHub answered %s with something that is not the expected JSON object: %v", what, jsonProblem(err))
	}
	return out, nil
}

// jsonProblem describes a decoding error without quoting the input.
func jsonProblem(err error) string {
	switch e := err.(type) {
	case *json.SyntaxError:
		return fmt.Sprintf("syntax error at byte %d", e.Offset)
	case *json.UnmarshalTypeError:
		return fmt.Sprintf("%s where %s was expected", e.Value, e.Type)
	}
	return "malformed JSON"
}

func labelNames(ls []ghLabel) []any {
	out := make([]any, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out
}

func decodeLabelNames(b []byte) ([]string, error) {
	ls, err := decodeArray[ghLabel]("a label list", b)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.Name)
	}
	return out, nil
}

func decodeComments(b []byte) ([]any, error) {
	cs, err := decodeArray[ghComment]("a comment list", b)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(cs))
	for _, c := range cs {
		out = append(out, map[string]any{
			"id": int(c.ID), "author": c.User.login(), "body": c.Body, "url": c.HTMLURL, "createdAt": c.CreatedAt,
			"updatedAt": c.UpdatedAt,
		})
	}
	return out, nil
}

func decodeReviews(b []byte) ([]any, error) {
	rs, err := decodeArray[ghReview]("a review list", b)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(rs))
	for _, r := range rs {
		out = append(out, map[string]any{
			"id": int(r.ID), "author": r.User.login(), "body": r.Body, "state": r.State, "url": r.HTMLURL, "submittedAt": r.SubmittedAt,
		})
	}
	return out, nil
}

func decodeReviewComments(b []byte) ([]any, error) {
	cs, err := decodeArray[ghReviewComment]("a review-comment list", b)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(cs))
	for _, c := range cs {
		line := 0
		if c.Line != nil {
			line = int(*c.Line)
		} else if c.OriginalLine != nil {
			line = int(*c.OriginalLine)
		}
		out = append(out, map[string]any{
			"id": int(c.ID), "author": c.User.login(), "body": c.Body, "url": c.HTMLURL,
			"path": c.Path, "line": line, "createdAt": c.CreatedAt, "updatedAt": c.UpdatedAt,
		})
	}
	return out, nil
}

func issueMap(is ghIssue) map[string]any {
	merged := is.PullRequest != nil && is.PullRequest.MergedAt != nil && *is.PullRequest.MergedAt != ""
	return map[string]any{
		"number": int(is.Number), "title": is.Title, "body": is.Body, "state": is.State,
		"author": is.User.login(), "labels": labelNames(is.Labels), "url": is.HTMLURL,
		"isPullRequest": is.PullRequest != nil, "merged": merged,
	}
}

func decodeIssue(b []byte) (map[string]any, error) {
	is, err := decodeObject[ghIssue]("an issue", b)
	if err != nil {
		return nil, err
	}
	return issueMap(is), nil
}

func decodeItems(b []byte, host, owner, repo string) ([]any, error) {
	iss, err := decodeArray[ghIssue]("an issue list", b)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(iss))
	for _, is := range iss {
		if is.Number <= 0 || is.Number > workitem.MaxNumber {
			continue
		}
		out = append(out, map[string]any{
			"number": int(is.Number), "title": is.Title, "url": is.HTMLURL,
			"isPullRequest": is.PullRequest != nil, "labels": labelNames(is.Labels),
			"ref": workitem.Ref{Provider: "github", Host: host, Owner: owner, Repo: repo, Number: int(is.Number)}.String(),
		})
	}
	return out, nil
}

// oneComment is a single comment, review comment or review as GitHub's
// GET answers it: the fields of the three shapes together.
type oneComment struct {
	ID             int64   `json:"id"`
	User           *ghUser `json:"user"`
	Body           string  `json:"body"`
	HTMLURL        string  `json:"html_url"`
	State          string  `json:"state"`
	CreatedAt      string  `json:"created_at"`
	UpdatedAt      string  `json:"updated_at"`
	SubmittedAt    string  `json:"submitted_at"`
	IssueURL       string  `json:"issue_url"`
	PullRequestURL string  `json:"pull_request_url"`
}

// decodeOneComment turns GitHub's answer for one comment of kind
// (CommentType*) into github.get-comment's map. The ref it reports is
// read from the answer's issue_url (comments) or pull_request_url (review
// comments, reviews) on host; "" when that URL names no valid item.
func decodeOneComment(b []byte, kind, host string) (map[string]any, error) {
	c, err := decodeObject[oneComment]("a comment", b)
	if err != nil {
		return nil, err
	}
	if c.ID <= 0 {
		return nil, fail(ErrTransport, "GitHub answered a comment without a positive id")
	}
	item := c.PullRequestURL
	if kind == CommentTypeIssue {
		item = c.IssueURL
	}
	out := map[string]any{
		"id": int(c.ID), "author": c.User.login(), "body": c.Body, "url": c.HTMLURL, "state": "",
		"createdAt": "", "updatedAt": "", "submittedAt": "", "ref": apiItemRef(item, host),
	}
	if kind == CommentTypeReview {
		out["state"], out["submittedAt"] = c.State, c.SubmittedAt
	} else {
		out["createdAt"], out["updatedAt"] = c.CreatedAt, c.UpdatedAt
	}
	return out, nil
}

// apiItemRef reads an API URL of an issue or pull request
// (…/repos/{owner}/{repo}/issues/{n} or …/pulls/{n}) as a work-item ref on
// host; "" when it is not one.
func apiItemRef(u, host string) string {
	i := strings.LastIndex(u, "/repos/")
	if i < 0 {
		return ""
	}
	parts := strings.Split(u[i+len("/repos/"):], "/")
	if len(parts) != 4 || (parts[2] != "issues" && parts[2] != "pulls") || !workitem.ValidName(parts[0]) || !workitem.ValidName(parts[1]) {
		return ""
	}
	if len(parts[3]) == 0 || len(parts[3]) > 10 || strings.Trim(parts[3], "0123456789") != "" {
		return ""
	}
	n, err := strconv.Atoi(parts[3])
	if err != nil || n <= 0 || n > workitem.MaxNumber {
		return ""
	}
	return workitem.Ref{Provider: "github", Host: host, Owner: parts[0], Repo: parts[1], Number: n}.String()
}

func decodeCreatedComment(b []byte) (map[string]any, error) {
	c, err := decodeObject[ghComment]("the new comment", b)
	if err != nil {
		return nil, err
	}
	return map[string]any{"id": int(c.ID), "url": c.HTMLURL}, nil
}

// closingGraphQL is the answer to closingQuery.
type closingGraphQL struct {
	Data *struct {
		Repository *struct {
			PullRequest *struct {
				Body                    string `json:"body"`
				ClosingIssuesReferences *struct {
					Nodes []struct {
						Number     int64 `json:"number"`
						Repository *struct {
							NameWithOwner string `json:"nameWithOwner"`
						} `json:"repository"`
					} `json:"nodes"`
				} `json:"closingIssuesReferences"`
			} `json:"pullRequest"`
		} `json:"repository"`
	} `json:"data"`
	Errors []struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"errors"`
}

// closingRef is one issue a pull request closes.
type closingRef struct {
	Owner, Repo string
	Number      int
}

// decodeClosing reads the GraphQL answer. supported is false when GraphQL
// reported errors (an older GitHub Enterprise without
// closingIssuesReferences, or a PR GraphQL cannot resolve): the caller then
// falls back to the PR body.
func decodeClosing(b []byte) (refs []closingRef, supported bool, err error) {
	var ans closingGraphQL
	if err := json.Unmarshal(b, &ans); err != nil {
		return nil, false, fail(ErrTransport, "GitHub answered the closing-issues query with malformed JSON: %v", jsonProblem(err))
	}
	if len(ans.Errors) > 0 {
		return nil, false, nil
	}
	if ans.Data == nil || ans.Data.Repository == nil || ans.Data.Repository.PullRequest == nil || ans.Data.Repository.PullRequest.ClosingIssuesReferences == nil {
		return nil, false, nil
	}
	for _, n := range ans.Data.Repository.PullRequest.ClosingIssuesReferences.Nodes {
		if n.Number <= 0 || n.Number > workitem.MaxNumber || n.Repository == nil {
			continue
		}
		owner, repo, ok := strings.Cut(n.Repository.NameWithOwner, "/")
		if !ok || !workitem.ValidName(owner) || !workitem.ValidName(repo) {
			continue
		}
		refs = append(refs, closingRef{Owner: owner, Repo: repo, Number: int(n.Number)})
	}
	return refs, true, nil
}

// githubMessage extracts GitHub's error "message" from an answer, clipped;
// "" when there is none.
func githubMessage(b []byte) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(b, &e) != nil {
		return ""
	}
	return clip(strings.Join(strings.Fields(e.Message), " "), 200)
}
