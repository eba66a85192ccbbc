package integrations

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/theloop-dev/theloop/workitem"
)

// Pull requests and the checks of their head commit, read by the daemon's
// reconcile pass when webhooks were missed (GitHub does not redeliver).
// Each operation is exactly one request — the first page only — so a
// poller can count its calls against a budget.

func (g *github) listPulls(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	host, owner, repo, err := g.repoArg(args)
	if err != nil {
		return nil, err
	}
	state, err := stateArg(args)
	if err != nil {
		return nil, err
	}
	path := fmt.Sprintf("repos/%s/%s/pulls?state=%s&per_page=100", owner, repo, url.QueryEscape(state))
	resp, err := g.send(ctx, st, ghRequest{method: http.MethodGet, path: path, host: host}, true, fmt.Sprintf("the pull requests of %s/%s", owner, repo))
	if err != nil {
		return nil, err
	}
	pulls, err := decodePulls(resp.body, host, owner, repo)
	if err != nil {
		return nil, err
	}
	return map[string]any{"pulls": pulls}, nil
}

// shaArg reads the sha argument: 40 (or 64) hex digits.
func shaArg(args map[string]any) (string, error) {
	sha, err := argString(args, "sha", true)
	if err != nil {
		return "", err
	}
	if len(sha) != 40 && len(sha) != 64 {
		return "", fail(ErrInvalidArgument, "argument \"sha\": %q is not a commit sha (40 hex digits)", clip(sha, 70))
	}
	for _, c := range sha {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return "", fail(ErrInvalidArgument, "argument \"sha\": %q is not a commit sha (40 hex digits)", clip(sha, 70))
		}
	}
	return sha, nil
}

func (g *github) listCheckRuns(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	body, err := g.getCommit(ctx, st, args, "check-runs", "the check runs")
	if err != nil {
		return nil, err
	}
	runs, err := decodeCheckRuns(body)
	if err != nil {
		return nil, err
	}
	return map[string]any{"checkRuns": runs}, nil
}

func (g *github) combinedStatus(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	body, err := g.getCommit(ctx, st, args, "status", "the combined status")
	if err != nil {
		return nil, err
	}
	return decodeCombinedStatus(body)
}

// getCommit reads one page of a commit's sub-resource (check-runs, status)
// named by the ref and sha arguments; what names it in errors.
func (g *github) getCommit(ctx context.Context, st *callState, args map[string]any, sub, what string) ([]byte, error) {
	r, err := g.ref(args)
	if err != nil {
		return nil, err
	}
	sha, err := shaArg(args)
	if err != nil {
		return nil, err
	}
	path := fmt.Sprintf("repos/%s/%s/commits/%s/%s?per_page=100", r.Owner, r.Repo, sha, sub)
	resp, err := g.send(ctx, st, ghRequest{method: http.MethodGet, path: path, host: r.Host}, true, what+" of "+sha[:12]+" in "+r.Owner+"/"+r.Repo)
	if err != nil {
		return nil, err
	}
	return resp.body, nil
}

type ghPull struct {
	Number  int64   `json:"number"`
	Title   string  `json:"title"`
	Body    *string `json:"body"`
	HTMLURL string  `json:"html_url"`
	State   string  `json:"state"`
	Merged  bool    `json:"merged"`
	// MergedAt is set on merged PRs in list answers (which omit merged).
	MergedAt *string `json:"merged_at"`
	Draft    bool    `json:"draft"`
	User     *ghUser `json:"user"`
	// CreatedAt and ClosedAt are GitHub's, verbatim ("" / null when
	// absent): the poller's repository pass finds a pull request opened
	// while no webhook came by its creation time.
	CreatedAt string  `json:"created_at"`
	ClosedAt  *string `json:"closed_at"`
	Head      struct {
		Ref string `json:"ref"`
		SHA string `json:"sha"`
	} `json:"head"`
}

func decodePulls(b []byte, host, owner, repo string) ([]any, error) {
	ps, err := decodeArray[ghPull]("a pull request list", b)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(ps))
	for _, p := range ps {
		if p.Number <= 0 || p.Number > workitem.MaxNumber {
			continue
		}
		body := ""
		if p.Body != nil {
			body = *p.Body
		}
		out = append(out, map[string]any{
			"number": int(p.Number), "title": p.Title, "body": body, "url": p.HTMLURL, "state": p.State,
			"merged": p.Merged || p.MergedAt != nil, "draft": p.Draft, "author": p.User.login(),
			"headRef": p.Head.Ref, "headSha": p.Head.SHA, "createdAt": p.CreatedAt, "closedAt": deref(p.ClosedAt),
			"ref": workitem.Ref{Provider: "github", Host: host, Owner: owner, Repo: repo, Number: int(p.Number)}.String(),
		})
	}
	return out, nil
}

func decodeCheckRuns(b []byte) ([]any, error) {
	type run struct {
		ID         int64   `json:"id"`
		Name       string  `json:"name"`
		Status     string  `json:"status"`
		Conclusion *string `json:"conclusion"`
		HTMLURL    string  `json:"html_url"`
	}
	page, err := decodeObject[struct {
		CheckRuns []run `json:"check_runs"`
	}]("a check-run list", b)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(page.CheckRuns))
	for _, r := range page.CheckRuns {
		c := ""
		if r.Conclusion != nil {
			c = *r.Conclusion
		}
		out = append(out, map[string]any{"id": int(r.ID), "name": r.Name, "status": r.Status, "conclusion": c, "url": r.HTMLURL})
	}
	return out, nil
}

func decodeCombinedStatus(b []byte) (map[string]any, error) {
	type status struct {
		Context   string  `json:"context"`
		State     string  `json:"state"`
		TargetURL *string `json:"target_url"`
	}
	cs, err := decodeObject[struct {
		State    string   `json:"state"`
		Statuses []status `json:"statuses"`
	}]("a combined status", b)
	if err != nil {
		return nil, err
	}
	list := make([]any, 0, len(cs.Statuses))
	for _, s := range cs.Statuses {
		u := ""
		if s.TargetURL != nil {
			u = *s.TargetURL
		}
		list = append(list, map[string]any{"context": s.Context, "state": s.State, "url": u})
	}
	return map[string]any{"state": cs.State, "statuses": list}, nil
}
