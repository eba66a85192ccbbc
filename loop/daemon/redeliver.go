package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/ops"
)

// No event lost to a 503 or to downtime.
//
// GitHub does not retry a failed delivery by itself; it lists a hook's
// deliveries and redelivers one on request. The redelivery pass (run with
// the reconcile pass, at start and every ReconcileInterval) lists, per
// served repository and hook, the deliveries newer than the last it saw,
// and asks GitHub to redeliver each one that no attempt answered 2xx —
// every failed attempt once: the request is recorded durably (the queue's
// handled bucket) before it is made. A redelivery can fail too (the proxy
// in front of loopd still answers 503; loopd is down again): its attempt
// is a new one of the same delivery, and it is asked for again, after a
// doubling back-off (the reconcile interval, then twice that, …), up to
// redeliverAsksPerDelivery asks; past that the pass gives up on the
// delivery and says so (reconcile.redelivery_gave_up, with its guid, for
// an operator to redeliver by hand). A pass makes at most
// redeliverCallsPerPass requests and stops at a rate limit; what it did not
// reach, and a failed redelivery whose back-off has not passed, wait for a
// later pass (the last-seen mark moves only past what was handled).
//
// The hook is Config.WebhookHookID when set, else the served repository's
// hooks and their owners' organization hooks whose URL path is the
// receiver's (webhooks.ghWebhook.path). Where loopd may not read a
// repository's hooks, the pass says so once (the first pass runs at start)
// and the poller's repository pass (ingress/poll_repo.go) reads the
// repository's activity instead — for every repository whose own and whose
// owner's hooks the pass could not read; an owner that is a user, not an
// organization, has no organization hooks and is passed over quietly.
// When loopd authenticates as a GitHub App, the App's own hook is asked
// too (/app/hook/deliveries, with the App's JWT): it delivers the events of
// every repository the App is installed on.

// Redelivery pass bounds.
const (
	redeliverCallsPerPass = 30
	redeliverPagesPerHook = 3
	// redeliverAsksPerDelivery bounds the asks for one delivery: with the
	// back-off doubling from a 30 s reconcile interval, eight asks span an
	// outage of about two hours.
	redeliverAsksPerDelivery = 8
)

// redeliverer is the redelivery pass's state. It is used by one goroutine
// (the reconcile loop).
type redeliverer struct {
	integ  graph.Integrations
	store  intentStore
	repos  []string
	hookID int64
	// app: loopd authenticates as a GitHub App, whose own webhook
	// (/app/hook/deliveries, with the App's JWT) is asked too.
	app    bool
	path   string
	record emitFunc
	now    func() time.Time
	// backoff is the wait before a delivery whose redelivery failed is
	// asked for again; it doubles with each ask (the reconcile interval).
	backoff time.Duration

	reported map[string]bool // repositories whose hooks could not be read, reported
	// coverage is, per scope (hookScope.String), whether the last pass
	// that reached it read the deliveries of at least one of its hooks:
	// a repository neither its own scope nor its owner's covers has its
	// failed deliveries found by the poller's repository pass instead.
	coverage map[string]bool
}

// covers reports whether the failed deliveries of repo can be redelivered
// (as far as the passes so far could tell).
func (rd *redeliverer) covers(repo string) bool {
	if rd.coverage[repo] {
		return true
	}
	owner, _, ok := strings.Cut(repo, "/")
	return (ok && rd.coverage["org:"+strings.ToLower(owner)]) || rd.coverage[appScope.String()]
}

// appScope is the App's own webhook, which receives the events of every
// repository the App is installed on.
var appScope = hookScope{"app", "app"}

func (rd *redeliverer) cover(sc hookScope, ok bool) {
	if rd.coverage == nil {
		rd.coverage = map[string]bool{}
	}
	rd.coverage[sc.String()] = ok
}

// redeliveryStats is what one pass did.
type redeliveryStats struct {
	Calls, Listed, Failed, Asked, AlreadyAsked, Deferred, GaveUp int
	Stopped                                                      string `json:",omitempty"`
}

type hookCursor struct {
	Newest int64 `json:"newest"` // the newest attempt id handled
}

// hookScope is where hooks live: a repository ("repo") or an organization
// ("org"), as the hook operations take it.
type hookScope struct{ key, name string }

func (h hookScope) args() map[string]any {
	if h.key == "app" {
		return map[string]any{"app": true}
	}
	return map[string]any{h.key: h.name}
}

// String names the scope in records and cursors ("o/r", "org:o").
func (h hookScope) String() string {
	if h.key == "org" {
		return "org:" + h.name
	}
	return h.name
}

