package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/internal/atomicfile"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// Poller defaults (docs/daemon.md §3.5, §12.2).
const (
	DefaultPollInterval = 60 * time.Second
	DefaultPollRetries  = 3
	// MaxPollBackoff caps the wait after rate limits or failing cycles.
	MaxPollBackoff = 15 * time.Minute
)

// Poll event names (emitted to the graph.Sink).
const (
	EventPollCycle        = "poll.cycle"
	EventPollUnauthorized = "poll.unauthorized"
	EventPollClosure      = "poll.closure_detected"
	EventPollProviderErr  = "poll.provider_error"
	EventPollBackoff      = "poll.backoff"
)

// PollSource is one polling.sources[] entry (provider github).
type PollSource struct {
	// Repos are "owner/repo" or "host/owner/repo".
	Repos []string
	// Label gates discovery ("" = the router's auto-execute label).
	Label string
	// SkipIssues and SkipPullRequests turn off monitor.issues /
	// monitor.pullRequests (both monitored by default).
	SkipIssues, SkipPullRequests bool
	// RepoActivity runs the repository pass (poll_repo.go) over these
	// repositories every cycle; without it, only over those
	// Poller.WatchRepository switched on.
	RepoActivity bool
}

// PollerConfig configures the poller.
type PollerConfig struct {
	Sources []PollSource
	// Interval between cycles (default 60 s).
	Interval time.Duration
	// MaxRetries bounds the hand-off attempts of one presence event before
	// the poller stops offering it (default 3). Comments are never given up:
	// a comment the Sink did not keep stays unseen and is offered again.
	MaxRetries int
	// StateRoot holds poll-status.json (the heartbeat).
	StateRoot string
	// PRCICalls bounds the GitHub calls one cycle spends on PR/CI
	// discovery (poll_prci.go; default DefaultPRCICalls, negative: none).
	PRCICalls int
}

// PollerDeps is the outside world of a Poller.
type PollerDeps struct {
	// GitHub performs the calls: the daemon's *integrations.Set, over the
	// transport the operator configured (api or cli). Required.
	GitHub graph.Integrations
	// Sink keeps the events. Required.
	Sink Sink
	// Router supplies the one authorization, self-authored and control
	// implementation, and the auto-execute label. Required.
	Router *Router
	// Store holds the ledgers and control records. Required.
	Store *PortableStore
	// Tracked lists the work items to reconcile for closure: the daemon
	// passes its live session records. Default: every item with a poll
	// ledger.
	Tracked func(ctx context.Context) ([]workitem.Ref, error)
	// Log receives poll.* events (default: discarded).
	Log graph.Sink
	// Observe receives the pull-request, review and check state the
	// reconcile pass reads for tracked items, as webhook-shaped events
	// (poll_prci.go). Nil turns PR/CI discovery off. It is called on the
	// cycle's goroutine and must not block.
	Observe func(ev *Event)
	// Clock (default graph.SystemClock); Sleep waits between cycles
	// (default integrations.SleepContext).
	Clock graph.Clock
	Sleep integrations.Sleeper
}

// Poller is the pull ingress (docs/daemon.md §3): label discovery, new
// comments since the ledger, closure reconciliation, each producing the
// same Event the router does and handed to the same Sink. It starts no
// goroutine: Run blocks until its context ends, and Reconcile runs one pass
// (the daemon calls it at start-up and periodically, to catch webhooks
// missed while it was down).
type Poller struct {
	cfg     PollerConfig
	d       PollerDeps
	started time.Time
	backoff time.Duration
	// notBefore is when the back-off ends (zero when healthy).
	notBefore time.Time
	// cycleTracked caches the tracked refs during one cycle.
	cycleTracked *[]workitem.Ref
	// prciLeft is the cycle's remaining PR/CI call budget; prciCursor is,
	// per repository, where the next cycle's PR/CI reads begin.
	prciLeft   int
	prciCursor map[string]int
	// repoWatch are the repositories the repository pass runs over
	// (lower-cased; poll_repo.go).
	repoWatch map[string]bool
}

