package ingress

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/atomicfile"
	"github.com/theloop-dev/theloop/ops"
)

// The repository pass: what webhooks would have brought, read from the
// repository as a whole. GitHub does not retry a failed delivery; where
// loopd cannot have it redelivered (no permission on the hook, or the
// delivering hook is one loopd cannot list), a delivery answered 503 or
// sent while loopd was down is lost unless the poller finds the change
// itself. For each repository it is switched on for (WatchRepository, or
// PollSource.RepoActivity), a cycle reads what changed since the last:
//
//   - the repository's issue events (GET …/issues/events, newest first, up
//     to repoEventPages pages back to the last event handled): labeled,
//     unlabeled, closed and reopened, on issues and pull requests;
//   - the repository's issues and pull requests updated since (GET
//     …/issues?since=…): those created since are "opened";
//   - the repository's comments updated since (GET …/issues/comments?since
//     =…): those created since, on any issue — labelled or not, tracked or
//     not — so a gate's answer or a control command is never lost;
//   - and, when one of those concerns a pull request, the pull-request
//     listing, for its head branch and body (how the router links it).
//
// Each change becomes the payload its webhook carries and goes through
// Router.Route under a synthetic delivery id: the same event filter,
// repository bound, work-item extraction, self-authored drop,
// authorization and control parse as a webhook, and the same content key
// (Event.ContentKey), so a change the webhook already delivered is a
// duplicate here (in the router's window, and in the queue's content
// claims after a restart) and the webhook of a change found here first is
// one there. Changes are offered oldest first; the first the Sink does not
// keep stops the pass, and the cursors move only past what was kept
// (repo-poll/<repo>.json under the state root). The first pass over a
// repository only records where it stands: history is not replayed.
//
// Edits of comments are not offered by this pass (the listing says not who
// edited; an edit never decides), nor are reviews (GitHub lists them per
// pull request only): the per-item pass reads both for labelled items.

// repoEventPages bounds the issue-event pages one pass reads.
const repoEventPages = 3

// repoLedger is one repository's cursors.
type repoLedger struct {
	// EventsNewest is the id of the newest issue event handled.
	EventsNewest int64 `json:"eventsNewest"`
	// CommentsSince and IssuesSince are the since of the next listing
	// (GitHub's updated_at of where the last one stopped).
	CommentsSince string `json:"commentsSince"`
	IssuesSince   string `json:"issuesSince"`
	// Handled are the comments ("c<id>") and items ("i<n>") handled at or
	// after the cursors, with their updated_at: a listing from the cursor
	// (since is inclusive) lists them again.
	Handled map[string]string `json:"handled,omitempty"`
}

// WatchRepository switches the repository pass on or off for repo
// ("owner/repo" or "host/owner/repo"). The daemon switches it on for the
// repositories whose failed deliveries it cannot have redelivered. Not
// safe to call during Reconcile.
func (p *Poller) WatchRepository(repo string, on bool) {
	if p.repoWatch == nil {
		p.repoWatch = map[string]bool{}
	}
	p.repoWatch[strings.ToLower(repo)] = on
}

func (p *Poller) watchesRepo(src PollSource, repo string) bool {
	return src.RepoActivity || p.repoWatch[strings.ToLower(repo)]
}

func (p *Poller) repoLedgerPath(repo string) string {
	slug := strings.NewReplacer("/", "+", "\\", "+", ":", "+").Replace(strings.ToLower(repo))
	return filepath.Join(filepath.Dir(p.d.Store.Dir()), "repo-poll", slug+".json")
}

func (p *Poller) loadRepoLedger(repo string) (*repoLedger, error) {
	b, err := os.ReadFile(p.repoLedgerPath(repo))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var l repoLedger
	if len(b) > maxRecordBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrCorruptRecord, p.repoLedgerPath(repo), maxRecordBytes)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptRecord, p.repoLedgerPath(repo), err)
	}
	return &l, nil
}

func (p *Poller) saveRepoLedger(repo string, l *repoLedger) error {
	path := p.repoLedgerPath(repo)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(l, "", "  ")
	return atomicfile.Replace(path, append(b, '\n'), 0o600)
}

