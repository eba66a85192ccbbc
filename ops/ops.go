// Package ops names the integration operations: the contract between the
// hooks that call them (package hooks, or an embedder's own), the providers
// that answer them (package integrations, or an embedder's graph.Integrations)
// and the test stand-in (graph/graphtest.Tickets). Each name is declared here
// once; the others import it.
//
// Arguments and answers are map[string]any, described per operation below.
// "ref" is a work-item ref, github:[host/]owner/repo#n (package workitem).
// Ids and numbers are int; lists are []any of map[string]any or string;
// timestamps are GitHub's RFC 3339 strings, "" when absent.
package ops

import "github.com/theloop-dev/theloop/graph"

// GitHub operations. Both of integrations' transports implement every one
// and answer each with the same map.
const (
	// {ref, body} → {id, url}. The body is posted verbatim: the caller
	// composes it and adds the self-authored marker. Not retried after a
	// 5xx (GitHub may have posted it).
	GitHubAddComment graph.Operation = "github.add-comment"
	// {ref, labels: [string], replacePrefix?: "loop:"} → {labels: [string]}:
	// removes the labels starting with replacePrefix (case-insensitively)
	// that are not in labels, adds the missing ones, keeps every other
	// label; returns the issue's labels afterwards. Without replacePrefix it
	// only adds.
	GitHubSetLabels graph.Operation = "github.set-labels"
	// {ref} → {labels: [string]}.
	GitHubGetLabels graph.Operation = "github.get-labels"
	// {ref} → {comments: [{id, author, body, url, createdAt, updatedAt}]},
	// every page, oldest first; author is the login ("" for a deleted user);
	// updatedAt is GitHub's updated_at verbatim (it moves on every edit).
	GitHubListComments graph.Operation = "github.list-comments"
	// {ref (a PR)} → {reviews: [{id, author, body, state, url, submittedAt}]},
	// every state (PENDING included; callers filter).
	GitHubListReviews graph.Operation = "github.list-reviews"
	// {ref (a PR)} → {comments: [{id, author, body, url, path, line,
	// createdAt, updatedAt}]}; line is the comment's line, else its original line,
	// else 0.
	GitHubListReviewComments graph.Operation = "github.list-review-comments"
	// {ref} → {number, title, body, state, author, labels, url,
	// isPullRequest, merged}.
	GitHubGetIssue graph.Operation = "github.get-issue"
	// {repo: "owner/repo" or "host/owner/repo", label, state?:
	// open (default)|closed|all} → {items: [{number, title, url,
	// isPullRequest, labels, ref}]}, issues and PRs, newest first.
	GitHubListItemsByLabel graph.Operation = "github.list-items-by-label"
	// {ref, content, commentId?, commentType?: issue-comment (default) |
	// review-comment} → {}. Without commentId the reaction goes on the issue
	// or PR itself. content is one of +1 -1 laugh confused heart hooray
	// rocket eyes.
	GitHubAddReaction graph.Operation = "github.add-reaction"
	// {ref (a PR)} → {issues: [int], refs: [string], source: "graphql" |
	// "body"}: the issues the pull request closes, from GitHub's closing
	// references, else from closing keywords in its body.
	GitHubClosingIssues graph.Operation = "github.closing-issues"
	// {ref, commentId, commentType?: issue-comment (default) | review-comment
	// | review} → {id, author, body, url, state, createdAt, updatedAt,
	// submittedAt, ref}: one comment (or, for review, one review of the pull
	// request ref) read by id, as GitHub holds it now. ref in the answer is
	// the issue or pull request the comment belongs to, from GitHub's own
	// issue_url / pull_request_url ("" when GitHub names none). updatedAt
	// equals createdAt until the comment is edited; a review carries
	// submittedAt and state and neither createdAt nor updatedAt. A comment
	// that does not exist (or not in ref's repository) fails with
	// integrations.ErrNotFound. The daemon re-reads a comment this way before
	// it lets the comment decide a gate (docs/decisions.md §19).
	GitHubGetComment graph.Operation = "github.get-comment"
	// {repo: "owner/repo" or "host/owner/repo", state?: open (default) |
	// closed | all} → {pulls: [{number, title, body, url, state, merged,
	// draft, author, headRef, headSha, createdAt, closedAt, ref}]}: one
	// page, the 100 newest pull requests (one request, so a poller can
	// budget it).
	GitHubListPulls graph.Operation = "github.list-pulls"
	// {repo, since? (RFC 3339)} → {comments: [{id, number, author, body,
	// url, createdAt, updatedAt}], more}: the issue and pull-request
	// comments of the whole repository updated at or after since, oldest
	// update first (GET /repos/{owner}/{repo}/issues/comments?sort=updated
	// &direction=asc&since=…), at most a few pages; more reports that
	// further pages were left for the next call (from the last updatedAt).
	GitHubListRepoComments graph.Operation = "github.list-repo-comments"
	// {repo, since? (RFC 3339)} → {items: [{number, title, body, url, state,
	// author, labels, isPullRequest, createdAt, updatedAt, closedAt, ref}],
	// more}: the repository's issues and pull requests of any state updated
	// at or after since, oldest update first (GET /repos/{owner}/{repo}/
	// issues?state=all&sort=updated&direction=asc&since=…), a few pages at
	// most, more as for GitHubListRepoComments.
	GitHubListRepoIssues graph.Operation = "github.list-repo-issues"
	// {repo, page? (default 1)} → {events: [{id, event, actor, createdAt,
	// label, number, title, body, url, state, author, labels, isPullRequest,
	// merged}], more}: one page (100) of the repository's issue events,
	// newest first (GET /repos/{owner}/{repo}/issues/events): labeled,
	// unlabeled, closed, reopened, merged and the rest, on issues and pull
	// requests alike; label is the label's name ("" for other events); the
	// issue fields are the issue as it is now. more reports a next page.
	GitHubListRepoIssueEvents graph.Operation = "github.list-repo-issue-events"
	// {ref (a PR, naming the repository), sha} → {checkRuns: [{id, name,
	// status, conclusion, url}]}: the check runs of commit sha, the first
	// 100 (one request). status is queued|in_progress|completed;
	// conclusion is "" until completed.
	GitHubListCheckRuns graph.Operation = "github.list-check-runs"
	// {ref (a PR, naming the repository), sha} → {state, statuses:
	// [{context, state, url}]}: the combined commit status of sha (one
	// request); state is success, failure or pending.
	GitHubCombinedStatus graph.Operation = "github.combined-status"
	// {org, team (slug), login} → {state: active | pending | none, role:
	// member | maintainer | ""}: login's membership of the team (GET
	// /orgs/{org}/teams/{team}/memberships/{login}); none when GitHub
	// answers 404 (not a member, or the team is not visible).
	GitHubTeamMembership graph.Operation = "github.team-membership"
	// {repo: "owner/repo" or "host/owner/repo", login} → {permission:
	// admin | maintain | write | triage | read | none}: login's role on the
	// repository (GET /repos/{owner}/{repo}/collaborators/{login}/permission,
	// its role_name); none when GitHub answers 404.
	GitHubCollaboratorPermission graph.Operation = "github.collaborator-permission"
	// {repo, path, ref? (default: the default branch)} → {found, content,
	// sha}: one file's text (GET /repos/{owner}/{repo}/contents/{path});
	// found false when GitHub answers 404. At most 1 MiB.
	GitHubGetFile graph.Operation = "github.get-file"
	// {repo: "owner/repo" or "host/owner/repo"} → {hooks: [{id, url, active,
	// events: [string]}]}: the repository's webhooks, the first 100 (one
	// request). Needs admin:repo_hook (read) or the App's webhooks read.
	GitHubListHooks graph.Operation = "github.list-hooks"
	// {repo | org | app: true, hookId (not for app), cursor?} →
	// {deliveries: [{id, guid, deliveredAt,
	// redelivery, status, statusCode, event, action}], cursor}: one page (100)
	// of a repository's or organization's webhook deliveries, newest first;
	// cursor is the next page's ("" at the end). guid is X-GitHub-Delivery;
	// id names one attempt.
	GitHubListHookDeliveries graph.Operation = "github.list-hook-deliveries"
	// {repo | org | app: true, hookId (not for app), deliveryId} → {}:
	// asks GitHub to redeliver one
	// delivery attempt (id from GitHubListHookDeliveries). Not retried after
	// a 5xx (GitHub may have queued it).
	GitHubRedeliverHookDelivery graph.Operation = "github.redeliver-hook-delivery"
)