// CycleStats is one pass's outcome (the heartbeat's lastCycle).
type CycleStats struct {
	ItemsSeen         int  `json:"itemsSeen"`
	Presences         int  `json:"spawns"`
	CommentsForwarded int  `json:"commentsForwarded"`
	Closures          int  `json:"closures"`
	Failures          int  `json:"failures"`
	Errors            int  `json:"errors"`
	RateLimited       bool `json:"rateLimited,omitempty"`
	Interrupted       bool `json:"interrupted"`
	// PRCIObserved counts the PR/CI facts handed to PollerDeps.Observe.
	PRCIObserved int `json:"prciObserved,omitempty"`
	// RepoChanges counts the labels, openings, closings and reopenings
	// the repository pass handed to the Sink (its comments are in
	// CommentsForwarded).
	RepoChanges int `json:"repoChanges,omitempty"`
}

// NewPoller checks deps and cfg and returns a Poller.
func NewPoller(cfg PollerConfig, deps PollerDeps) (*Poller, error) {
	if deps.GitHub == nil || deps.Sink == nil || deps.Router == nil || deps.Store == nil {
		return nil, errors.New("ingress: NewPoller needs GitHub (the integrations set), Sink, Router and Store")
	}
	for _, src := range cfg.Sources {
		if len(src.Repos) == 0 {
			return nil, fmt.Errorf("%w: polling.sources[]: repos is empty; list OWNER/REPO entries", ErrInvalidConfig)
		}
		for _, r := range src.Repos {
			if _, err := parseRepoPattern(r); err != nil || strings.Contains(r, "*") {
				return nil, fmt.Errorf("%w: polling.sources[].repos: %q must be owner/repo or host/owner/repo", ErrInvalidConfig, r)
			}
		}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultPollInterval
	}
	if cfg.MaxRetries <= 0 {
		cfg.MaxRetries = DefaultPollRetries
	}
	if cfg.PRCICalls == 0 {
		cfg.PRCICalls = DefaultPRCICalls
	}
	if deps.Clock == nil && deps.Router != nil {
		deps.Clock = deps.Router.Clock()
	}
	if deps.Clock == nil {
		deps.Clock = graph.SystemClock{}
	}
	if deps.Sleep == nil {
		deps.Sleep = integrations.SleepContext
	}
	return &Poller{cfg: cfg, d: deps, started: deps.Clock.Now(), prciCursor: map[string]int{}}, nil
}

// Run polls until ctx ends: a heartbeat, then cycles separated by the
// interval — longer after rate limits or a cycle in which every call
// failed (doubling up to MaxPollBackoff, reset by a clean cycle). It returns
// ctx's error.
func (p *Poller) Run(ctx context.Context) error {
	p.heartbeat(nil)
	for {
		_, _ = p.Reconcile(ctx)
		wait := p.cfg.Interval
		if p.backoff > wait {
			wait = p.backoff
		}
		if err := p.d.Sleep(ctx, wait); err != nil {
			return ctx.Err()
		}
	}
}

// Backoff is the extra wait the next cycle will observe (0 when healthy).
func (p *Poller) Backoff() time.Duration { return p.backoff }