// repoChange is one change found by the pass, in the order it is offered.
type repoChange struct {
	at     string // when it happened (GitHub's time, RFC 3339 UTC)
	order  int    // at one time: opened, then events, then comments
	id     int64
	stream string // "event", "issue", "comment"
	key    string // Handled key (issues, comments)
	upd    string // its updated_at (issues, comments)
	v      graph.Values
}

// repoItem is what the pass knows of one issue or pull request.
type repoItem struct {
	v    graph.Values
	pull graph.Values // the pull-request listing's entry, when read
}

// repoPass runs the repository pass over repo; calls and failed count its
// GitHub calls as Reconcile does.
func (p *Poller) repoPass(ctx context.Context, repo string, st *CycleStats, calls, failed *int) error {
	fail := func(err error) error {
		st.Failures++
		p.emit(EventPollProviderErr, graph.LevelWarning, graph.Field{Key: "repo", Value: repo}, graph.Field{Key: "error", Value: err.Error()})
		if errors.Is(err, errRateLimited) || ctx.Err() != nil {
			return err
		}
		return nil
	}
	led, err := p.loadRepoLedger(repo)
	if err != nil {
		_ = fail(err)
		led = nil // read again from now on; the file is replaced below
	}
	var changes []repoChange
	events, gap, err := p.repoEvents(ctx, repo, led, st, calls, failed)
	if err != nil {
		return fail(err)
	}
	if led == nil {
		// First sight: where it stands now, nothing replayed.
		led = &repoLedger{Handled: map[string]string{}}
		if len(events) > 0 {
			led.EventsNewest = events[0].id
		}
		now := p.d.Clock.Now().UTC().Format(time.RFC3339)
		led.CommentsSince, led.IssuesSince = now, now
		if err := p.saveRepoLedger(repo, led); err != nil {
			return fail(err)
		}
		return nil
	}
	if led.Handled == nil {
		led.Handled = map[string]string{}
	}
	if gap {
		p.emit(EventPollProviderErr, graph.LevelWarning, graph.Field{Key: "repo", Value: repo},
			graph.Field{Key: "error", Value: fmt.Sprintf("more than %d pages of issue events since the last pass; the oldest of them are not offered", repoEventPages)})
	}
	changes = append(changes, events...)

	items := map[int]*repoItem{}
	res, err := p.call(ctx, st, calls, failed, ops.GitHubListRepoIssues, map[string]any{"repo": repo, "since": led.IssuesSince})
	if err != nil {
		return fail(err)
	}
	issuesEnd := led.IssuesSince
	list, _ := res["items"].([]any)
	for _, e := range list {
		v := graph.AsValues(e)
		n, _ := v["number"].(int)
		if n <= 0 {
			continue
		}
		items[n] = &repoItem{v: v}
		upd := v.String("updatedAt")
		issuesEnd = max(issuesEnd, upd)
		key := "i" + strconv.Itoa(n)
		if _, done := led.Handled[key]; done || v.String("createdAt") < led.IssuesSince {
			continue
		}
		changes = append(changes, repoChange{at: v.String("createdAt"), order: 0, id: int64(n), stream: "issue", key: key, upd: upd, v: v})
	}
	res, err = p.call(ctx, st, calls, failed, ops.GitHubListRepoComments, map[string]any{"repo": repo, "since": led.CommentsSince})
	if err != nil {
		return fail(err)
	}
	commentsEnd := led.CommentsSince
	list, _ = res["comments"].([]any)
	for _, e := range list {
		v := graph.AsValues(e)
		id, _ := v["id"].(int)
		upd := v.String("updatedAt")
		commentsEnd = max(commentsEnd, upd)
		key := "c" + strconv.Itoa(id)
		if _, done := led.Handled[key]; done || v.String("createdAt") < led.CommentsSince {
			continue // handled, or an edit of an older comment
		}
		changes = append(changes, repoChange{at: v.String("createdAt"), order: 2, id: int64(id), stream: "comment", key: key, upd: upd, v: v})
	}
	// The pull requests' head branches and bodies, when a change concerns one.
	for _, c := range changes {
		n := c.number()
		if it := items[n]; c.v["isPullRequest"] == true || (it != nil && it.v["isPullRequest"] == true) || strings.Contains(c.v.String("url"), "/pull/") {
			res, err := p.call(ctx, st, calls, failed, ops.GitHubListPulls, map[string]any{"repo": repo, "state": "all"})
			if err != nil {
				return fail(err)
			}
			pulls, _ := res["pulls"].([]any)
			for _, e := range pulls {
				pv := graph.AsValues(e)
				if pn, _ := pv["number"].(int); pn > 0 {
					if items[pn] == nil {
						items[pn] = &repoItem{v: graph.Values{"number": pn, "isPullRequest": true}}
					}
					items[pn].pull = pv
				}
			}
			break
		}
	}
	slices.SortStableFunc(changes, func(a, b repoChange) int {
		return cmp.Or(strings.Compare(a.at, b.at), cmp.Compare(a.order, b.order), cmp.Compare(a.id, b.id))
	})

	// Offer them oldest first; the first not kept stops the pass.
	stopped := -1
	for i, c := range changes {
		if ctx.Err() != nil {
			stopped = i
			break
		}
		if err := p.offerRepoChange(ctx, repo, c, items[c.number()], st); err != nil {
			st.Failures++
			stopped = i
			break
		}
		if c.key != "" {
			led.Handled[c.key] = c.upd
		}
		if c.stream == "event" {
			led.EventsNewest = max(led.EventsNewest, c.id)
		}
	}
	// The cursors: past everything listed, or up to the first change of
	// each stream not offered.
	led.IssuesSince, led.CommentsSince = issuesEnd, commentsEnd
	if stopped >= 0 {
		for _, c := range changes[stopped:] {
			switch c.stream {
			case "issue":
				led.IssuesSince = min(led.IssuesSince, c.upd)
			case "comment":
				led.CommentsSince = min(led.CommentsSince, c.upd)
			case "event":
				led.EventsNewest = min(led.EventsNewest, c.id-1)
			}
		}
	}
	for k, upd := range led.Handled {
		cursor := led.CommentsSince
		if strings.HasPrefix(k, "i") {
			cursor = led.IssuesSince
		}
		if upd < cursor {
			delete(led.Handled, k)
		}
	}
	if err := p.saveRepoLedger(repo, led); err != nil {
		return fail(err)
	}
	return nil
}

