package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// A gate decision comes only from a new comment (or submitted review) whose
// sender and author are the authorized person, re-read from GitHub by id
// before it is signed; edits never decide (docs/decisions.md §19). The
// router checks the sender; this file is the rest, in one place: the graph
// link hands a human gate only the comments decisionEvent let through.

// CommentClaim is what an event says about one comment that is about to
// decide a gate.
type CommentClaim struct {
	// Item is the issue or pull request the comment was made on.
	Item workitem.Ref
	// Kind is integrations.CommentTypeIssue, CommentTypeReviewComment or
	// CommentTypeReview.
	Kind string
	// ID is GitHub's id of the comment or review.
	ID     string
	Author string
	Body   string
	// State is a review's state as the event carried it ("" for comments).
	State string
	// NotBefore, when set, is the earliest moment the comment may have been
	// made at its source (created, or a review submitted): the time the
	// item entered the gate it is to decide, less ClockSkew. A genuine but
	// older comment replayed under a fresh delivery (after the queue's
	// dedup window) is refused as ForgedStale.
	NotBefore time.Time
}

// ClockSkew is how far GitHub's clock may run behind loopd's before a
// comment made just after a gate was entered looks older than the gate.
const ClockSkew = 2 * time.Minute

// CommentVerifier re-reads a comment at its source before the comment may
// decide a gate. VerifyComment returns nil only when the source holds the
// comment as claimed: on that item, by that author, with that body (and a
// review in that state), never edited since it was created. It returns an
// error wrapping ErrForgedComment when the source contradicts the claim (a
// *ForgedCommentError says how), and any other error when the source could
// not be asked — the caller then moves nothing and tries again later. It
// must not change anything at the source.
type CommentVerifier interface {
	VerifyComment(ctx context.Context, c CommentClaim) error
}

// ErrForgedComment: the source does not hold the comment as the event
// claimed it.
var ErrForgedComment = errors.New("daemon: the comment does not stand up to a re-read at its source")

// Reasons a claim is refused (the reason field of routing.forged and the
// reason label of theloop_forged_decisions_total).
const (
	ForgedNoID        = "no-comment-id"
	ForgedNotFound    = "not-found"
	ForgedOtherItem   = "other-item"
	ForgedOtherAuthor = "other-author"
	ForgedOtherBody   = "other-body"
	ForgedOtherState  = "other-state"
	ForgedEdited      = "edited-since-creation"
	ForgedStale       = "older-than-the-gate"
)

// ForgedCommentError is a claim the source contradicts.
type ForgedCommentError struct {
	// Reason is one of the Forged* constants.
	Reason string
}

func (e *ForgedCommentError) Error() string {
	return ErrForgedComment.Error() + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrForgedComment) hold.
func (e *ForgedCommentError) Unwrap() error { return ErrForgedComment }

func forged(reason string) error { return &ForgedCommentError{Reason: reason} }

// githubVerifier re-reads comments through the daemon's integrations
// (github.get-comment, on whichever transport is configured).
type githubVerifier struct{ integ graph.Integrations }

// NewGitHubCommentVerifier is the CommentVerifier loopd uses by default: it
// re-reads the comment with the github.get-comment operation of integ.
func NewGitHubCommentVerifier(integ graph.Integrations) CommentVerifier {
	return githubVerifier{integ: integ}
}

func (v githubVerifier) VerifyComment(ctx context.Context, c CommentClaim) error {
	if c.ID == "" {
		return forged(ForgedNoID)
	}
	res, err := v.integ.Call(ctx, ops.GitHubGetComment, map[string]any{"ref": c.Item.String(), "commentId": c.ID, "commentType": c.Kind})
	switch {
	case errors.Is(err, integrations.ErrNotFound):
		return forged(ForgedNotFound)
	case errors.Is(err, integrations.ErrInvalidArgument):
		return forged(ForgedNoID) // not an id GitHub could hold
	case err != nil:
		return fmt.Errorf("re-reading comment %s on %s: %w", c.ID, c.Item, err)
	}
	got := graph.Values(res)
	if on, err := workitem.Parse(got.String("ref")); err != nil || !sameItem(on, c.Item) {
		return forged(ForgedOtherItem)
	}
	if got.String("author") != c.Author {
		return forged(ForgedOtherAuthor)
	}
	if got.String("body") != c.Body {
		return forged(ForgedOtherBody)
	}
	if c.Kind == integrations.CommentTypeReview {
		// A review's REST object has no updated_at; an edit of its body
		// shows as another body, and its verdict must be the one claimed.
		if !strings.EqualFold(got.String("state"), c.State) {
			return forged(ForgedOtherState)
		}
		return fresh(got.String("submittedAt"), c.NotBefore)
	}
	created := got.String("createdAt")
	if created == "" || got.String("updatedAt") != created {
		return forged(ForgedEdited)
	}
	return fresh(created, c.NotBefore)
}

// fresh refuses a comment made before notBefore (zero: no bound). A time
// the source gives but that does not parse is refused too: fail closed.
func fresh(at string, notBefore time.Time) error {
	if notBefore.IsZero() {
		return nil
	}
	t, err := time.Parse(time.RFC3339, at)
	if err != nil || t.Before(notBefore) {
		return forged(ForgedStale)
	}
	return nil
}

// gateNotBefore is the NotBefore of comments that are to decide the node
// st points at: when the item first entered it, less ClockSkew. Zero when
// the state does not say (no bound is better than refusing every
// decision on an old state file; the other checks still hold).
func gateNotBefore(st *graph.State) time.Time {
	if st == nil {
		return time.Time{}
	}
	r, ok := st.Nodes.Get(st.CurrentNode)
	if !ok || r.EnteredAt == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, r.EnteredAt)
	if err != nil {
		return time.Time{}
	}
	return t.Add(-ClockSkew)
}