// Reconcile runs one poll cycle over every source and writes the
// heartbeat. It is not safe to run
// two at once on one Poller. The error is the first that stopped the cycle
// early (ctx, rate limit); per-item failures are counted in the stats.
func (p *Poller) Reconcile(ctx context.Context) (CycleStats, error) {
	var st CycleStats
	if now := p.d.Clock.Now(); now.Before(p.notBefore) {
		// Whoever drives the poller (Run, or the daemon's own ticker), a
		// back-off is honoured: no request before it ends.
		return st, fmt.Errorf("%w until %s", ErrBackingOff, p.notBefore.UTC().Format(TimeLayout))
	}
	calls, failed := 0, 0
	p.prciLeft = max(p.cfg.PRCICalls, 0)
	p.cycleTracked = nil
	defer func() { p.cycleTracked = nil }()
	var stopErr error
	for _, src := range p.cfg.Sources {
		label := src.Label
		if label == "" {
			label = p.d.Router.label
		}
		for _, repo := range src.Repos {
			if ctx.Err() != nil {
				stopErr = ctx.Err()
				break
			}
			n, f, err := p.pollRepo(ctx, src, repo, label, &st)
			calls += n
			failed += f
			if err == nil && p.watchesRepo(src, repo) {
				err = p.repoPass(ctx, repo, &st, &calls, &failed)
			}
			if err != nil {
				stopErr = err
				break
			}
		}
		if stopErr != nil {
			break
		}
	}
	if stopErr != nil {
		st.Interrupted = true
	}
	switch {
	case st.RateLimited || (calls > 0 && failed == calls):
		if p.backoff == 0 {
			p.backoff = 2 * p.cfg.Interval
		} else {
			p.backoff *= 2
		}
		p.backoff = min(p.backoff, MaxPollBackoff)
		p.notBefore = p.d.Clock.Now().Add(p.backoff)
		p.emit(EventPollBackoff, graph.LevelWarning, graph.Field{Key: "seconds", Value: int(p.backoff / time.Second)},
			graph.Field{Key: "rate_limited", Value: st.RateLimited})
	default:
		p.backoff = 0
		p.notBefore = time.Time{}
	}
	p.emit(EventPollCycle, graph.LevelInfo, graph.Field{Key: "items", Value: st.ItemsSeen},
		graph.Field{Key: "comments_forwarded", Value: st.CommentsForwarded}, graph.Field{Key: "closures", Value: st.Closures},
		graph.Field{Key: "failures", Value: st.Failures}, graph.Field{Key: "interrupted", Value: st.Interrupted})
	p.heartbeat(&st)
	return st, stopErr
}

// call performs one GitHub operation, counting it; a rate limit marks the
// cycle and is returned as errRateLimited to stop it.
func (p *Poller) call(ctx context.Context, st *CycleStats, calls, failed *int, op graph.Operation, args map[string]any) (map[string]any, error) {
	*calls++
	res, err := p.d.GitHub.Call(ctx, op, args)
	if err != nil {
		*failed++
		st.Errors++
		if errors.Is(err, integrations.ErrRateLimited) {
			st.RateLimited = true
			return nil, fmt.Errorf("%w: %v", errRateLimited, err)
		}
		return nil, err
	}
	return res, nil
}

// ErrBackingOff: Reconcile was called while the poller backs off after rate
// limits or a failing cycle; nothing was requested. Call again later.
var ErrBackingOff = errors.New("ingress: the poller is backing off")

var errRateLimited = errors.New("ingress: GitHub is rate limiting; the cycle stops and the next one backs off")

// pollItem is one listed work item.
type pollItem struct {
	ref   workitem.Ref
	isPR  bool
	title string
	url   string
	label bool
}