func (c repoChange) number() int {
	n, _ := c.v["number"].(int)
	return n
}

// repoEvents lists the issue events newer than the ledger's newest, newest
// first; gap reports that the pages ran out before reaching it. Without a
// ledger it reads one page (the newest id is all the baseline needs).
func (p *Poller) repoEvents(ctx context.Context, repo string, led *repoLedger, st *CycleStats, calls, failed *int) (out []repoChange, gap bool, err error) {
	for page := 1; page <= repoEventPages; page++ {
		res, err := p.call(ctx, st, calls, failed, ops.GitHubListRepoIssueEvents, map[string]any{"repo": repo, "page": page})
		if err != nil {
			return nil, false, err
		}
		list, _ := res["events"].([]any)
		for _, e := range list {
			v := graph.AsValues(e)
			id, _ := v["id"].(int)
			if led != nil && int64(id) <= led.EventsNewest {
				return out, false, nil
			}
			out = append(out, repoChange{at: v.String("createdAt"), order: 1, id: int64(id), stream: "event", v: v})
		}
		if led == nil || res["more"] != true {
			return out, false, nil
		}
	}
	return out, true, nil
}

// offerRepoChange routes one change as its webhook and hands what the
// router admits to the Sink. A change the router drops (unauthorized,
// self-authored, a duplicate of a delivered webhook, an event kind not
// served) is handled: nothing is offered again.
func (p *Poller) offerRepoChange(ctx context.Context, repo string, c repoChange, it *repoItem, st *CycleStats) error {
	name, delivery, payload := p.repoPayload(repo, c, it)
	if name == "" {
		return nil // an event kind no webhook of ours carries
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return nil
	}
	ev, _, err := p.d.Router.Route(name, delivery, body)
	if err != nil || ev == nil {
		return nil // dropped as a webhook would be (the router logged why)
	}
	ev.Source = SourcePoll
	if err := p.put(ctx, ev); err != nil {
		return err
	}
	p.d.Router.Kept(ev)
	if c.stream == "comment" {
		st.CommentsForwarded++
	} else {
		st.RepoChanges++
	}
	return nil
}

