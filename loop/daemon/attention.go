package daemon

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/dashboard"
)

// The open questions for the dashboard's "needs you": `loopctl ask`, run
// by the agent inside its session, logs session.awaiting_input (with the
// question) in the checkout's event log. A question is open until text
// next reaches the session (the session record's LastDelivery: a comment
// on the ticket delivered to it, or an operator's reply). Each checkout's
// log is re-read only when it changed (size and modification time).

type askCacheEntry struct {
	size int64
	mod  time.Time
	q    *dashboard.Question // the newest question in the log (nil: none)
}

// askCache keeps each checkout log's newest question (its zero value is
// ready to use).
type askCache struct {
	mu sync.Mutex
	m  map[string]askCacheEntry
}

// Questions implements dashboard.QuestionSource.
func (s *dashSource) Questions(ctx context.Context) ([]dashboard.Question, error) {
	recs, _ := s.d.reg.List()
	var out []dashboard.Question
	for _, rec := range recs {
		if ctx.Err() != nil {
			break
		}
		if rec.Cwd == "" || !rec.Parent.IsZero() || !rec.Status.Live() {
			continue
		}
		q := s.asks.newest(loop.CheckoutEventLogPath(rec.Cwd), rec.Item.String())
		// The record keeps whole seconds: a delivery in the question's own
		// second counts as after it (the agent asks about what it was
		// given, not in the same second).
		if q == nil || !q.At.Truncate(time.Second).After(rec.LastDelivery) {
			continue
		}
		out = append(out, *q)
	}
	return out, nil
}

func (c *askCache) newest(path, ref string) *dashboard.Question {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	c.mu.Lock()
	e, ok := c.m[path]
	c.mu.Unlock()
	if ok && e.size == fi.Size() && e.mod.Equal(fi.ModTime()) {
		return e.q
	}
	recs, err := loop.ReadEvents(path, loop.EventQuery{WorkItem: ref, Event: "session.awaiting_input"})
	e = askCacheEntry{size: fi.Size(), mod: fi.ModTime()}
	if err == nil && len(recs) > 0 {
		r := recs[len(recs)-1]
		text, _ := r.Get("question")
		s, _ := text.(string)
		e.q = &dashboard.Question{Ref: ref, Text: s, At: r.Time}
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) > 10000 {
		c.m = map[string]askCacheEntry{}
	}
	c.m[path] = e
	c.mu.Unlock()
	return e.q
}

var _ dashboard.QuestionSource = (*dashSource)(nil)
