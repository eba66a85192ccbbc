package githubsim

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Errors the Go API returns; compare with errors.Is.
var (
	// ErrNotFound: no such repository, issue or comment.
	ErrNotFound = errors.New("githubsim: not found")
	// ErrInvalid: an argument GitHub would refuse (an empty title or label,
	// a malformed repository name or login).
	ErrInvalid = errors.New("githubsim: invalid argument")
	// ErrClosed: the server has been closed.
	ErrClosed = errors.New("githubsim: server closed")
)

// Issue is a snapshot of an issue or pull request.
type Issue struct {
	Repo      string // owner/name
	Number    int
	ID        int64
	Title     string
	Body      string
	Author    string
	State     string // open | closed
	Labels    []string
	IsPR      bool
	Merged    bool
	CreatedAt time.Time
	UpdatedAt time.Time
	ClosedAt  time.Time // zero while open
	// Reactions are "login:content" pairs on the issue itself.
	Reactions []string
}

// Comment is a snapshot of an issue comment.
type Comment struct {
	Repo      string
	Issue     int
	ID        int64
	Author    string
	Body      string
	CreatedAt time.Time
	UpdatedAt time.Time
	// Reactions are "login:content" pairs.
	Reactions []string
}

// Review is a pull-request review, for tests that seed one (AddReview).
type Review struct {
	ID int64
	// Author "" is a deleted account: GitHub writes "user": null.
	Author      string
	Body        string
	State       string // APPROVED, CHANGES_REQUESTED, COMMENTED, PENDING
	SubmittedAt time.Time
}

// ReviewComment is an inline pull-request review comment (AddReviewComment).
type ReviewComment struct {
	ID     int64
	Author string
	Body   string
	Path   string
	Line   int
	// OriginalLine is the line the comment was made on; with Line 0 the
	// comment is outdated (GitHub then writes "line": null).
	OriginalLine int
	CreatedAt    time.Time
	Reactions    []string
}

// PullRequest describes a pull request opened with OpenPullRequestWith.
type PullRequest struct {
	Author, Title, Body string
	// Head is the branch the change is on (default "pr-<number>"); theloop
	// links a head named issue-<n> to issue n.
	Head string
	// Base is the branch it merges into (default the repository's default
	// branch).
	Base string
	// HeadRepo is the fork ("owner/name") the head branch lives in; ""
	// means the repository itself. A fork need not exist in the server:
	// payloads describe it as GitHub would (head.repo, fork: true).
	HeadRepo string
	Draft    bool
	Labels   []string
}

// RepoOptions describe a repository created with AddRepo.
type RepoOptions struct {
	// CloneURL is written into payloads as repository.clone_url (e.g. the
	// file:// URL of a local repository the daemon clones). Default: the
	// web URL plus ".git".
	CloneURL string
	// DefaultBranch defaults to "main".
	DefaultBranch string
	// Private marks the repository private in payloads.
	Private bool
	// FirstNumber is the number the next issue or pull request opened gets
	// (default 1): a repository with history, whose items a test names.
	// Numbers only move on: a FirstNumber at or below one already used is
	// ignored.
	FirstNumber int
}

type repo struct {
	id       int64
	owner    string
	name     string
	opts     RepoOptions
	created  time.Time
	issues   map[int]*issue
	nextNum  int
	comments map[int64]*comment // every issue comment of the repository, by id
	reviewC  map[int64]*reviewComment
	checks   map[string]*commitChecks // head sha → its check runs and statuses (checks.go)
	events   []*issueEvent            // the issue events, oldest first (issueevents.go)
}

type issue struct {
	id        int64
	number    int
	title     string
	body      string
	author    string
	state     string
	labels    []string
	pr        bool
	merged    bool
	mergedBy  string
	head      string // a pull request's head branch
	headRepo  string // the fork holding head ("" = the repository)
	base      string // a pull request's base branch
	draft     bool
	created   time.Time
	updated   time.Time
	closed    time.Time
	comments  []*comment
	reviews   []*Review
	reviewCs  []*reviewComment
	reactions []string
}

type comment struct {
	id        int64
	issue     *issue
	author    string
	body      string
	created   time.Time
	updated   time.Time
	reactions []string
}

type reviewComment struct {
	ReviewComment
	issue *issue
}

var (
	branchRE = regexp.MustCompile(`^[A-Za-z0-9._/-]{1,200}$`)
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
	loginRE  = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$`)
)

// maxText bounds titles, bodies and labels accepted through either API, like
// GitHub's own limits (65,536 characters for a body).
const (
	maxBody  = 65536
	maxTitle = 256
	maxLabel = 50
)

func splitRepo(full string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(full, "/")
	if !ok || !nameRE.MatchString(owner) || !nameRE.MatchString(name) || owner == "." || owner == ".." || name == "." || name == ".." {
		return "", "", fmt.Errorf("%w: repository %q must be owner/name", ErrInvalid, clip(full, 80))
	}
	return owner, name, nil
}

func checkLogin(login string) error {
	if !loginRE.MatchString(login) {
		return fmt.Errorf("%w: login %q is not a GitHub login", ErrInvalid, clip(login, 60))
	}
	return nil
}

func checkLabel(l string) error {
	if strings.TrimSpace(l) == "" || len(l) > maxLabel || strings.ContainsAny(l, "\x00\n\r") {
		return fmt.Errorf("%w: label %q must be 1–%d characters on one line", ErrInvalid, clip(l, 60), maxLabel)
	}
	return nil
}

func hasFold(list []string, s string) bool {
	return slices.ContainsFunc(list, func(e string) bool { return strings.EqualFold(e, s) })
}

func removeFold(list []string, s string) ([]string, bool) {
	i := slices.IndexFunc(list, func(e string) bool { return strings.EqualFold(e, s) })
	if i < 0 {
		return list, false
	}
	return slices.Delete(slices.Clone(list), i, i+1), true
}

// addReaction adds login's reaction unless present; it reports whether it
// was new.
func addReaction(list *[]string, login, content string) bool {
	key := login + ":" + content
	if slices.Contains(*list, key) {
		return false
	}
	*list = append(*list, key)
	return true
}

func (is *issue) snapshot(full string) Issue {
	return Issue{
		Repo: full, Number: is.number, ID: is.id, Title: is.title, Body: is.body, Author: is.author,
		State: is.state, Labels: slices.Clone(is.labels), IsPR: is.pr, Merged: is.merged,
		CreatedAt: is.created, UpdatedAt: is.updated, ClosedAt: is.closed, Reactions: slices.Clone(is.reactions),
	}
}

func (c *comment) snapshot(full string) Comment {
	return Comment{
		Repo: full, Issue: c.issue.number, ID: c.id, Author: c.author, Body: c.body,
		CreatedAt: c.created, UpdatedAt: c.updated, Reactions: slices.Clone(c.reactions),
	}
}

// closingRE finds GitHub's closing keywords in a PR body: "Fixes #3" in
// the same repository, "Closes octo/other#4" in another.
var closingRE = regexp.MustCompile(`(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?[ \t]+([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)?#(\d+)\b`)

// closingRef is one issue a PR body closes; repo "" is the PR's own.
type closingRef struct {
	repo   string
	number int
}

func closingRefs(body string) []closingRef {
	var out []closingRef
	for _, m := range closingRE.FindAllStringSubmatch(body, -1) {
		n, err := strconv.Atoi(m[2])
		if err != nil || n <= 0 {
			continue
		}
		if ref := (closingRef{repo: m[1], number: n}); !slices.Contains(out, ref) {
			out = append(out, ref)
		}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) > n {
		r = r[:n]
	}
	return string(r) + "…"
}
