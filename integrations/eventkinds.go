package integrations

// The event kinds theloop knows, by name: GitHub's X-GitHub-Event names,
// and the name theloop's Jira endpoint gives a Jira comment. This is the
// one file that spells them. What each kind means to loopd — where its
// work item is named, who its actor is, whether it may answer a gate, its
// prompt, its PR/CI meaning — is its entry in ingress's table (ingress
// Kinds, KindOf); the names live here, below ingress, so that the parts
// that may not link the receiver (loopctl, the demo's agent, the App
// manifest) name a kind without spelling it.
const (
	EventIssues                   = "issues"
	EventIssueComment             = "issue_comment"
	EventPullRequest              = "pull_request"
	EventPullRequestTarget        = "pull_request_target"
	EventPullRequestReview        = "pull_request_review"
	EventPullRequestReviewComment = "pull_request_review_comment"
	EventPullRequestReviewThread  = "pull_request_review_thread"
	EventWorkflowRun              = "workflow_run"
	EventCheckRun                 = "check_run"
	EventCheckSuite               = "check_suite"
	EventStatus                   = "status"
	// EventPing is the delivery GitHub sends when a hook is created; no
	// table entry routes it (the receiver answers it and keeps nothing).
	EventPing = "ping"
	// EventJiraComment is the Event.Event of a Jira comment; Action is
	// created, updated or deleted (from webhookEvent comment_created, …).
	EventJiraComment = "jira_comment"
)