// pollRepo runs the cycle for one repository.
func (p *Poller) pollRepo(ctx context.Context, src PollSource, repo, label string, st *CycleStats) (calls, failed int, err error) {
	res, err := p.call(ctx, st, &calls, &failed, ops.GitHubListItemsByLabel, map[string]any{"repo": repo, "label": label})
	if err != nil {
		st.Failures++
		p.emit(EventPollProviderErr, graph.LevelWarning, graph.Field{Key: "repo", Value: repo}, graph.Field{Key: "error", Value: err.Error()})
		if errors.Is(err, errRateLimited) || ctx.Err() != nil {
			return calls, failed, err
		}
		return calls, failed, nil // no listing: no closure reconciliation either
	}
	listed := map[string]bool{}
	raw, _ := res["items"].([]any)
	for _, e := range raw {
		v := graph.AsValues(e)
		ref, perr := workitem.Parse(v.String("ref"))
		if perr != nil {
			continue
		}
		it := pollItem{ref: ref, isPR: v["isPullRequest"] == true, title: v.String("title"), url: v.String("url"), label: true}
		if (it.isPR && src.SkipPullRequests) || (!it.isPR && src.SkipIssues) {
			continue
		}
		listed[ref.String()] = true
		st.ItemsSeen++
		if ctx.Err() != nil {
			return calls, failed, ctx.Err()
		}
		n, f, ierr := p.pollItem(ctx, it, st)
		calls, failed = calls+n, failed+f
		if ierr != nil {
			return calls, failed, ierr
		}
	}
	// Closure reconciliation, only after a complete listing.
	tracked, terr := p.trackedOnce(ctx)
	if terr != nil {
		st.Failures++
		return calls, failed, nil
	}
	host, owner, name := splitRepo(repo)
	for _, ref := range tracked {
		if listed[ref.String()] || !strings.EqualFold(ref.Host, host) || !strings.EqualFold(ref.Owner, owner) || !strings.EqualFold(ref.Repo, name) {
			continue
		}
		if ctx.Err() != nil {
			return calls, failed, ctx.Err()
		}
		is, err := p.call(ctx, st, &calls, &failed, ops.GitHubGetIssue, map[string]any{"ref": ref.String()})
		if err != nil {
			st.Failures++
			if errors.Is(err, errRateLimited) {
				return calls, failed, err
			}
			continue // any doubt leaves it alone
		}
		v := graph.Values(is)
		if v.String("state") != "closed" {
			continue
		}
		if err := p.closeEvent(ctx, ref, v); err != nil {
			st.Failures++
			continue
		}
		st.Closures++
		_ = p.d.Store.DropPollLedger(ref)
		p.emit(EventPollClosure, graph.LevelInfo, graph.Field{Key: "work_item", Value: ref.String()})
	}
	if err := p.prciRepo(ctx, repo, tracked, st, &calls, &failed); err != nil {
		return calls, failed, err
	}
	return calls, failed, nil
}

// trackedOnce lists the tracked work items once per cycle.
func (p *Poller) trackedOnce(ctx context.Context) ([]workitem.Ref, error) {
	if p.cycleTracked != nil {
		return *p.cycleTracked, nil
	}
	var refs []workitem.Ref
	var err error
	if p.d.Tracked != nil {
		refs, err = p.d.Tracked(ctx)
	} else {
		refs, err = p.d.Store.PolledRefs()
	}
	if err == nil {
		p.cycleTracked = &refs
	}
	return refs, err
}

func splitRepo(repo string) (host, owner, name string) {
	parts := strings.Split(strings.TrimSpace(repo), "/")
	if len(parts) == 3 {
		host = strings.ToLower(parts[0])
		if host == workitem.DefaultGitHubHost {
			host = ""
		}
		parts = parts[1:]
	}
	if len(parts) == 2 {
		return host, parts[0], parts[1]
	}
	return host, "", ""
}

// pollComment is one human-authored body on an item's thread. c.UpdatedAt
// is GitHub's updated_at ("" for reviews, whose listing has none): with the
// id, the identity of the version listed.
type pollComment struct {
	key     string // ledger key, "<kind>-<id>"
	event   string // issue_comment | pull_request_review | pull_request_review_comment
	created string // created_at ("" when not listed)
	c       Comment
}

