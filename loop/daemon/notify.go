package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// loopd's own notifications (docs/daemon.md §11.3): four of its events —
// a session spawned, a session found dead, a dispatch that failed, an
// unauthorized event dropped — told to the operator's collaborators whose
// roles cli-config.yaml's notifications.events names, through the
// configured channels (Slack; a marked comment on the ticket).
//
// The notifier is a sink on loopd's one event stream: what it tells is
// what the event log says happened, after it was written. Emit never
// blocks: notices wait in a bounded queue for one worker; a full queue
// drops the notice and counts it. A stranger can make loopd drop events
// at will, so every (event, work item) pair is told at most once per
// notifyInterval, and dropped events at most once per interval in all,
// with the count since the last notice.

const (
	// notifyInterval is the least time between two notices of one event
	// for one work item (and between two notices of dropped events).
	notifyInterval = time.Minute
	// notifyQueue bounds the notices waiting to be sent.
	notifyQueue = 64
	// notifyTimeout bounds one notice's delivery, every channel included.
	notifyTimeout = 30 * time.Second
	// notifyMemory bounds the (event, item) pairs remembered for the
	// interval; beyond it the oldest are forgotten.
	notifyMemory = 4096
)

// notice is one notification to send.
type notice struct {
	event string
	item  workitem.Ref
	// detail is loopd's own wording of what happened (never payload text).
	detail string
	// count is how many events this notice stands for (dropped events).
	count int
}

type notifier struct {
	cfg   loop.DaemonNotifications
	now   func() time.Time
	send  func(ctx context.Context, n notice)
	queue chan notice

	mu      sync.Mutex
	last    map[string]time.Time
	pending map[string]int // events held back by the interval, by key
	lost    int            // notices dropped on a full queue
	closed  bool

	stop chan struct{}
	done chan struct{}
}

// newNotifier starts the worker; Close stops it. With nothing to notify
// (disabled, or no event names a role) it returns nil, which is a valid
// sink that does nothing.
func newNotifier(cfg loop.DaemonNotifications, now func() time.Time, send func(context.Context, notice)) *notifier {
	if !cfg.Enabled || len(cfg.Events) == 0 {
		return nil
	}
	n := &notifier{cfg: cfg, now: now, send: send, queue: make(chan notice, notifyQueue),
		last: map[string]time.Time{}, pending: map[string]int{}, stop: make(chan struct{}), done: make(chan struct{})}
	go n.run()
	return n
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		select {
		case <-n.stop:
			return
		case nt := <-n.queue:
			ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
			n.send(ctx, nt)
			cancel()
		}
	}
}

// Close stops the worker after the notice being sent; waiting notices are
// dropped (they are in the event log).
func (n *notifier) Close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.mu.Unlock()
	close(n.stop)
	<-n.done
}

// classify maps an event-log event onto a notification event ("" when it
// is none of the four), with the work item and loopd's wording.
func classify(e graph.LogEvent) (event string, item workitem.Ref, detail string) {
	var ref, reason, ghEvent, actor string
	for _, f := range e.Fields {
		switch f.Key {
		case "work_item":
			ref, _ = f.Value.(string)
		case "reason":
			reason, _ = f.Value.(string)
		case "gh_event":
			ghEvent, _ = f.Value.(string)
		case "actor":
			actor, _ = f.Value.(string)
		}
	}
	if r, err := workitem.Parse(ref); err == nil {
		item = r
	}
	switch e.Name {
	case "dispatch.spawned":
		return loop.NotifyWorkItemSpawned, item, "loopd started a session for it"
	case "session.liveness_respawned":
		return loop.NotifySessionDied, item, "its session's harness died; loopd started it again"
	case "session.liveness_gave_up":
		return loop.NotifySessionDied, item, "its session's harness died again and loopd gave up restarting it"
	case "dispatch.failed":
		return loop.NotifyDispatchFailed, item, "an event could not be delivered to its session (loopd's event log has the error)"
	case ingress.EventDropped:
		// Only what a person said (a comment, a review) is worth telling:
		// with a token, loopd's own label changes come back as events of
		// an actor it cannot tell from a stranger.
		// The table names the kinds that carry a person's words, with
		// the noun a notice names each by.
		if noun := ingress.KindOf(ghEvent).Noun; reason == string(ingress.DropUnauthorized) && noun != "" {
			who := "someone not authorized"
			if plainLogin(actor) {
				who = "@" + actor + ", who is not authorized,"
			}
			return loop.NotifyEventDroppedUnauthorized, item, fmt.Sprintf("a %s from %s was dropped", noun, who)
		}
	}
	return "", item, ""
}