// scopes are the served repositories and, when the hook is found by
// listing, their owners as organizations (a repository named with its host
// has none here: the organization operations go to the default host).
func (rd *redeliverer) scopes() []hookScope {
	var out, orgs []hookScope
	seen := map[string]bool{}
	for _, repo := range rd.repos {
		out = append(out, hookScope{"repo", repo})
		parts := strings.Split(repo, "/")
		if rd.hookID != 0 || len(parts) != 2 {
			continue
		}
		if owner := strings.ToLower(parts[0]); !seen[owner] {
			seen[owner] = true
			orgs = append(orgs, hookScope{"org", owner})
		}
	}
	out = append(out, orgs...)
	if rd.app && rd.hookID == 0 {
		out = append(out, appScope)
	}
	return out
}

func (rd *redeliverer) pass(ctx context.Context) redeliveryStats {
	var st redeliveryStats
	for _, sc := range rd.scopes() {
		if st.Stopped != "" {
			break
		}
		hooks, err := rd.hooks(ctx, sc, &st)
		if sc.key == "org" && errors.Is(err, integrations.ErrNotFound) {
			rd.cover(sc, false)
			continue // a user's repositories: no organization hooks
		}
		if err != nil {
			if errors.Is(err, integrations.ErrRateLimited) {
				st.Stopped = "rate-limited" // not reached: its coverage stays as it was
			} else {
				rd.cover(sc, false)
			}
			rd.unavailable(sc.String(), err)
			continue
		}
		covered := false
		for _, h := range hooks {
			if st.Stopped != "" {
				break
			}
			if err := rd.hook(ctx, sc, h, &st); err != nil {
				if errors.Is(err, integrations.ErrRateLimited) {
					st.Stopped = "rate-limited"
				}
				rd.unavailable(sc.String(), err)
				continue
			}
			covered = true
		}
		if st.Stopped == "" || covered {
			rd.cover(sc, covered)
		}
	}
	return st
}

// unavailable reports, once per repository, that its deliveries cannot be
// read or redelivered.
func (rd *redeliverer) unavailable(repo string, err error) {
	if rd.reported[repo] {
		return
	}
	rd.reported[repo] = true
	hint := "the poller's repository pass brings the comments, labels, openings and closings of its issues and pull requests instead; give the token admin:repo_hook (read and write) — an App, webhooks read and write — to have failed deliveries redelivered"
	rd.record("reconcile.redelivery_unavailable", graph.LevelWarning, graph.Field{Key: "repo", Value: repo},
		graph.Field{Key: "error", Value: err.Error()}, graph.Field{Key: "hint", Value: hint})
}

// hooks are the hooks to look at in repo.
func (rd *redeliverer) hooks(ctx context.Context, sc hookScope, st *redeliveryStats) ([]int64, error) {
	if rd.hookID > 0 {
		return []int64{rd.hookID}, nil
	}
	if sc.key == "app" {
		return []int64{0}, nil // the App has one hook, named by no id
	}
	st.Calls++
	res, err := rd.integ.Call(ctx, ops.GitHubListHooks, sc.args())
	if err != nil {
		return nil, err
	}
	var out []int64
	hs, _ := res["hooks"].([]any)
	for _, h := range hs {
		m, _ := h.(map[string]any)
		id, _ := m["id"].(int)
		u, _ := m["url"].(string)
		active, _ := m["active"].(bool)
		if pu, err := url.Parse(u); err == nil && active && id > 0 && strings.TrimRight(pu.Path, "/") == strings.TrimRight(rd.path, "/") {
			out = append(out, int64(id))
		}
	}
	return out, nil
}

// hook lists hook's deliveries in repo newer than the last seen, and asks
// for the redelivery of each that failed.
func (rd *redeliverer) hook(ctx context.Context, sc hookScope, hook int64, st *redeliveryStats) error {
	repo := sc.String()
	ckey := fmt.Sprintf("hook-cursor %s %d", strings.ToLower(repo), hook)
	var seen hookCursor
	if raw, ok, err := rd.store.Intent(ctx, ckey); err != nil {
		return err
	} else if ok {
		_ = json.Unmarshal(raw, &seen)
	}
	type attempt struct {
		id     int64
		guid   string
		ok     bool
		status int
	}
	var attempts []attempt // newest first
	cursor, reachedSeen := "", false
	for page := 0; page < redeliverPagesPerHook && !reachedSeen && st.Calls < redeliverCallsPerPass; page++ {
		st.Calls++
		args := sc.args()
		args["hookId"] = int(hook)
		if cursor != "" {
			args["cursor"] = cursor
		}
		res, err := rd.integ.Call(ctx, ops.GitHubListHookDeliveries, args)
		if err != nil {
			return err
		}
		ds, _ := res["deliveries"].([]any)
		for _, d := range ds {
			m, _ := d.(map[string]any)
			id, _ := m["id"].(int)
			if int64(id) <= seen.Newest {
				reachedSeen = true
				break
			}
			code, _ := m["statusCode"].(int)
			guid, _ := m["guid"].(string)
			attempts = append(attempts, attempt{id: int64(id), guid: guid, ok: code/100 == 2, status: code})
		}
		st.Listed += len(ds)
		if cursor, _ = res["cursor"].(string); cursor == "" {
			break
		}
	}
	if len(attempts) == 0 {
		return nil
	}
	// A delivery is done with once any attempt was answered 2xx; otherwise
	// its newest attempt is the one to ask for (an older one was asked for
	// already, or is superseded by a redelivery that failed).
	delivered := map[string]bool{}
	newest := map[string]int64{}
	for _, a := range attempts {
		if a.ok {
			delivered[a.guid] = true
		}
		newest[a.guid] = max(newest[a.guid], a.id)
	}
	// Oldest first, so that the mark can move up to the last one handled;
	// a delivery asked for later holds the mark before it (the later ones
	// are listed again and found asked for).
	handled := seen.Newest
	held := false
	for i := len(attempts) - 1; i >= 0; i-- {
		a := attempts[i]
		if !a.ok && !delivered[a.guid] && a.id == newest[a.guid] {
			st.Failed++
			if st.Calls >= redeliverCallsPerPass {
				break
			}
			later, err := rd.ask(ctx, sc, hook, a.id, a.guid, a.status, st)
			if err != nil {
				if errors.Is(err, integrations.ErrRateLimited) {
					st.Stopped = "rate-limited"
				}
				rd.record("reconcile.redelivery_failed", graph.LevelWarning, graph.Field{Key: "repo", Value: repo},
					graph.Field{Key: "hook_id", Value: hook}, graph.Field{Key: "delivery_id", Value: a.guid}, graph.Field{Key: "error", Value: err.Error()})
				break
			}
			held = held || later
		}
		if !held {
			handled = a.id
		}
	}
	if handled == seen.Newest {
		return nil
	}
	b, _ := json.Marshal(hookCursor{Newest: handled})
	return rd.store.PutIntent(ctx, ckey, b)
}

