package ingress

import (
	"fmt"
	"sync"

	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/workitem"
)

// The event kinds theloop knows: GitHub's X-GitHub-Event names, and the
// name the Jira endpoint gives a Jira comment. The names are spelled once,
// in integrations/eventkinds.go (below ingress, so that loopctl and the
// demo's agent name a kind too); every other file names a kind through
// these constants or reads what it does from the table (KindOf), so
// routing a new kind is one entry below.
const (
	KindIssues                   = integrations.EventIssues
	KindIssueComment             = integrations.EventIssueComment
	KindPullRequest              = integrations.EventPullRequest
	KindPullRequestTarget        = integrations.EventPullRequestTarget
	KindPullRequestReview        = integrations.EventPullRequestReview
	KindPullRequestReviewComment = integrations.EventPullRequestReviewComment
	KindPullRequestReviewThread  = integrations.EventPullRequestReviewThread
	KindWorkflowRun              = integrations.EventWorkflowRun
	KindCheckRun                 = integrations.EventCheckRun
	KindCheckSuite               = integrations.EventCheckSuite
	KindStatus                   = integrations.EventStatus
	// JiraCommentEvent is the Event.Event of a Jira comment; Action is
	// created, updated or deleted (from webhookEvent comment_created, …).
	JiraCommentEvent = integrations.EventJiraComment
)

// providerGitHub is the workitem provider of GitHub's kinds.
const providerGitHub = "github"

// CommentTypeJira is the CommentClaim kind of a Jira comment (the GitHub
// ones are integrations.CommentType*).
const CommentTypeJira = "jira-comment"

// RefSource says why a ref was extracted (docs/daemon.md §4.1).
type RefSource string

const (
	RefFromEntity           RefSource = "entity"
	RefFromClosingReference RefSource = "closing-reference"
	RefFromBranch           RefSource = "branch"
	RefFromKeyword          RefSource = "keyword"
)

// ActorFrom says where the router finds the human behind a delivery.
type ActorFrom uint8

const (
	// ActorNone: a system event (CI): no actor is required or authorized.
	ActorNone ActorFrom = iota
	// ActorSender: the payload's sender, who must be authorized.
	ActorSender
	// ActorWords: the author of the comment or review in EventKind.Words,
	// who must be authorized and must also be the sender.
	ActorWords
)

// RefRule is one place of a payload where a work item is named. Path
// starts at the payload's top level; when Each is set, Path is a list and
// Each the path inside every element. From says what the value is:
// RefFromEntity a number of the event's repository, RefFromBranch a
// branch name read by the issue-<n> convention (a weak link).
type RefRule struct {
	Path []string
	Each []string
	From RefSource
}

// ExcerptPart is one object of a payload the daemon's prompt shows, and
// the fields of it shown (free text capped). Container "" is the payload's
// top level.
type ExcerptPart struct {
	Container string
	Fields    []string
}

// PRCIFact is what an event kind tells the dashboard's pull-request and CI
// view.
type PRCIFact uint8

const (
	PRCINone        PRCIFact = iota
	PRCIPullRequest          // a pull request's state
	PRCIReview               // a pull request's state and a submitted review's verdict
	PRCICheckRun             // one check's verdict
	PRCICheckSuite           // a suite's result (not shown: its runs are)
	PRCIStatus               // a commit status's verdict
)

// PollCover says what the poller and its reconcile pass synthesise of a
// kind when webhooks are missed (bits).
type PollCover uint8

const (
	// PollThread: listed in an item's thread (comments, reviews).
	PollThread PollCover = 1 << iota
	// PollPresence: synthesised for an item found carrying the
	// auto-execute label.
	PollPresence
	// PollClose: synthesised when an item is found closed.
	PollClose
	// PollPRCI: re-read by the pull-request and CI reconcile.
	PollPRCI
)

// EventKind is everything theloop does with one event kind: how the router
// extracts its work items and its actor, whether it may carry a gate
// answer, what the daemon's prompt shows of it, what it means to the
// pull-request and CI view, and what the poller covers of it.
type EventKind struct {
	// Name is the event's name (Event.Event).
	Name string
	// Provider is the workitem provider of the source ("github", "jira").
	// The GitHub router reads only the routing fields of GitHub kinds.
	Provider string
	// Default: in the default event filter (DefaultEvents).
	Default bool
	// App: a GitHub App subscribes to it (AppEvents, the App manifest).
	App bool

	// OnPR: the payload's pull_request object is the event's entity (its
	// number, closing references, head branch and body keywords name the
	// work items). Other kinds find a pull request in an issue that has a
	// pull_request key, or in a top-level pull_request (the poll shape).
	OnPR bool
	// Refs are where its work items are named when it has no pull-request
	// entity, in extraction order.
	Refs []RefRule
	// Actor says who acted; Words is the payload object holding the human
	// words (a comment, a review) when Actor is ActorWords.
	Actor ActorFrom
	Words string
	// WordsOnIssue: a comment without a pull-request entity was made on
	// the payload's issue.
	WordsOnIssue bool
	// Closes: its "closed" action closes the item (the actor may be
	// anyone, loopd itself included).
	Closes bool

	// Decides is the one action under which its words may answer a gate
	// ("" for none): a comment created, a review submitted.
	Decides string
	// Verdicts: its words carry a state (APPROVED, CHANGES_REQUESTED) that
	// is itself a gate answer.
	Verdicts bool
	// CommentType is the kind of comment the daemon re-reads at the source
	// before the words may decide (integrations.CommentType*,
	// CommentTypeJira).
	CommentType string
	// Noun names its words in a notice ("comment"); "" sends no notice
	// when a delivery of it is dropped.
	Noun string

	// Excerpt is what of its payload the daemon's prompt shows, in order;
	// ExcerptActor adds the actor.
	Excerpt      []ExcerptPart
	ExcerptActor bool

	// PRCI is its meaning to the pull-request and CI view.
	PRCI PRCIFact
	// Poll is what the poller covers of it.
	Poll PollCover
}

