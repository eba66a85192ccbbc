package daemon

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// Branch-linkage verification (docs/daemon.md §6.2). A ref found only through
// the issue-<n> branch convention is a guess: a branch named
// feature/issue-123-x may have been cut for an issue that never existed
// (or lives in another repository). Before such a guess can spawn a
// session, the daemon asks GitHub — through the configured integrations
// client, api or cli transport — whether the issue exists. A definite "no"
// (404) drops the ref; anything else (an outage, a 403, a timeout, no
// credentials) keeps it, since refusing real work on a hiccup is worse than
// the rare ghost.

const (
	// linkageCacheSize bounds the remembered definite answers.
	linkageCacheSize = 256
	// linkageTimeout bounds one existence check.
	linkageTimeout = 10 * time.Second
)

// linkageCache remembers definite answers (exists or missing) per ref,
// least recently used first out. Safe for concurrent use.
type linkageCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // of string keys, front = most recent
	items map[string]*list.Element
	vals  map[string]bool
}

func newLinkageCache(max int) *linkageCache {
	return &linkageCache{max: max, order: list.New(), items: map[string]*list.Element{}, vals: map[string]bool{}}
}

// get returns the remembered answer for key.
func (c *linkageCache) get(key string) (exists, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[key]
	if !ok {
		return false, false
	}
	c.order.MoveToFront(e)
	return c.vals[key], true
}

// put remembers a definite answer.
func (c *linkageCache) put(key string, exists bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.order.MoveToFront(e)
		c.vals[key] = exists
		return
	}
	c.items[key] = c.order.PushFront(key)
	c.vals[key] = exists
	for c.order.Len() > c.max {
		last := c.order.Back()
		k := last.Value.(string)
		c.order.Remove(last)
		delete(c.items, k)
		delete(c.vals, k)
	}
}

func (c *linkageCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// issueExists asks GitHub whether the ref's issue (or PR) exists. known is
// false when the answer was not definite (keep the ref).
func (in *intake) issueExists(ctx context.Context, r workitem.Ref) (exists, known bool) {
	key := linkKey(r)
	if v, ok := in.links.get(key); ok {
		return v, true
	}
	cctx, cancel := context.WithTimeout(ctx, linkageTimeout)
	defer cancel()
	_, err := in.integ.Call(cctx, ops.GitHubGetIssue, map[string]any{"ref": r.String()})
	switch {
	case err == nil:
		in.links.put(key, true)
		return true, true
	case errors.Is(err, integrations.ErrNotFound):
		in.links.put(key, false)
		return false, true
	}
	return false, false
}

// markMissing records that the ref's issue does not exist (a 404 seen
// elsewhere, such as on the announcement).
func (in *intake) markMissing(r workitem.Ref) { in.links.put(linkKey(r), false) }

// verifyLinkage removes the event's branch-only refs whose issue GitHub
// says does not exist, reporting each as routing.linkage_dropped. It checks
// nothing when one of the event's refs already has a live session (the
// event is that session's). It reports whether any ref was removed.
func (in *intake) verifyLinkage(ctx context.Context, ev *ingress.Event) bool {
	if len(ev.BranchOnly) == 0 {
		return false
	}
	for _, r := range ev.WorkItems {
		if item, ok := in.ownerOf(r); ok {
			if _, live := in.live(item); live {
				return false
			}
		}
	}
	removed := false
	for _, weak := range ev.BranchOnly {
		if weak.Provider != "github" {
			continue
		}
		exists, known := in.issueExists(ctx, weak)
		if !known || exists {
			continue
		}
		kept := ev.WorkItems[:0:0]
		for _, r := range ev.WorkItems {
			if linkKey(r) != linkKey(weak) {
				kept = append(kept, r)
			}
		}
		if len(kept) == len(ev.WorkItems) {
			continue
		}
		ev.WorkItems = kept
		removed = true
		in.record("routing.linkage_dropped", graph.LevelInfo, graph.Field{Key: "work_item", Value: weak.String()},
			graph.Field{Key: "delivery_id", Value: ev.DeliveryID}, graph.Field{Key: "gh_event", Value: ev.Event},
			graph.Field{Key: "reason", Value: "work-item-not-found"})
	}
	return removed
}