// redeliveryAsk is what the pass recorded of the asks for one delivery.
type redeliveryAsk struct {
	Repo    string    `json:"repo"`
	HookID  int64     `json:"hookId"`
	Attempt int64     `json:"attempt"` // the failed attempt last asked for
	At      time.Time `json:"at"`
	// Asks counts them (records written before asks were counted: one).
	Asks   int  `json:"asks,omitempty"`
	GaveUp bool `json:"gaveUp,omitempty"`
}

// ask records, then requests, the redelivery of one failed attempt — once
// per attempt, whatever happens after. A delivery asked for before (its
// redelivery failed: a newer attempt) is asked again once its back-off has
// passed (later: not yet; the caller keeps the attempt for a later pass),
// up to redeliverAsksPerDelivery asks.
func (rd *redeliverer) ask(ctx context.Context, sc hookScope, hook, attempt int64, guid string, status int, st *redeliveryStats) (later bool, err error) {
	repo := sc.String()
	key := "redeliver " + guid
	rec := redeliveryAsk{Repo: repo, HookID: hook, Attempt: attempt, At: rd.now().UTC(), Asks: 1}
	raw, ok, err := rd.store.Intent(ctx, key)
	if err != nil {
		return false, err
	}
	if ok {
		var prev redeliveryAsk
		_ = json.Unmarshal(raw, &prev)
		asks := max(prev.Asks, 1)
		switch {
		case prev.GaveUp || attempt <= prev.Attempt:
			st.AlreadyAsked++
			return false, nil
		case asks >= redeliverAsksPerDelivery:
			prev.GaveUp = true
			b, _ := json.Marshal(prev)
			if err := rd.store.PutIntent(ctx, key, b); err != nil {
				return false, err
			}
			st.GaveUp++
			rd.record("reconcile.redelivery_gave_up", graph.LevelWarning, graph.Field{Key: "repo", Value: repo}, graph.Field{Key: "hook_id", Value: hook},
				graph.Field{Key: "delivery_id", Value: guid}, graph.Field{Key: "asks", Value: asks}, graph.Field{Key: "status_code", Value: status},
				graph.Field{Key: "hint", Value: "every redelivery GitHub made of it failed too: redeliver it from the hook's Recent Deliveries once loopd answers"})
			return false, nil
		case rd.now().Before(prev.At.Add(rd.backoff << (asks - 1))):
			st.Deferred++
			return true, nil
		}
		rec.Asks = asks + 1
	}
	b, _ := json.Marshal(rec)
	if err := rd.store.PutIntent(ctx, key, b); err != nil {
		return false, err
	}
	st.Calls++
	args := sc.args()
	args["hookId"], args["deliveryId"] = int(hook), int(attempt)
	if _, err := rd.integ.Call(ctx, ops.GitHubRedeliverHookDelivery, args); err != nil {
		return false, err
	}
	st.Asked++
	rd.record("reconcile.redelivery_requested", graph.LevelInfo, graph.Field{Key: "repo", Value: repo}, graph.Field{Key: "hook_id", Value: hook},
		graph.Field{Key: "delivery_id", Value: guid}, graph.Field{Key: "attempt", Value: strconv.FormatInt(attempt, 10)}, graph.Field{Key: "status_code", Value: status},
		graph.Field{Key: "ask", Value: rec.Asks})
	return false, nil
}
