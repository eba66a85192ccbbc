package integrations

// The reads loopd's Jira ingress needs: one comment by id (a comment about
// to decide a gate is re-read at Jira first, docs/decisions.md §19) and a
// JQL search (the poll that finds what the webhook missed).

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// jiraCommentJSON is a comment as REST API version 2 returns it: author is
// a Data Center user (name) or a Cloud account (accountId); body is text.
type jiraCommentJSON struct {
	ID     json.RawMessage `json:"id"`
	Body   any             `json:"body"`
	Author struct {
		Name      string `json:"name"`
		AccountID string `json:"accountId"`
	} `json:"author"`
	Created string `json:"created"`
	Updated string `json:"updated"`
}

// JiraAuthor is the identity theloop gives a Jira user: the account's
// name (Data Center), else its accountId (Cloud). The ingress prefixes it
// with "jira:" so it can never be taken for a GitHub login.
func JiraAuthor(name, accountID string) string {
	if name != "" {
		return name
	}
	return accountID
}

// getComment re-reads one comment of an issue by id.
func (j *jira) getComment(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	key, err := jiraKey(args)
	if err != nil {
		return nil, err
	}
	id, err := argString(args, "commentId", true)
	if err != nil {
		return nil, err
	}
	id = strings.TrimSpace(id)
	if n, err := strconv.ParseUint(id, 10, 63); err != nil || n == 0 {
		return nil, fail(ErrInvalidArgument, "argument \"commentId\": %q is not a Jira comment id (digits)", clip(id, 40))
	}
	path := "/rest/api/2/issue/" + url.PathEscape(key) + "/comment/" + id
	resp, err := j.exchange(ctx, st, http.MethodGet, path, nil, true, "comment "+id+" of "+key)
	if err != nil {
		return nil, err
	}
	var c jiraCommentJSON
	if err := json.Unmarshal(resp.body, &c); err != nil {
		return nil, fail(ErrTransport, "Jira answered comment %s of %s with malformed JSON: %v", id, key, jsonProblem(err))
	}
	out := c.fields()
	out["issue"] = key
	return out, nil
}

// fields are a comment's id, author, body and times as the operations
// answer them.
func (c jiraCommentJSON) fields() map[string]any {
	id, _ := decodeJiraComment([]byte(`{"id":` + string(orNull(c.ID)) + `}`))
	body, _ := c.Body.(string) // a v3 document body is not text this loop reads
	return map[string]any{"id": id, "author": JiraAuthor(c.Author.Name, c.Author.AccountID), "body": body,
		"createdAt": c.Created, "updatedAt": c.Updated}
}

// defaultMaxIssues bounds a search's pages.
const defaultMaxIssues = 1000

// searchIssues runs a JQL search over Jira Cloud's enhanced search
// (GET /rest/api/2/search/jql, paged by nextPageToken), asking for the
// updated field only.
func (j *jira) searchIssues(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	jql, err := argString(args, "jql", true)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(jql) == "" || len(jql) > 4000 {
		return nil, fail(ErrInvalidArgument, "argument \"jql\": give a JQL query of at most 4000 bytes")
	}
	limit := defaultMaxIssues
	if n, ok, err := argInt(args, "maxIssues"); err != nil {
		return nil, err
	} else if ok && n > 0 {
		limit = n
	}
	out := []any{}
	token := ""
	for len(out) < limit {
		q := url.Values{"jql": {jql}, "fields": {"updated"}, "maxResults": {strconv.Itoa(min(100, limit-len(out)))}}
		if token != "" {
			q.Set("nextPageToken", token)
		}
		resp, err := j.exchange(ctx, st, http.MethodGet, "/rest/api/2/search/jql?"+q.Encode(), nil, true, "the JQL search")
		if err != nil {
			return nil, err
		}
		var page struct {
			Issues []struct {
				Key    string `json:"key"`
				Fields struct {
					Updated string `json:"updated"`
				} `json:"fields"`
			} `json:"issues"`
			NextPageToken string `json:"nextPageToken"`
			IsLast        *bool  `json:"isLast"`
		}
		if err := json.Unmarshal(resp.body, &page); err != nil {
			return nil, fail(ErrTransport, "Jira answered the JQL search with malformed JSON: %v", jsonProblem(err))
		}
		for _, is := range page.Issues {
			out = append(out, map[string]any{"key": clip(is.Key, 120), "updated": clip(is.Fields.Updated, 40)})
		}
		if page.NextPageToken == "" || page.NextPageToken == token || (page.IsLast != nil && *page.IsLast) || len(page.Issues) == 0 {
			break
		}
		token = page.NextPageToken
	}
	return map[string]any{"issues": out}, nil
}
