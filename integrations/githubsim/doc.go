// Package githubsim is a stateful, in-process stand-in for GitHub: a real
// net/http server on the loopback interface that serves the REST subset
// theloop's GitHub api transport calls, and that sends signed webhooks the
// way GitHub does whenever something changes.
//
// It exists for two users: `loopd demo`, which runs the real daemon against
// it so nobody's repository or account is touched, and end-to-end tests of
// the daemon and the ingress, which drive it as a human would and assert on
// what theloop asked of it.
//
// What it serves (paths under the REST root, URL()):
//
//	GET    /repos/{o}/{r}                              the repository
//	GET    /user                                       the token's user (Config.BotLogin)
//	GET    /repos/{o}/{r}/issues?labels=&state=        issues and PRs, newest first, paginated
//	GET    /repos/{o}/{r}/issues/{n}                   one issue or PR
//	PATCH  /repos/{o}/{r}/issues/{n}                   title, body, state (closing, reopening)
//	GET    /repos/{o}/{r}/pulls/{n}                    one PR (404 for an issue)
//	GET    /repos/{o}/{r}/issues/{n}/labels            paginated
//	POST   /repos/{o}/{r}/issues/{n}/labels            add labels
//	DELETE /repos/{o}/{r}/issues/{n}/labels/{name}     remove one label (404 when absent)
//	GET    /repos/{o}/{r}/issues/{n}/comments          paginated, oldest first
//	POST   /repos/{o}/{r}/issues/{n}/comments          comment as the token's user
//	GET    /repos/{o}/{r}/issues/comments/{id}         one comment
//	PATCH  /repos/{o}/{r}/issues/comments/{id}         edit a comment
//	GET    /repos/{o}/{r}/pulls/{n}/reviews            paginated
//	GET    /repos/{o}/{r}/pulls/{n}/reviews/{id}       one review of that PR
//	GET    /repos/{o}/{r}/pulls/{n}/comments           review comments, paginated
//	GET    /repos/{o}/{r}/pulls/comments/{id}          one review comment
//	POST   /repos/{o}/{r}/issues/{n}/reactions         react to the issue or PR
//	POST   /repos/{o}/{r}/issues/comments/{id}/reactions
//	POST   /repos/{o}/{r}/pulls/comments/{id}/reactions
//	GET    /repos/{o}/{r}/pulls?state=                 pull requests, newest first, paginated
//	GET    /repos/{o}/{r}/commits/{sha}/check-runs     the check runs of a commit
//	GET    /repos/{o}/{r}/commits/{sha}/status         its combined status
//	POST   /graphql                                    closingIssuesReferences only
//
// Lists paginate with GitHub's Link header (per_page, default 30, at most
// 100). Errors are GitHub-shaped JSON ({"message", "documentation_url"}) with
// GitHub's status codes: 401 without the configured token, 404 for what does
// not exist, 400 for malformed JSON, 422 for invalid fields. No request
// panics the server (see FuzzServeHTTP); bodies are bounded.
//
// What it sends (to Config.Hooks, and to hooks added later with AddHook):
// for every change — made through the REST API by theloop or
// through the Go API by a test playing a human (OpenIssue, Comment,
// EditComment, AddLabel, RemoveLabel, CloseIssue, ReopenIssue,
// OpenPullRequest(With), AddReview, AddReviewComment, MergePullRequest,
// SetCheckRun and SetStatus, which may also be told to send nothing: CI whose
// webhook was lost) —
// one webhook
// per configured hook, with the headers GitHub sends (X-GitHub-Event,
// X-GitHub-Delivery as a random UUID, X-GitHub-Hook-ID,
// X-Hub-Signature-256 = HMAC-SHA256 of the raw body under the hook's secret,
// X-Hub-Signature (SHA-1), User-Agent GitHub-Hookshot/…) and payloads shaped
// like the real ones (issues opened/labeled/unlabeled/edited/closed/reopened,
// issue_comment created/edited, pull_request opened/labeled/closed (merged),
// pull_request_review submitted, pull_request_review_comment created,
// check_run created/completed, status). Like GitHub, changes made by theloop's own
// token produce webhooks too (sender = Config.BotLogin), and reactions
// produce none. Deliveries are made one at a time, in the order the changes
// happened, by one goroutine per server; a failed delivery is recorded and
// not retried (GitHub does not redeliver on its own) — Redeliver sends one
// again under the same delivery id, as GitHub's "Redeliver" button does.
//
// What it records: every request received (Requests; never the token) and
// every delivery attempted (Deliveries), for the demo to print and for tests
// to assert. Observers (Config.OnRequest, Config.OnDelivery) see them live.
//
// What it is not: a complete GitHub. There is no git hosting (the demo points
// the daemon at a local repository), no authorization model beyond one token,
// no rate limiting unless a fault is injected (InjectFault), and the web URLs
// it writes into payloads (html_url) name Config.WebURL, github.com by
// default, so that the refs theloop derives from them look like GitHub's.
//
// A Server is safe for concurrent use. Start it with Start and stop it with
// Close, which also stops the delivery goroutine.
package githubsim