// pollItem handles one listed item: presence on first sight, then every
// unseen comment, oldest first, stopping at the first the Sink does not
// keep so a later comment never overtakes an earlier one. The ledger is
// saved before returning, whatever happened.
func (p *Poller) pollItem(ctx context.Context, it pollItem, st *CycleStats) (calls, failed int, err error) {
	ledger, lerr := p.d.Store.PollLedger(it.ref)
	if lerr != nil {
		// Unreadable: nothing recorded (the save below moves the file
		// aside); the thread is seen for the first time again.
		st.Failures++
		p.emit(EventPollProviderErr, graph.LevelWarning, graph.Field{Key: "work_item", Value: it.ref.String()},
			graph.Field{Key: "error", Value: lerr.Error()})
		ledger = nil
	}
	firstSight := ledger == nil
	if firstSight {
		ledger = &PollLedger{CommentAttempts: map[string]int{}}
	}
	defer func() {
		ledger.LastPolledAt = p.d.Store.now()
		if serr := p.d.Store.SavePollLedger(it.ref, ledger); serr != nil {
			st.Failures++
		}
	}()

	refs := []workitem.Ref{it.ref}
	if it.isPR {
		res, err := p.call(ctx, st, &calls, &failed, ops.GitHubClosingIssues, map[string]any{"ref": it.ref.String()})
		if err != nil {
			st.Failures++
			if errors.Is(err, errRateLimited) {
				return calls, failed, err
			}
			// The PR itself is still a work item; its links come next cycle.
		} else {
			var x extraction
			x.own = it.ref
			rs, _ := res["refs"].([]any)
			for _, r := range rs {
				if s, ok := r.(string); ok {
					if ref, err := workitem.Parse(s); err == nil {
						x.add(ref, RefFromClosingReference)
					}
				}
			}
			x.add(it.ref, RefFromEntity)
			refs = x.refs
		}
	}

	comments, err := p.listThread(ctx, it, st, &calls, &failed)
	if err != nil {
		st.Failures++
		if errors.Is(err, errRateLimited) {
			return calls, failed, err
		}
		return calls, failed, nil // nothing marked: every comment is offered again next cycle
	}

	authz := p.d.Router.authz
	if firstSight {
		// History is baselined, except control commands no record has
		// answered yet (the start already on the thread when the poller
		// first looks).
		rec, _ := p.d.Store.Control(it.ref)
		for _, c := range comments {
			pending := rec == nil && authz.admit(c.c.Author, c.c.Body) == "" && c.event == KindIssueComment
			if pending {
				cmd := p.d.Router.keywords.parse(c.c.Body)
				pending = cmd != nil && !cmd.Ambiguous
			}
			if !pending {
				ledger.ResolveVersion(c.key, c.c.UpdatedAt)
			}
		}
		if err := p.presence(ctx, it, refs, ledger, st, &calls, &failed); err != nil {
			return calls, failed, err
		}
	} else if !ledger.Presence.Kept && ledger.Presence.Attempts < p.cfg.MaxRetries {
		if err := p.presence(ctx, it, refs, ledger, st, &calls, &failed); err != nil {
			return calls, failed, err
		}
	}

	live := map[string]bool{}
	for _, c := range comments {
		live[c.key] = true
	}
	for _, c := range comments {
		if !ledger.Seen(c.key) {
			dupCreation, err := p.offerComment(ctx, it, refs, c, false, ledger, st)
			if err != nil {
				break // keep the thread's order: the rest waits for this one
			}
			if !dupCreation {
				continue
			}
			// The webhook delivered the creation; an edit since then is
			// still to be offered (its version is checked below).
		}
		ver, ok := ledger.Version(c.key)
		if c.c.UpdatedAt == "" || !ok {
			ledger.ResolveVersion(c.key, c.c.UpdatedAt) // baseline: no version to compare with
			continue
		}
		if ver == c.c.UpdatedAt {
			continue // unchanged
		}
		if _, err := p.offerComment(ctx, it, refs, c, true, ledger, st); err != nil {
			break
		}
	}
	ledger.Prune(live)
	return calls, failed, nil
}

