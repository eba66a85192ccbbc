package ingress

import (
	"errors"
	"strings"
	"sync"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/workitem"
)

// DropReason says why the router acknowledged a delivery without forwarding
// it (the routing.dropped reasons of docs/daemon.md §4, plus the repository
// bound and content dedup).
type DropReason string

const (
	DropDisabledEvent     DropReason = "disabled-event"
	DropDuplicate         DropReason = "duplicate-delivery"
	DropDuplicateContent  DropReason = "duplicate-content"
	DropRepositoryUnbound DropReason = "repository-not-bound"
	DropNoWorkItem        DropReason = "no-work-item"
	DropSelfAuthored      DropReason = "self-authored"
	DropUnauthorized      DropReason = "unauthorized-actor"
	// DropSenderNotAuthor: a comment or review event whose sender is not
	// the comment's author — on GitHub a collaborator can edit (or delete)
	// another's comment, and the edit arrives under the author's name
	// (docs/decisions.md §19, docs/decisions.md §19).
	DropSenderNotAuthor DropReason = "sender-not-author"
)

// DropReasons lists every DropReason (for metrics).
func DropReasons() []DropReason {
	return []DropReason{DropDisabledEvent, DropDuplicate, DropDuplicateContent, DropRepositoryUnbound,
		DropNoWorkItem, DropSelfAuthored, DropUnauthorized, DropSenderNotAuthor}
}

// ErrInvalidPayload: the body is not one JSON object (the receiver answers
// 400).
var ErrInvalidPayload = errors.New("ingress: invalid payload")

// Event-log names the router and receiver emit to the graph.Sink.
const (
	EventRouted   = "routing.routed"
	EventDropped  = "routing.dropped"
	EventRejected = "webhook.rejected"
	// EventForged is what the daemon emits when a comment that would have
	// decided a gate does not stand up to a re-read at GitHub (missing,
	// another author, another body, edited since creation). Fields:
	// work_item, comment_id, claimed_author, reason.
	EventForged = "routing.forged"
)

// maxPooledMembers bounds the payload indexes kept for reuse.
const maxPooledMembers = 1 << 12

// Router turns one delivery into an Event or a drop, in docs/daemon.md §4's order:
// event filter → delivery dedup → repository bound → work-item extraction →
// self-authored drop → authorization; then the control keyword is parsed
// and the content key checked. It makes no network call, starts no
// goroutine and is safe for concurrent use.
type Router struct {
	events   map[string]*EventKind // the filter, each with its table entry
	bound    repoBound
	authz    authorizer
	keywords *keywordTable
	label    string
	dedup    *Deduper
	sink     graph.Sink
	clock    graph.Clock
	indexes  sync.Pool // *jsonIndex
}

// RouterDeps is the outside world of a Router; nil fields get defaults.
type RouterDeps struct {
	// Dedup is the delivery cache (default: NewDeduper from the config,
	// on Clock). Share one between a Router and the Poller.
	Dedup *Deduper
	// Log receives routing.* events (default: discarded). Drops of
	// unauthorized actors are warnings.
	Log graph.Sink
	// Clock stamps ReceivedAt (default: Dedup's clock when Dedup is
	// given, else graph.SystemClock).
	Clock graph.Clock
}

// NewRouter validates cfg and builds a Router. It fails on a configuration
// Validate refuses.
func NewRouter(cfg Config, deps RouterDeps) (*Router, error) {
	if _, err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	kw, _ := newKeywordTable(cfg.Control) // validated
	r := &Router{
		events:   map[string]*EventKind{},
		bound:    newRepoBound(cfg.Repositories),
		authz:    newAuthorizer(cfg.AuthorizedUsers, cfg.Authorized, cfg.SelfLogins),
		keywords: kw,
		label:    cfg.AutoExecuteLabel,
		dedup:    deps.Dedup,
		sink:     deps.Log,
		clock:    deps.Clock,
	}
	for _, e := range cfg.Events {
		name := strings.TrimSpace(e)
		r.events[name] = routedKind(name)
	}
	if r.clock == nil && r.dedup != nil {
		r.clock = r.dedup.Clock()
	}
	if r.clock == nil {
		r.clock = graph.SystemClock{}
	}
	if r.dedup == nil {
		r.dedup = NewDeduper(cfg.DedupSize, cfg.DedupWindow, r.clock)
	}
	r.indexes.New = func() any { return &jsonIndex{objects: make([]int32, 0, 16), members: make([]jsonMember, 0, 256)} }
	return r, nil
}

