package githubsim

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The Go API: what a test or the demo does as a person on GitHub. Each
// method changes the state, then queues the webhooks GitHub would send,
// under one lock, so deliveries follow the order of changes. Logins are
// checked like GitHub's; texts are bounded like GitHub's.

// AddRepo creates a repository (owner/name). Adding an existing one
// updates its options.
func (s *Server) AddRepo(full string, opts RepoOptions) error {
	owner, name, err := splitRepo(full)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp := s.lookupRepo(owner, name)
	if rp == nil {
		rp = &repo{
			id: s.newID(), owner: owner, name: name, created: s.now(),
			issues: map[int]*issue{}, comments: map[int64]*comment{}, reviewC: map[int64]*reviewComment{},
		}
		s.repos[strings.ToLower(full)] = rp
	}
	rp.opts = opts
	if opts.FirstNumber > rp.nextNum+1 {
		rp.nextNum = opts.FirstNumber - 1
	}
	return nil
}

// repoFor finds or creates a repository for the Go API; s.mu must be held.
func (s *Server) repoFor(full string) (*repo, error) {
	owner, name, err := splitRepo(full)
	if err != nil {
		return nil, err
	}
	if rp := s.lookupRepo(owner, name); rp != nil {
		return rp, nil
	}
	rp := &repo{id: s.newID(), owner: owner, name: name, created: s.now(),
		issues: map[int]*issue{}, comments: map[int64]*comment{}, reviewC: map[int64]*reviewComment{}}
	s.repos[strings.ToLower(full)] = rp
	return rp, nil
}

func (s *Server) issueFor(full string, number int) (*repo, *issue, error) {
	owner, name, err := splitRepo(full)
	if err != nil {
		return nil, nil, err
	}
	rp := s.lookupRepo(owner, name)
	if rp == nil {
		return nil, nil, fmt.Errorf("%w: repository %s", ErrNotFound, full)
	}
	is := rp.issues[number]
	if is == nil {
		return nil, nil, fmt.Errorf("%w: %s#%d", ErrNotFound, full, number)
	}
	return rp, is, nil
}

// pullFor is issueFor for a pull request: an issue is ErrInvalid.
func (s *Server) pullFor(full string, number int) (*repo, *issue, error) {
	rp, is, err := s.issueFor(full, number)
	if err != nil {
		return nil, nil, err
	}
	if !is.pr {
		return nil, nil, fmt.Errorf("%w: %s#%d is an issue, not a pull request", ErrInvalid, full, number)
	}
	return rp, is, nil
}

// checkAuthored checks the author's login and a body of at most maxBody
// bytes (what names it in the error).
func checkAuthored(login, what, body string, required bool) error {
	if err := checkLogin(login); err != nil {
		return err
	}
	return checkText(what, body, maxBody, required)
}

func checkText(what, s string, max int, required bool) error {
	if required && strings.TrimSpace(s) == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	}
	if len(s) > max {
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalid, what, max)
	}
	return nil
}

// OpenIssue opens an issue as author (the repository is created if need
// be) with the given labels, and sends issues.opened (then one
// issues.labeled per label, as GitHub does). It returns the new issue.
func (s *Server) OpenIssue(full, author, title, body string, labels ...string) (Issue, error) {
	return s.open(full, author, title, body, false, labels)
}

// OpenPullRequest opens a pull request the same way (head branch
// pr-<number>) and sends pull_request.opened. It carries no code; it exists
// so PR-shaped refs, reviews and closing references can be tested.
func (s *Server) OpenPullRequest(full, author, title, body string, labels ...string) (Issue, error) {
	return s.OpenPullRequestWith(full, PullRequest{Author: author, Title: title, Body: body, Labels: labels})
}