// Slack operations.
const (
	// {text, channel?} → {}. integrations' api transport posts to channel,
	// else integrations.slack.channel; its webhook transport posts to its
	// own channel and refuses a different channel argument.
	SlackPostMessage graph.Operation = "slack.post-message"
)

// Jira operations.
const (
	// {issue, body} → {id}.
	JiraAddComment graph.Operation = "jira.add-comment"
	// {issue, transition (id or name)} → {}.
	JiraTransition graph.Operation = "jira.transition"
	// {issue, labels, replacePrefix?} → {labels}: adds labels; with
	// replacePrefix, first removes the issue's other labels carrying that
	// prefix (case-insensitively), keeping every other label — as
	// GitHubSetLabels does.
	JiraSetLabels graph.Operation = "jira.set-labels"
	// {issue} → {comments: [{id, author, body, createdAt}]}, oldest first
	// (the latest 100). author is the account's name, else its accountId.
	JiraListComments graph.Operation = "jira.list-comments"
	// {issue, commentId} → {issue, id, author, body, createdAt, updatedAt}:
	// one comment re-read by id (issue is the key Jira files it under).
	// author is as in JiraListComments; the times are Jira's as sent.
	JiraGetComment graph.Operation = "jira.get-comment"
	// {jql, maxIssues?} → {issues: [{key, updated}]}: the issues a JQL
	// search finds (Jira Cloud's GET /rest/api/2/search/jql, every page up
	// to maxIssues, default 1000).
	JiraSearchIssues graph.Operation = "jira.search-issues"
)