// Payload fields the excerpts show, shared by several kinds.
var (
	commentExcerpt = []ExcerptPart{{"comment", []string{"path", "line", "body", "html_url"}}}
	prFields       = []string{"number", "title", "state", "draft", "merged", "html_url"}
	labelExcerpt   = ExcerptPart{"label", []string{"name"}}
)

func builtinKinds() []EventKind {
	gh := providerGitHub
	return []EventKind{
		{Name: KindIssues, Provider: gh, Default: true, App: true,
			Refs:  []RefRule{{Path: []string{"issue", "number"}, From: RefFromEntity}},
			Actor: ActorSender, Closes: true,
			Excerpt: []ExcerptPart{{"issue", []string{"number", "title", "state", "html_url"}}, labelExcerpt}, ExcerptActor: true,
			Poll: PollPresence | PollClose},
		{Name: KindIssueComment, Provider: gh, Default: true, App: true,
			Refs:  []RefRule{{Path: []string{"issue", "number"}, From: RefFromEntity}},
			Actor: ActorWords, Words: "comment", WordsOnIssue: true,
			Decides: "created", CommentType: integrations.CommentTypeIssue, Noun: "comment",
			Excerpt: commentExcerpt, Poll: PollThread},
		{Name: KindPullRequest, Provider: gh, Default: true, App: true,
			OnPR: true, Actor: ActorSender, Closes: true,
			Excerpt: []ExcerptPart{{"pull_request", prFields}, labelExcerpt}, ExcerptActor: true,
			PRCI: PRCIPullRequest, Poll: PollPresence | PollClose | PollPRCI},
		{Name: KindPullRequestTarget, Provider: gh, OnPR: true, Actor: ActorSender},
		{Name: KindPullRequestReview, Provider: gh, Default: true, App: true,
			OnPR: true, Actor: ActorWords, Words: "review",
			Decides: "submitted", Verdicts: true, CommentType: integrations.CommentTypeReview, Noun: "review",
			Excerpt: []ExcerptPart{{"review", []string{"state", "body", "html_url"}}},
			PRCI:    PRCIReview, Poll: PollThread | PollPRCI},
		{Name: KindPullRequestReviewComment, Provider: gh, Default: true, App: true,
			OnPR: true, Actor: ActorWords, Words: "comment",
			Decides: "created", CommentType: integrations.CommentTypeReviewComment, Noun: "review comment",
			Excerpt: commentExcerpt, Poll: PollThread},
		{Name: KindPullRequestReviewThread, Provider: gh, OnPR: true,
			Excerpt: []ExcerptPart{{"pull_request", prFields}}, ExcerptActor: true},
		{Name: KindWorkflowRun, Provider: gh, Default: true,
			Refs: []RefRule{
				{Path: []string{"workflow_run", "pull_requests"}, Each: []string{"number"}, From: RefFromEntity},
				{Path: []string{"workflow_run", "head_branch"}, From: RefFromBranch},
			},
			Excerpt: []ExcerptPart{{"workflow_run", []string{"name", "event", "status", "conclusion", "head_branch", "html_url"}}}},
		// GitHub lists a run's pull requests on the run itself; older and
		// hand-built payloads carry them only on the suite. Both are read,
		// and the head branch from the run (when present) and from its
		// suite, so a run whose PR list is empty (a fork's branch) still
		// reaches its issue-<n> item.
		{Name: KindCheckRun, Provider: gh, Default: true, App: true,
			Refs: []RefRule{
				{Path: []string{"check_run", "pull_requests"}, Each: []string{"number"}, From: RefFromEntity},
				{Path: []string{"check_run", "check_suite", "pull_requests"}, Each: []string{"number"}, From: RefFromEntity},
				{Path: []string{"check_run", "head_branch"}, From: RefFromBranch},
				{Path: []string{"check_run", "check_suite", "head_branch"}, From: RefFromBranch},
				{Path: []string{"check_run", "pull_requests"}, Each: []string{"head", "ref"}, From: RefFromBranch},
			},
			Excerpt: []ExcerptPart{{"check_run", []string{"name", "status", "conclusion", "output", "html_url", "details_url"}}},
			PRCI:    PRCICheckRun, Poll: PollPRCI},
		{Name: KindCheckSuite, Provider: gh, Default: true, App: true,
			Refs: []RefRule{
				{Path: []string{"check_suite", "pull_requests"}, Each: []string{"number"}, From: RefFromEntity},
				{Path: []string{"check_suite", "head_branch"}, From: RefFromBranch},
			},
			Excerpt: []ExcerptPart{{"check_suite", []string{"status", "conclusion", "head_branch", "head_sha"}}},
			PRCI:    PRCICheckSuite},
		{Name: KindStatus, Provider: gh, Default: true,
			Refs:    []RefRule{{Path: []string{"branches"}, Each: []string{"name"}, From: RefFromBranch}},
			Excerpt: []ExcerptPart{{"", []string{"state", "context", "description", "target_url"}}},
			PRCI:    PRCIStatus, Poll: PollPRCI},
		// A Jira comment is routed by the Jira endpoint (jira.go), not by
		// the GitHub router.
		{Name: JiraCommentEvent, Provider: workitem.JiraProvider,
			Decides: "created", CommentType: CommentTypeJira},
	}
}