// repoPayload is the webhook (event name, delivery id, payload) of one
// change; name "" when no webhook of ours carries it.
func (p *Poller) repoPayload(repo string, c repoChange, it *repoItem) (name, delivery string, payload map[string]any) {
	host, owner, rname := splitRepo(repo)
	web := "https://" + cmp.Or(host, "github.com") + "/" + owner + "/" + rname
	payload = map[string]any{"repository": map[string]any{"full_name": owner + "/" + rname, "html_url": web}}
	v := c.v
	if it != nil && c.stream == "comment" {
		v = it.v // the issue a comment is on, as listed
	}
	n := c.number()
	isPR := v["isPullRequest"] == true || (c.stream == "comment" && strings.Contains(c.v.String("url"), "/pull/"))
	labels := func(adjust string, add bool) []any {
		var out []any
		for _, l := range v.Strings("labels") {
			if !strings.EqualFold(l, adjust) {
				out = append(out, map[string]any{"name": l})
			}
		}
		if add && adjust != "" {
			out = append(out, map[string]any{"name": adjust})
		}
		return out
	}
	entity := func(lbls []any, updated, closed string) map[string]any {
		m := map[string]any{"number": n, "title": v.String("title"), "body": v.String("body"), "html_url": v.String("url"),
			"state": v.String("state"), "user": map[string]any{"login": v.String("author")}, "labels": lbls, "updated_at": updated}
		if m["labels"] == nil {
			m["labels"] = []any{}
		}
		if closed != "" {
			m["closed_at"] = closed
		}
		if isPR && it != nil && it.pull != nil {
			m["head"] = map[string]any{"ref": it.pull.String("headRef"), "sha": it.pull.String("headSha")}
			m["body"] = it.pull.String("body")
			m["merged"] = it.pull["merged"] == true
		}
		return m
	}
	place := func(m map[string]any) {
		if isPR {
			payload["number"], payload["pull_request"] = n, m
			name = KindPullRequest
		} else {
			payload["issue"] = m
			name = KindIssues
		}
	}
	switch c.stream {
	case "issue":
		payload["action"], payload["sender"] = "opened", map[string]any{"login": v.String("author")}
		// Opened with no labels: each label it carries is its own labeled
		// event, as GitHub sends them.
		place(entity(nil, v.String("createdAt"), ""))
		return name, "poll-opened-" + strings.ToLower(repo) + "#" + strconv.Itoa(n), payload
	case "comment":
		issue := entity(labels("", false), "", "")
		if isPR {
			issue["pull_request"] = map[string]any{"html_url": c.v.String("url")}
		}
		payload["action"], payload["issue"] = "created", issue
		payload["sender"] = map[string]any{"login": c.v.String("author")}
		payload["comment"] = map[string]any{"id": c.id, "body": c.v.String("body"), "html_url": c.v.String("url"),
			"user": map[string]any{"login": c.v.String("author")}, "created_at": c.v.String("createdAt"), "updated_at": c.v.String("updatedAt")}
		return KindIssueComment, "poll-comment-" + strconv.FormatInt(c.id, 10), payload
	}
	action := v.String("event")
	label := v.String("label")
	payload["sender"] = map[string]any{"login": v.String("actor")}
	switch action {
	case "labeled", "unlabeled":
		if label == "" {
			return "", "", nil
		}
		payload["label"] = map[string]any{"name": label}
		place(entity(labels(label, action == "labeled"), c.at, ""))
	case "closed":
		m := entity(labels("", false), c.at, c.at)
		m["state"] = "closed"
		if isPR && v["merged"] == true {
			m["merged"] = true
		}
		place(m)
	case "reopened":
		m := entity(labels("", false), c.at, "")
		m["state"] = "open"
		place(m)
	default:
		return "", "", nil // merged (its closed event carries it), assigned, …
	}
	payload["action"] = action
	return name, "poll-event-" + strconv.FormatInt(c.id, 10), payload
}