// Dedup returns the router's delivery cache.
func (r *Router) Dedup() *Deduper { return r.dedup }

// Clock is the router's clock; parts built around a Router (a Receiver, a
// Poller) default to it, so one world tells one time.
func (r *Router) Clock() graph.Clock { return r.clock }

// ParseControl parses a comment body with the configured vocabulary (the
// one parser of both ingresses; see the package documentation). It returns
// nil when the body carries no command.
func (r *Router) ParseControl(body string) *ControlCommand { return r.keywords.parse(body) }

// Authorized reports whether actor is a named, allowlisted login (or, with
// rules only GitHub answers, a named actor an Authority must still ask
// about).
func (r *Router) Authorized(actor string) bool { return r.authz.named(actor) }

// Route classifies one webhook delivery: name is X-GitHub-Event, delivery
// X-GitHub-Delivery, body the raw (already authenticated) payload, which
// the returned Event keeps without copying. Exactly one of the results is
// set: an Event to hand to the Sink, a DropReason (acknowledge, forward
// nothing), or an error wrapping ErrInvalidPayload (answer 400).
//
// Route only checks the Deduper; call Kept once the Sink has kept the
// event.
func (r *Router) Route(name, delivery string, body []byte) (*Event, DropReason, error) {
	kind := r.events[name]
	if kind == nil {
		return nil, r.drop(DropDisabledEvent, name, "", delivery, ""), nil
	}
	now := r.clock.Now()
	if r.dedup.Seen(delivery) {
		return nil, r.drop(DropDuplicate, name, "", delivery, ""), nil
	}
	idx := r.indexes.Get().(*jsonIndex)
	defer func() {
		if cap(idx.members) <= maxPooledMembers {
			r.indexes.Put(idx) // an index grown by an outsized payload is dropped
		}
	}()
	if !validate(body, idx) {
		return nil, "", ErrInvalidPayload
	}
	pl, ok := readPayload(&doc{b: body, idx: idx})
	if !ok {
		return nil, "", ErrInvalidPayload
	}
	action := pl.action.string()
	repo, ok := payloadRepo(&pl, prEntity(kind, &pl))
	if !ok || !r.bound.allows(repo.host, repo.owner, repo.repo) {
		return nil, r.drop(DropRepositoryUnbound, name, action, delivery, ""), nil
	}
	x := extract(kind, &pl, repo)
	if len(x.refs) == 0 {
		return nil, r.drop(DropNoWorkItem, name, action, delivery, ""), nil
	}
	ev := &Event{
		Event:      name,
		Action:     action,
		DeliveryID: delivery,
		Repo:       repo.owner + "/" + repo.repo,
		WorkItems:  x.refs,
		BranchOnly: x.branchOnly(),
		Payload:    body,
		Source:     SourceWebhook,
		ReceivedAt: now.UTC(),
	}
	if repo.host != "" {
		ev.Repo = repo.host + "/" + ev.Repo
	}
	// The body and actor (docs/daemon.md §4 table).
	var c jv
	actorRequired := true
	switch kind.Actor {
	case ActorWords:
		c = pl.top(kind.Words)
	case ActorSender:
		ev.Actor = pl.doc.get(pl.sender, "login").string()
	default:
		actorRequired = false // CI events carry no human actor
	}
	if c != nil {
		var f [7]jv
		pl.doc.fields(c, commentKeys, f[:])
		ev.Actor = f[0].get("login").string()
		cm := Comment{
			Author:    ev.Actor,
			Body:      f[1].string(),
			URL:       f[2].string(),
			UpdatedAt: f[3].string(),
			State:     f[4].string(),
		}
		if cm.UpdatedAt == "" {
			cm.UpdatedAt = f[5].string()
		}
		if _, ok := f[6].int(); ok {
			cm.ID = string(f[6])
		}
		if on := commentItem(kind, &pl, repo, x); on.Number > 0 {
			cm.Item = on.String()
		}
		if SelfAuthored(cm.Body) || r.authz.isSelf(ev.Actor) {
			return nil, r.drop(DropSelfAuthored, name, action, delivery, ev.Actor), nil
		}
		ev.Comments = []Comment{cm}
	}
	closes := kind.Closes && action == "closed"
	if actorRequired && !closes && r.authz.isSelf(ev.Actor) {
		return nil, r.drop(DropSelfAuthored, name, action, delivery, ev.Actor), nil
	}
	if actorRequired && !closes && !r.authz.named(ev.Actor) {
		return nil, r.drop(DropUnauthorized, name, action, delivery, ev.Actor), nil
	}
	if c != nil {
		// The actor and the author: whoever sent a comment event must be
		// the comment's author, or an edit by a collaborator would speak
		// in the author's name.
		if sender := pl.doc.get(pl.sender, "login").string(); sender != ev.Actor {
			return nil, r.dropSender(name, action, delivery, ev.Actor, sender), nil
		}
	}
	if c != nil && (action == "created" || action == "submitted") {
		// Prow acts on created comments only; an edit never executes.
		if cmd := r.keywords.parse(ev.Comments[0].Body); cmd != nil {
			cmd.Actor = ev.Actor
			cmd.Note = ev.Comments[0].URL
			ev.Control = cmd
		}
	}
	ev.Labeled = r.labeled(&pl, action)
	if c == nil {
		ev.Change = changeOf(name, action, &pl)
	}
	if r.dedup.Seen(ev.ContentKey()) {
		return nil, r.drop(DropDuplicateContent, name, action, delivery, ev.Actor), nil
	}
	if r.sink != nil {
		r.sink.Emit(graph.LogEvent{Time: now, Name: EventRouted, Level: graph.LevelDebug, Fields: []graph.Field{
			{Key: "gh_event", Value: name}, {Key: "action", Value: action}, {Key: "delivery_id", Value: delivery},
			{Key: "work_items", Value: len(ev.WorkItems)},
		}})
	}
	return ev, "", nil
}