// sameItem compares refs as GitHub does: names case-insensitively.
func sameItem(a, b workitem.Ref) bool {
	return a.Provider == b.Provider && a.Number == b.Number && strings.EqualFold(a.Host, b.Host) &&
		strings.EqualFold(a.Owner, b.Owner) && strings.EqualFold(a.Repo, b.Repo)
}

// commentKind is the kind of comment an event kind carries (its table
// entry's; an issue comment's when the table names none).
func commentKind(k ingress.EventKind) string {
	if k.CommentType != "" {
		return k.CommentType
	}
	return integrations.CommentTypeIssue
}

// errRetryDecision marks a decision the source could not confirm now: the
// dispatch fails, so the queue delivers the event again later.
type errRetryDecision struct{ error }

func (e errRetryDecision) Unwrap() error { return e.error }

// decisionEvent turns the event's comments into the event a human gate is
// evaluated against, and is the one place a comment becomes able to decide
// one. on is the loop's own item (the work item, or the pull request of an
// inner loop), used when an event from an older queue names no item.
//
// An event without comments (a label, a CI result) passes unchanged. An
// event whose comments come from an edit, a deletion or a dismissal is
// not a decision: it is skipped (the session still hears it as
// information). Otherwise each authorized, non-self-authored comment is
// re-read at GitHub: a comment the source contradicts is left out and
// reported as routing.forged — when it leaves the event without comments,
// the gate is not consulted at all — and a source that cannot be asked
// fails the whole step with errRetryDecision, so nothing moves now and the
// queue's redelivery asks again.
//
// notBefore bounds when a deciding comment may have been made (see
// CommentClaim.NotBefore); zero for the event that started the item.
//
// paths are the repository paths of the artifacts the gate locks: a
// codeowners rule must own them.
func (l *graphLink) decisionEvent(ctx context.Context, item, on workitem.Ref, ev *ingress.Event, notBefore time.Time, paths []string) (*graph.Event, error) {
	ge := &graph.Event{ID: ev.DeliveryID, Kind: ev.Event, Comments: []graph.Comment{}}
	if len(ev.Comments) == 0 {
		return ge, nil
	}
	// The table's one action of each comment event whose comment may
	// decide a gate: a comment created, a review submitted. (GitHub sends
	// no other pairing; accepting one would let a replayed creation pass
	// under a content identity the queue has not seen.)
	kind := ingress.KindOf(ev.Event)
	if kind.Decides == "" || ev.Action != kind.Decides {
		return nil, skip{"not-a-decision (" + ev.Event + "." + ev.Action + ")"}
	}
	refused := 0
	for _, c := range ev.Comments {
		verdict := reviewVerdict(kind, c.State)
		if strings.TrimSpace(c.Body) == "" && verdict == "" || c.Author == "" || hooks.SelfAuthored(c.Body) {
			continue // the gate hooks would not read it; nothing to verify
		}
		rule, err := authorizingRule(ctx, l.conf().AuthorizedUsers, l.authority, c.Author, on, paths)
		if err != nil {
			return nil, errRetryDecision{err}
		}
		if rule == "" {
			continue
		}
		claim := CommentClaim{Item: on, Kind: commentKind(kind), ID: c.ID, Author: c.Author, Body: c.Body, State: c.State, NotBefore: notBefore}
		if c.Item != "" {
			ref, err := workitem.Parse(c.Item)
			if err != nil {
				l.forgedComment(item, ev, c, ForgedOtherItem)
				refused++
				continue
			}
			claim.Item = ref
		}
		err = l.verifier.VerifyComment(ctx, claim)
		var f *ForgedCommentError
		switch {
		case errors.As(err, &f):
			l.forgedComment(item, ev, c, f.Reason)
			refused++
			continue
		case err != nil:
			return nil, errRetryDecision{err}
		}
		ge.Comments = append(ge.Comments, graph.Comment{ID: c.ID, Author: c.Author, Body: c.Body, URL: c.URL, AuthorizedBy: rule, Verdict: verdict})
	}
	if refused > 0 && len(ge.Comments) == 0 {
		return nil, skip{"no-verified-decision"}
	}
	return ge, nil
}

// reviewVerdict is the gate outcome a submitted review's state carries
// (docs/decisions.md §19: a submitted review decides as a new comment
// does); "" for a comment or a review that only comments.
func reviewVerdict(k ingress.EventKind, state string) string {
	if !k.Verdicts {
		return ""
	}
	switch strings.ToUpper(state) {
	case "APPROVED":
		return hooks.OutcomeApproved
	case "CHANGES_REQUESTED":
		return hooks.OutcomeChangesRequested
	}
	return ""
}

// forgedComment reports a refused claim: the event log's routing.forged
// (counted in theloop_forged_decisions_total) and the daemon's log.
func (l *graphLink) forgedComment(item workitem.Ref, ev *ingress.Event, c ingress.Comment, reason string) {
	source := "GitHub"
	if ev.Event == ingress.JiraCommentEvent {
		source = "Jira"
	}
	l.logf("refused a gate decision for %s: comment %q claimed by @%s does not match %s (%s); the approver can comment again", item, c.ID, c.Author, source, reason)
	l.record(ingress.EventForged, graph.LevelWarning,
		graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "comment_id", Value: c.ID},
		graph.Field{Key: "claimed_author", Value: c.Author}, graph.Field{Key: "reason", Value: reason},
		graph.Field{Key: "delivery_id", Value: ev.DeliveryID}, graph.Field{Key: "gh_event", Value: ev.Event})
}