// offerComment hands one change of a comment to the Sink — its creation, or
// (edit) its current version — unless the router's rules drop it or the
// webhook already delivered the same change (same ContentKey in the shared
// Deduper: dupCreation reports that for a creation). The comment is resolved
// at the version the delivered change carried; an error means the Sink did
// not keep it, and it stays unresolved (or at its previous version) so the
// next cycle offers it again.
func (p *Poller) offerComment(ctx context.Context, it pollItem, refs []workitem.Ref, c pollComment, edit bool, ledger *PollLedger, st *CycleStats) (dupCreation bool, err error) {
	if reason := p.d.Router.authz.admit(c.c.Author, c.c.Body); reason != "" {
		ledger.ResolveVersion(c.key, c.c.UpdatedAt) // never forwarded, never retried
		if reason == DropUnauthorized {
			p.emit(EventDropped, graph.LevelWarning, graph.Field{Key: "reason", Value: string(reason)},
				graph.Field{Key: "work_item", Value: it.ref.String()}, graph.Field{Key: "actor", Value: c.c.Author})
		}
		return false, nil
	}
	ev := p.commentEvent(it, refs, c, edit)
	dedup := p.d.Router.dedup
	if dedup.Seen(ev.ContentKey()) {
		version := c.c.UpdatedAt
		if !edit && version != "" && c.created != "" {
			// What the webhook delivered was the comment as created
			// (GitHub's updated_at equals created_at then); a later
			// version is an edit still to offer.
			version = c.created
		}
		ledger.ResolveVersion(c.key, version)
		return !edit, nil
	}
	if err := p.put(ctx, ev); err != nil {
		ledger.CommentAttempts[c.key]++
		st.Failures++
		return false, err
	}
	dedup.Mark(ev.ContentKey())
	// A creation first seen already edited carried the current body: that
	// version is delivered too, and a late webhook of that edit is a
	// duplicate (in the receiver's window).
	if !edit && c.c.UpdatedAt != "" && c.created != "" && c.c.UpdatedAt != c.created {
		dedup.Mark(p.commentEvent(it, refs, c, true).ContentKey())
	}
	ledger.ResolveVersion(c.key, c.c.UpdatedAt)
	st.CommentsForwarded++
	return false, nil
}

// PresenceDeliveryPrefix begins the delivery id of a presence event: the
// synthetic "labeled" event the reconcile pass makes for an item it sees
// for the first time. It reports that the item exists, nothing anyone did.
const PresenceDeliveryPrefix = "poll-presence-"

// IsPresence reports whether ev is the poller's synthetic presence event.
// Such an event may arm or start a work item, but it never reaches an
// agent's session as an event and never reacts on the ticket: nobody made
// it.
func IsPresence(ev *Event) bool {
	return ev != nil && ev.Source == SourcePoll && strings.HasPrefix(ev.DeliveryID, PresenceDeliveryPrefix)
}

// presence hands the discovery event of a first-seen item to the Sink, if
// its author is authorized or a start is recorded.
func (p *Poller) presence(ctx context.Context, it pollItem, refs []workitem.Ref, ledger *PollLedger, st *CycleStats, calls, failed *int) error {
	if ledger.Presence.DeliveryID == "" {
		// One id per sighting, kept in the ledger: retries reuse it, a
		// reopened item (its ledger dropped at closure) gets a new one.
		ledger.Presence.DeliveryID = PresenceDeliveryPrefix + it.ref.String() + "-" + strconv.FormatInt(p.d.Clock.Now().UnixNano(), 36)
	}
	is, err := p.call(ctx, st, calls, failed, ops.GitHubGetIssue, map[string]any{"ref": it.ref.String()})
	if err != nil {
		st.Failures++
		if errors.Is(err, errRateLimited) {
			return err
		}
		return nil
	}
	v := graph.Values(is)
	author := v.String("author")
	started, _ := p.d.Store.StartRequested(it.ref)
	if !p.d.Router.authz.named(author) && !started {
		// Comments by authorized users on it are still processed.
		ledger.Presence.Kept = true // nothing to offer for this sighting
		p.emit(EventPollUnauthorized, graph.LevelWarning, graph.Field{Key: "work_item", Value: it.ref.String()}, graph.Field{Key: "author", Value: author})
		return nil
	}
	name := KindIssues
	entity := "issue"
	if it.isPR {
		name, entity = KindPullRequest, "pull_request"
	}
	payload, _ := json.Marshal(map[string]any{
		"action": "labeled", "repository": map[string]any{"full_name": it.ref.Owner + "/" + it.ref.Repo},
		entity: map[string]any{"number": it.ref.Number, "title": it.title, "html_url": it.url, "labels": v["labels"]},
	})
	ev := &Event{Event: name, Action: "labeled", DeliveryID: ledger.Presence.DeliveryID, Repo: repoString(it.ref),
		WorkItems: refs, Actor: author, Labeled: true, Payload: payload, Source: SourcePoll, ReceivedAt: p.d.Clock.Now().UTC()}
	ledger.Presence.Attempts++
	if err := p.put(ctx, ev); err != nil {
		st.Failures++
		return nil
	}
	ledger.Presence.Kept = true
	st.Presences++
	return nil
}