// Kept records that the Sink kept ev (or already held it), so redeliveries
// of its delivery id or content are dropped as duplicates.
func (r *Router) Kept(ev *Event) {
	r.dedup.Mark(ev.DeliveryID)
	r.dedup.Mark(ev.ContentKey())
}

// commentItem is the issue or pull request a comment event's comment was
// made on: the pull request of review and PR-conversation events, else the
// issue of kinds whose words are on one (zero when the payload names none).
func commentItem(k *EventKind, p *payload, repo repoOf, x extraction) workitem.Ref {
	if x.own.Number > 0 {
		return x.own
	}
	if k.WordsOnIssue {
		if n := intOf(p.issue.number); n > 0 {
			return repo.ref(n)
		}
	}
	return workitem.Ref{}
}

// dropSender reports a comment event whose sender is not the author.
func (r *Router) dropSender(name, action, delivery, author, sender string) DropReason {
	if r.sink != nil {
		r.sink.Emit(graph.LogEvent{Time: r.clock.Now(), Name: EventDropped, Level: graph.LevelWarning, Fields: []graph.Field{
			{Key: "reason", Value: string(DropSenderNotAuthor)}, {Key: "gh_event", Value: name},
			{Key: "action", Value: action}, {Key: "delivery_id", Value: delivery},
			{Key: "actor", Value: author}, {Key: "sender", Value: sender},
		}})
	}
	return DropSenderNotAuthor
}

// commentKeys are the fields read from a comment or review object.
var commentKeys = []string{"user", "body", "html_url", "updated_at", "state", "submitted_at", "id"}

// labeled reports whether the payload carries the auto-execute label: the
// labeled action's label, or the issue's or PR's labels.
func (r *Router) labeled(p *payload, action string) bool {
	if action == "labeled" && strings.EqualFold(p.label.get("name").string(), r.label) {
		return true
	}
	found := false
	for _, e := range []jv{p.issue.labels, p.pullRequest.labels} {
		e.elems(func(l jv) {
			found = found || strings.EqualFold(l.get("name").string(), r.label)
		})
	}
	return found
}

func (r *Router) drop(reason DropReason, name, action, delivery, actor string) DropReason {
	if r.sink == nil {
		return reason
	}
	level := graph.LevelDebug
	if reason == DropUnauthorized || reason == DropRepositoryUnbound {
		level = graph.LevelWarning
	}
	fields := []graph.Field{
		{Key: "reason", Value: string(reason)}, {Key: "gh_event", Value: name},
		{Key: "action", Value: action}, {Key: "delivery_id", Value: delivery},
	}
	if actor != "" {
		fields = append(fields, graph.Field{Key: "actor", Value: actor})
	}
	r.sink.Emit(graph.LogEvent{Time: r.clock.Now(), Name: EventDropped, Level: level, Fields: fields})
	return reason
}