// OpenPullRequestWith opens a pull request described by pr.
func (s *Server) OpenPullRequestWith(full string, pr PullRequest) (Issue, error) {
	for _, b := range []string{pr.Head, pr.Base} {
		if b != "" && !branchRE.MatchString(b) {
			return Issue{}, fmt.Errorf("%w: branch %q", ErrInvalid, clip(b, 60))
		}
	}
	if pr.HeadRepo != "" {
		if _, _, err := splitRepo(pr.HeadRepo); err != nil {
			return Issue{}, err
		}
	}
	return s.openWith(full, pr.Author, pr.Title, pr.Body, true, pr.Labels, func(is *issue, rp *repo) {
		is.head, is.base, is.draft, is.headRepo = pr.Head, pr.Base, pr.Draft, pr.HeadRepo
		if is.head == "" {
			is.head = fmt.Sprintf("pr-%d", is.number)
		}
		if is.base == "" {
			is.base = rp.defaultBranch()
		}
	})
}

func (s *Server) open(full, author, title, body string, pr bool, labels []string) (Issue, error) {
	return s.openWith(full, author, title, body, pr, labels, nil)
}

func (s *Server) openWith(full, author, title, body string, pr bool, labels []string, init func(*issue, *repo)) (Issue, error) {
	if err := checkLogin(author); err != nil {
		return Issue{}, err
	}
	if err := checkText("title", title, maxTitle, true); err != nil {
		return Issue{}, err
	}
	if err := checkText("body", body, maxBody, false); err != nil {
		return Issue{}, err
	}
	for _, l := range labels {
		if err := checkLabel(l); err != nil {
			return Issue{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return Issue{}, ErrClosed
	}
	rp, err := s.repoFor(full)
	if err != nil {
		return Issue{}, err
	}
	rp.nextNum++
	now := s.now()
	is := &issue{id: s.newID(), number: rp.nextNum, title: title, body: body, author: author, state: "open", pr: pr, created: now, updated: now}
	if init != nil {
		init(is, rp)
	}
	rp.issues[is.number] = is
	event := "issues"
	if pr {
		event = "pull_request"
	}
	if pr {
		s.emit(event, "opened", rp, nil, nil, author, map[string]any{"number": is.number, "pull_request": s.pullJSON(rp, is)})
	} else {
		s.emit(event, "opened", rp, is, nil, author, nil)
	}
	for _, l := range labels {
		s.addLabelLocked(rp, is, author, l)
	}
	return is.snapshot(rp.full()), nil
}

// addLabelLocked adds one label (if absent) and sends labeled.
func (s *Server) addLabelLocked(rp *repo, is *issue, actor, label string) bool {
	if hasFold(is.labels, label) {
		return false
	}
	is.labels = append(is.labels, label)
	is.updated = s.now()
	s.recordEvent(rp, is, "labeled", actor, label)
	extra := map[string]any{"label": s.labelJSON(rp, label)}
	if is.pr {
		extra["number"], extra["pull_request"] = is.number, s.pullJSON(rp, is)
		s.emit("pull_request", "labeled", rp, nil, nil, actor, extra)
	} else {
		s.emit("issues", "labeled", rp, is, nil, actor, extra)
	}
	return true
}

func (s *Server) removeLabelLocked(rp *repo, is *issue, actor, label string) bool {
	var ok bool
	var name string
	if i := slices.IndexFunc(is.labels, func(e string) bool { return strings.EqualFold(e, label) }); i >= 0 {
		name = is.labels[i]
	}
	if is.labels, ok = removeFold(is.labels, label); !ok {
		return false
	}
	is.updated = s.now()
	s.recordEvent(rp, is, "unlabeled", actor, name)
	extra := map[string]any{"label": s.labelJSON(rp, name)}
	if is.pr {
		extra["number"], extra["pull_request"] = is.number, s.pullJSON(rp, is)
		s.emit("pull_request", "unlabeled", rp, nil, nil, actor, extra)
	} else {
		s.emit("issues", "unlabeled", rp, is, nil, actor, extra)
	}
	return true
}

// AddLabel labels an issue as actor and sends issues.labeled; a label the
// issue already has changes nothing and sends nothing.
func (s *Server) AddLabel(full string, number int, actor, label string) error {
	if err := checkLogin(actor); err != nil {
		return err
	}
	if err := checkLabel(label); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, is, err := s.issueFor(full, number)
	if err != nil {
		return err
	}
	s.addLabelLocked(rp, is, actor, label)
	return nil
}

// RemoveLabel removes a label as actor and sends issues.unlabeled; an absent
// label is ErrNotFound, as GitHub answers 404.
func (s *Server) RemoveLabel(full string, number int, actor, label string) error {
	if err := checkLogin(actor); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, is, err := s.issueFor(full, number)
	if err != nil {
		return err
	}
	if !s.removeLabelLocked(rp, is, actor, label) {
		return fmt.Errorf("%w: label %q on %s#%d", ErrNotFound, clip(label, 60), full, number)
	}
	return nil
}

// Comment posts a comment as author and sends issue_comment.created.
func (s *Server) Comment(full string, number int, author, body string) (Comment, error) {
	if err := checkAuthored(author, "comment body", body, true); err != nil {
		return Comment{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, is, err := s.issueFor(full, number)
	if err != nil {
		return Comment{}, err
	}
	return s.commentLocked(rp, is, author, body).snapshot(rp.full()), nil
}

func (s *Server) commentLocked(rp *repo, is *issue, author, body string) *comment {
	now := s.now()
	c := &comment{id: s.newID(), issue: is, author: author, body: body, created: now, updated: now}
	is.comments = append(is.comments, c)
	is.updated = now
	rp.comments[c.id] = c
	s.emit("issue_comment", "created", rp, is, c, author, nil)
	return c
}

// EditComment replaces a comment's body as editor and sends
// issue_comment.edited with changes.body.from. The comment's updated_at
// always moves forward (by a second if the clock has not), so each edit
// has its own content identity.
func (s *Server) EditComment(full string, commentID int64, editor, body string) (Comment, error) {
	if err := checkAuthored(editor, "comment body", body, true); err != nil {
		return Comment{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	owner, name, err := splitRepo(full)
	if err != nil {
		return Comment{}, err
	}
	rp := s.lookupRepo(owner, name)
	if rp == nil || rp.comments[commentID] == nil {
		return Comment{}, fmt.Errorf("%w: comment %d in %s", ErrNotFound, commentID, full)
	}
	return s.editCommentLocked(rp, rp.comments[commentID], editor, body).snapshot(rp.full()), nil
}

func (s *Server) editCommentLocked(rp *repo, c *comment, editor, body string) *comment {
	from := c.body
	c.body = body
	c.updated = s.later(c.updated)
	s.emit("issue_comment", "edited", rp, c.issue, c, editor, map[string]any{"changes": map[string]any{"body": map[string]any{"from": from}}})
	return c
}

// later is now, or one second after prev when the clock has not moved past it.
func (s *Server) later(prev time.Time) time.Time {
	now := s.now()
	if !now.After(prev) {
		now = prev.Add(time.Second)
	}
	return now
}

// CloseIssue closes an issue as actor and sends issues.closed. Closing a
// closed issue changes nothing.
func (s *Server) CloseIssue(full string, number int, actor string) error {
	return s.setState(full, number, actor, "closed")
}

// ReopenIssue reopens an issue as actor and sends issues.reopened.
func (s *Server) ReopenIssue(full string, number int, actor string) error {
	return s.setState(full, number, actor, "open")
}

func (s *Server) setState(full string, number int, actor, state string) error {
	if err := checkLogin(actor); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, is, err := s.issueFor(full, number)
	if err != nil {
		return err
	}
	s.setStateLocked(rp, is, actor, state)
	return nil
}

func (s *Server) setStateLocked(rp *repo, is *issue, actor, state string) {
	if is.state == state {
		return
	}
	is.state = state
	is.updated = s.now()
	action := "reopened"
	if state == "closed" {
		is.closed, action = is.updated, "closed"
	} else {
		is.closed = time.Time{}
	}
	if is.merged && state == "closed" {
		s.recordEvent(rp, is, "merged", actor, "")
	}
	s.recordEvent(rp, is, action, actor, "")
	if is.pr {
		s.emit("pull_request", action, rp, nil, nil, actor, map[string]any{"number": is.number, "pull_request": s.pullJSON(rp, is)})
		return
	}
	s.emit("issues", action, rp, is, nil, actor, nil)
}

// MergePullRequest merges an open pull request as actor: it closes with
// merged set and sends pull_request.closed (merged: true).
func (s *Server) MergePullRequest(full string, number int, actor string) error {
	if err := checkLogin(actor); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, is, err := s.issueFor(full, number)
	if err != nil {
		return err
	}
	if !is.pr || is.state != "open" {
		return fmt.Errorf("%w: %s#%d is not an open pull request", ErrInvalid, full, number)
	}
	is.merged, is.mergedBy = true, actor
	s.setStateLocked(rp, is, actor, "closed")
	return nil
}

// AddReview records a review on a pull request and, unless it is PENDING,
// sends pull_request_review.submitted.
func (s *Server) AddReview(full string, number int, r Review) (Review, error) {
	if r.Author != "" { // "": a deleted account
		if err := checkLogin(r.Author); err != nil {
			return Review{}, err
		}
	}
	if err := checkText("review body", r.Body, maxBody, false); err != nil {
		return Review{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, is, err := s.pullFor(full, number)
	if err != nil {
		return Review{}, err
	}
	switch r.State {
	case "APPROVED", "CHANGES_REQUESTED", "COMMENTED", "PENDING":
	case "":
		r.State = "COMMENTED"
	default:
		return Review{}, fmt.Errorf("%w: review state %q (APPROVED, CHANGES_REQUESTED, COMMENTED or PENDING)", ErrInvalid, clip(r.State, 30))
	}
	r.ID = s.newID()
	if r.SubmittedAt.IsZero() && r.State != "PENDING" { // a pending review is not submitted
		r.SubmittedAt = s.now()
	}
	is.reviews = append(is.reviews, &r)
	if r.State != "PENDING" {
		// GitHub reports a submitted review's state in lower case.
		rv := s.reviewJSON(rp, is, &r)
		rv["state"] = strings.ToLower(r.State)
		s.emit("pull_request_review", "submitted", rp, nil, nil, r.Author, map[string]any{"review": rv, "pull_request": s.pullJSON(rp, is)})
	}
	return r, nil
}

// AddReviewComment records an inline review comment on a pull request and
// sends pull_request_review_comment.created.
func (s *Server) AddReviewComment(full string, number int, rc ReviewComment) (ReviewComment, error) {
	if err := checkAuthored(rc.Author, "review comment body", rc.Body, true); err != nil {
		return ReviewComment{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, is, err := s.pullFor(full, number)
	if err != nil {
		return ReviewComment{}, err
	}
	rc.ID = s.newID()
	if rc.CreatedAt.IsZero() {
		rc.CreatedAt = s.now()
	}
	c := &reviewComment{ReviewComment: rc, issue: is}
	is.reviewCs = append(is.reviewCs, c)
	rp.reviewC[c.ID] = c
	s.emit("pull_request_review_comment", "created", rp, nil, nil, rc.Author, map[string]any{"comment": s.reviewCommentJSON(rp, c), "pull_request": s.pullJSON(rp, is)})
	return rc, nil
}

// Issue returns a snapshot of an issue or pull request.
func (s *Server) Issue(full string, number int) (Issue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, is, err := s.issueFor(full, number)
	if err != nil {
		return Issue{}, err
	}
	return is.snapshot(rp.full()), nil
}

// Comments returns an issue's comments, oldest first.
func (s *Server) Comments(full string, number int) ([]Comment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, is, err := s.issueFor(full, number)
	if err != nil {
		return nil, err
	}
	out := make([]Comment, 0, len(is.comments))
	for _, c := range is.comments {
		out = append(out, c.snapshot(rp.full()))
	}
	return out, nil
}