func repoString(r workitem.Ref) string {
	if r.Host != "" {
		return r.Host + "/" + r.Owner + "/" + r.Repo
	}
	return r.Owner + "/" + r.Repo
}

// put hands ev to the Sink; ErrDuplicate counts as kept.
func (p *Poller) put(ctx context.Context, ev *Event) error {
	err := p.d.Sink.Put(ctx, ev)
	if err == nil || errors.Is(err, ErrDuplicate) {
		return nil
	}
	return err
}

// commentEvent builds the webhook-shaped Event of a polled comment: its
// creation (with the router's control parse), or with edit its current
// version as "edited" — keyed, like the webhook's issue_comment.edited, by
// id and updated_at (Event.ContentKey), and never a control command (an
// edit never executes, as on the webhook path).
func (p *Poller) commentEvent(it pollItem, refs []workitem.Ref, c pollComment, edit bool) *Event {
	action := "created"
	obj := "comment"
	if c.event == KindPullRequestReview {
		action, obj = "submitted", "review"
	}
	delivery := "poll-" + c.key
	if edit {
		action = "edited"
		delivery += "@" + c.c.UpdatedAt
	}
	body := map[string]any{"id": c.c.ID, "body": c.c.Body, "html_url": c.c.URL, "user": map[string]any{"login": c.c.Author}, "state": c.c.State}
	if c.c.UpdatedAt != "" {
		body["updated_at"] = c.c.UpdatedAt
	}
	if c.created != "" {
		body["created_at"] = c.created
	}
	payload, _ := json.Marshal(map[string]any{
		"action": action, "repository": map[string]any{"full_name": it.ref.Owner + "/" + it.ref.Repo}, obj: body,
	})
	ev := &Event{Event: c.event, Action: action, DeliveryID: delivery, Repo: repoString(it.ref), WorkItems: refs,
		Actor: c.c.Author, Comments: []Comment{c.c}, Payload: payload, Source: SourcePoll, ReceivedAt: p.d.Clock.Now().UTC()}
	if edit {
		return ev
	}
	if cmd := p.d.Router.keywords.parse(c.c.Body); cmd != nil {
		cmd.Actor, cmd.Note = c.c.Author, c.c.URL
		ev.Control = cmd
	}
	return ev
}

// listThread lists the item's comments, and for a PR its reviews and
// inline comments, oldest first.
func (p *Poller) listThread(ctx context.Context, it pollItem, st *CycleStats, calls, failed *int) ([]pollComment, error) {
	type stream struct {
		op      graph.Operation
		key     string
		kind    string
		event   string
		at      string
		updated string // "" when the listing carries no updated_at
	}
	streams := []stream{{ops.GitHubListComments, "comments", "comment", KindIssueComment, "createdAt", "updatedAt"}}
	if it.isPR {
		streams = append(streams,
			stream{ops.GitHubListReviews, "reviews", "review", KindPullRequestReview, "submittedAt", ""},
			stream{ops.GitHubListReviewComments, "comments", "review-comment", KindPullRequestReviewComment, "createdAt", "updatedAt"})
	}
	type dated struct {
		pollComment
		at string
	}
	var all []dated
	for _, s := range streams {
		res, err := p.call(ctx, st, calls, failed, s.op, map[string]any{"ref": it.ref.String()})
		if err != nil {
			return nil, err
		}
		list, _ := res[s.key].([]any)
		for _, e := range list {
			v := graph.AsValues(e)
			if v == nil {
				continue
			}
			id := fmt.Sprint(v["id"])
			c := Comment{ID: id, Author: v.String("author"), Body: v.String("body"), URL: v.String("url"), State: v.String("state"), Item: it.ref.String()}
			if s.updated != "" {
				c.UpdatedAt = v.String(s.updated)
			}
			if s.kind == "review" && (strings.EqualFold(c.State, "PENDING") || strings.TrimSpace(c.Body) == "") {
				continue
			}
			all = append(all, dated{pollComment{key: s.kind + "-" + id, event: s.event, created: v.String(s.at), c: c}, v.String(s.at)})
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].at < all[j].at })
	out := make([]pollComment, len(all))
	for i, d := range all {
		out[i] = d.pollComment
	}
	return out, nil
}