// kindTable is the registry of event kinds: the built-in ones, then any
// RegisterKind added at init.
var kindTable = newKindTable(builtinKinds())

type kinds struct {
	sync.RWMutex
	list   []*EventKind
	byName map[string]*EventKind
}

func newKindTable(builtin []EventKind) *kinds {
	t := &kinds{byName: map[string]*EventKind{}}
	for _, k := range builtin {
		t.register(k)
	}
	return t
}

// RegisterKind adds an event kind to the table. It is meant for init (as
// a plug-in registers itself): it panics on an empty name, a duplicate, a
// rule without a path, or ActorWords without Words.
func RegisterKind(k EventKind) {
	kindTable.register(k)
}

func (t *kinds) register(k EventKind) {
	switch {
	case k.Name == "":
		panic("ingress: RegisterKind: empty event name")
	case k.Actor == ActorWords && k.Words == "":
		panic(fmt.Sprintf("ingress: RegisterKind %q: ActorWords needs Words (the object holding the comment)", k.Name))
	}
	for _, r := range k.Refs {
		if len(r.Path) == 0 || r.From != RefFromEntity && r.From != RefFromBranch {
			panic(fmt.Sprintf("ingress: RegisterKind %q: a RefRule needs a Path and From entity or branch", k.Name))
		}
	}
	t.Lock()
	defer t.Unlock()
	if _, dup := t.byName[k.Name]; dup {
		panic(fmt.Sprintf("ingress: RegisterKind: %q registered twice", k.Name))
	}
	t.list = append(t.list, &k)
	t.byName[k.Name] = &k
}

// KindOf returns the table's entry of an event name; an unknown name
// gets an entry with only its Name (nothing extracted, no actor, no
// decision, no excerpt).
func KindOf(name string) EventKind {
	if k := kindOf(name); k != nil {
		return *k
	}
	return EventKind{Name: name}
}

func kindOf(name string) *EventKind {
	kindTable.RLock()
	defer kindTable.RUnlock()
	return kindTable.byName[name]
}

// Kinds lists the table, in registration order.
func Kinds() []EventKind {
	kindTable.RLock()
	defer kindTable.RUnlock()
	out := make([]EventKind, len(kindTable.list))
	for i, k := range kindTable.list {
		out[i] = *k
	}
	return out
}

// kindNames lists the names of the kinds keep accepts, in table order.
func kindNames(keep func(*EventKind) bool) []string {
	kindTable.RLock()
	defer kindTable.RUnlock()
	var out []string
	for _, k := range kindTable.list {
		if keep(k) {
			out = append(out, k.Name)
		}
	}
	return out
}

// DefaultEvents is the default event filter (docs/daemon.md §2.5).
func DefaultEvents() []string { return kindNames(func(k *EventKind) bool { return k.Default }) }

// AppEvents are the webhook events a GitHub App's permissions let it
// receive that loopd handles (the App manifest's default_events).
func AppEvents() []string { return kindNames(func(k *EventKind) bool { return k.App }) }

// closingKinds are the kinds whose closure ends an item's session.
func closingKinds() []string { return kindNames(func(k *EventKind) bool { return k.Closes }) }

// routedKind is what the GitHub router reads of an event name: the
// table's entry of a GitHub kind, else an entry that routes nothing.
func routedKind(name string) *EventKind {
	if k := kindOf(name); k != nil && k.Provider == providerGitHub {
		return k
	}
	return &EventKind{Name: name}
}