// plainLogin reports whether s has the shape of a GitHub login, so a
// notice may name it (anything else in the field is not repeated).
func plainLogin(s string) bool {
	if s == "" || len(s) > 39 || s[0] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// Emit implements graph.Sink.
func (n *notifier) Emit(e graph.LogEvent) {
	if n == nil {
		return
	}
	event, item, detail := classify(e)
	if event == "" || len(n.cfg.Events[event]) == 0 {
		return
	}
	key := event + " " + item.String()
	if event == loop.NotifyEventDroppedUnauthorized {
		key = event // a flood across items is one stream of notices
	}
	now := n.now()
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	if t, ok := n.last[key]; ok && now.Sub(t) < notifyInterval {
		n.pending[key]++
		n.mu.Unlock()
		return
	}
	if len(n.last) >= notifyMemory {
		for k, t := range n.last {
			if now.Sub(t) >= notifyInterval || len(n.last) >= notifyMemory {
				delete(n.last, k)
				delete(n.pending, k)
			}
		}
	}
	n.last[key] = now
	count := 1 + n.pending[key]
	delete(n.pending, key)
	nt := notice{event: event, item: item, detail: detail, count: count}
	select {
	case n.queue <- nt:
	default:
		n.lost++
	}
	n.mu.Unlock()
}

// text is the notice as loopd words it: the event, the work item, what
// happened and who is told. Only loopd's vocabulary, a validated ref and
// the operator's own collaborator entries reach it.
func (n *notifier) text(nt notice, mention func(loop.Collaborator) string) string {
	roles, people := n.cfg.Recipients(nt.event)
	var b strings.Builder
	fmt.Fprintf(&b, "the-loop (loopd): %s", nt.event)
	if !nt.item.IsZero() {
		fmt.Fprintf(&b, " for %s", nt.item)
	}
	fmt.Fprintf(&b, ": %s", nt.detail)
	if nt.count > 1 {
		fmt.Fprintf(&b, " (%d times since the last notice)", nt.count)
	}
	fmt.Fprintf(&b, ". Roles: %s", strings.Join(roles, ", "))
	if len(people) > 0 {
		ms := make([]string, len(people))
		for i, p := range people {
			ms[i] = mention(p)
		}
		b.WriteString(" — " + strings.Join(ms, " "))
	}
	return b.String()
}

func slackMention(p loop.Collaborator) string {
	if p.Slack != "" {
		return "<@" + p.Slack + ">"
	}
	return "@" + p.Login
}

func githubMention(p loop.Collaborator) string { return "@" + p.Login }

// sendNotice delivers one notice through every configured channel and
// records each outcome (notify.sent, notify.failed) on the event log.
func (d *Daemon) sendNotice(ctx context.Context, nt notice) {
	n := d.notifier
	record := func(channel string, err error) {
		fields := []graph.Field{{Key: "event", Value: nt.event}, {Key: "channel", Value: channel}}
		if !nt.item.IsZero() {
			fields = append(fields, graph.Field{Key: "work_item", Value: nt.item.String()})
		}
		if err != nil {
			d.emit("notify.failed", graph.LevelWarning, append(fields, graph.Field{Key: "error", Value: err.Error()})...)
			return
		}
		d.emit("notify.sent", graph.LevelInfo, fields...)
	}
	if n.cfg.Uses(loop.NotifyChannelSlack) {
		text := n.text(nt, slackMention)
		_, err := d.integ.Call(ctx, ops.SlackPostMessage, map[string]any{"text": text, "event": nt.event})
		if (errors.Is(err, graph.ErrUnsupportedOperation) || errors.Is(err, integrations.ErrProviderUnavailable)) && d.slack != nil {
			err = d.slack.PostNotice(ctx, nt.item, text)
		}
		record(loop.NotifyChannelSlack, err)
	}
	// A dropped event's notice never goes onto the ticket: whoever sent
	// it would have loopd copy their noise there.
	if n.cfg.Uses(loop.NotifyChannelTicket) && !nt.item.IsZero() && nt.event != loop.NotifyEventDroppedUnauthorized {
		body := hooks.Mark(n.text(nt, githubMention))
		_, err := d.integ.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": nt.item.String(), "body": body})
		record(loop.NotifyChannelTicket, err)
	}
}

var _ graph.Sink = (*notifier)(nil)