// closeEvent hands the synthesised close event of ref to the Sink.
func (p *Poller) closeEvent(ctx context.Context, ref workitem.Ref, v graph.Values) error {
	name, entity, how := KindIssues, "issue", "closed"
	if v["isPullRequest"] == true {
		name, entity = KindPullRequest, "pull_request"
		if v["merged"] == true {
			how = "merged"
		}
	}
	payload, _ := json.Marshal(map[string]any{
		"action": "closed", "repository": map[string]any{"full_name": ref.Owner + "/" + ref.Repo},
		entity: map[string]any{"number": ref.Number, "title": v.String("title"), "html_url": v.String("url"), "labels": []any{}, "merged": v["merged"] == true},
	})
	ev := &Event{Event: name, Action: "closed", DeliveryID: "poll-close-" + ref.String() + "-" + how, Repo: repoString(ref),
		WorkItems: []workitem.Ref{ref}, Payload: payload, Source: SourcePoll, ReceivedAt: p.d.Clock.Now().UTC()}
	return p.put(ctx, ev)
}

// Heartbeat is <state root>/poll-status.json.
type Heartbeat struct {
	StartedAt       string      `json:"startedAt"`
	LastCycleAt     string      `json:"lastCycleAt"`
	IntervalSeconds int         `json:"intervalSeconds"`
	BackoffSeconds  int         `json:"backoffSeconds,omitempty"`
	LastCycle       *CycleStats `json:"lastCycle,omitempty"`
}

// HeartbeatPath is where the heartbeat is written ("" without a state root).
func (p *Poller) HeartbeatPath() string {
	if p.cfg.StateRoot == "" {
		return ""
	}
	return filepath.Join(p.cfg.StateRoot, "poll-status.json")
}

// heartbeat writes poll-status.json (never a pid: liveness is the lock).
// Failures are reported to the log, never fatal.
func (p *Poller) heartbeat(st *CycleStats) {
	path := p.HeartbeatPath()
	if path == "" {
		return
	}
	hb := Heartbeat{StartedAt: p.started.UTC().Format(TimeLayout), IntervalSeconds: int(p.cfg.Interval / time.Second),
		BackoffSeconds: int(p.backoff / time.Second), LastCycle: st}
	if st != nil {
		hb.LastCycleAt = p.d.Clock.Now().UTC().Format(TimeLayout)
	}
	b, _ := json.MarshalIndent(hb, "", "  ")
	if err := os.MkdirAll(p.cfg.StateRoot, 0o700); err == nil {
		err = atomicfile.Replace(path, append(b, '\n'), 0o600)
		if err != nil {
			p.emit(EventPollProviderErr, graph.LevelWarning, graph.Field{Key: "error", Value: "heartbeat: " + err.Error()})
		}
	}
}

func (p *Poller) emit(name string, level graph.Level, fields ...graph.Field) {
	if p.d.Log == nil {
		return
	}
	p.d.Log.Emit(graph.LogEvent{Time: p.d.Clock.Now(), Name: name, Level: level, Fields: fields})
}
