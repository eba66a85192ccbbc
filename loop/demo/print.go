package demo

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/integrations/githubsim"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon"
)

// printer serialises the narration from the observer, the stand-in and the
// event-log tail, each line stamped with the time since the start.
type printer struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

func newPrinter(out io.Writer) *printer { return &printer{out: out, start: time.Now()} }

// prompt prints a question without a newline.
func (p *printer) prompt(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, format, args...)
}

// say prints a plain line.
func (p *printer) say(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, format+"\n", args...)
}

// line prints a stamped line: who did what.
func (p *printer) line(who, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, "%6.1fs  %-8s %s\n", time.Since(p.start).Seconds(), who, fmt.Sprintf(format, args...))
}

// block prints text indented under the last line, at most max lines.
func (p *printer) block(text string, max int) {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, l := range lines {
		if i == max {
			fmt.Fprintf(p.out, "%18s│ … (%d more lines)\n", "", len(lines)-max)
			break
		}
		fmt.Fprintf(p.out, "%18s│ %s\n", "", l)
	}
}

// onDelivery prints each webhook the stand-in sends, with loopd's answer.
func (w *world) onDelivery(d githubsim.Delivery) {
	if d.Event == integrations.EventPing {
		return
	}
	what := d.Event
	if d.Action != "" {
		what += "." + d.Action
	}
	var body struct {
		Label *struct {
			Name string `json:"name"`
		} `json:"label"`
	}
	if json.Unmarshal(d.Body, &body) == nil && body.Label != nil {
		what += fmt.Sprintf(" %q", body.Label.Name)
	}
	answer := fmt.Sprintf("loopd answered %d", d.Status)
	w.mu.Lock()
	why, dropped := w.routedAway[d.ID]
	kept := w.kept[d.ID]
	delete(w.kept, d.ID)
	w.mu.Unlock()
	switch {
	case d.Status/100 != 2:
	case dropped:
		answer += ", not queued: " + explain(why)
	case kept:
		answer += ", queued"
	default:
		answer += ", not queued: the queue already holds this delivery"
	}
	switch {
	case d.Err != "":
		answer = "not delivered: " + d.Err
	case d.Dropped:
		answer = "dropped at shutdown"
	}
	w.p.line("webhook", "%s by %s → %s (delivery %.8s…, signed)", what, d.Sender, answer, d.ID)
}

// onRequest prints what theloop — the daemon or the agent's claims — does
// to the ticket through the REST API: comments, labels, reactions.
func (w *world) onRequest(r githubsim.Request) {
	if r.Status/100 != 2 || !strings.HasPrefix(r.Path, "/repos/"+RepoFull+"/issues/") {
		return
	}
	switch {
	case r.Method == "POST" && strings.HasSuffix(r.Path, "/comments"):
		var in struct {
			Body string `json:"body"`
		}
		text := "(a long comment)"
		if json.Unmarshal([]byte(r.Body), &in) == nil {
			text = firstLine(in.Body)
		}
		// A comment posted with a person's token (the dashboard's gate
		// buttons post as its operator) is that person's, not theloop's.
		by := "theloop"
		if r.User != "" {
			by = r.User + " (from the dashboard)"
		}
		w.p.line("comment", "%s → #%d: %s", by, issueNum, text)
	case r.Method == "POST" && strings.HasSuffix(r.Path, "/labels"):
		var in struct {
			Labels []string `json:"labels"`
		}
		if json.Unmarshal([]byte(r.Body), &in) == nil {
			w.p.line("labels", "theloop → #%d: + %s", issueNum, strings.Join(in.Labels, ", "))
		}
	case r.Method == "DELETE" && strings.Contains(r.Path, "/labels/"):
		name := r.Path[strings.LastIndex(r.Path, "/")+1:]
		if u, err := url.PathUnescape(name); err == nil {
			name = u
		}
		w.p.line("labels", "theloop → #%d: − %s", issueNum, name)
	case r.Method == "POST" && strings.HasSuffix(r.Path, "/reactions"):
		var in struct {
			Content string `json:"content"`
		}
		if json.Unmarshal([]byte(r.Body), &in) == nil {
			on := "the issue"
			if strings.Contains(r.Path, "/comments/") {
				on = "a comment"
			}
			w.p.line("reaction", "theloop → #%d: %s on %s", issueNum, in.Content, on)
		}
	}
}

// observe prints what the daemon reports: pastes, sessions, control.
// Transitions come from the event log (the agent's claims are made in its
// own process and reach the log, not this observer).
func (w *world) observe(o daemon.Observation) {
	switch o.Kind {
	case daemon.KindWebhook:
		// Kept by the queue, before the receiver answers.
		w.mu.Lock()
		w.kept[o.DeliveryID] = true
		w.mu.Unlock()
	case daemon.KindPaste:
		w.mu.Lock()
		w.res.Pastes++
		w.mu.Unlock()
		target, _ := o.Fields["tmux_target"].(string)
		w.p.line("paste", "→ tmux %s: %s (%d lines)", target, o.Name, strings.Count(strings.TrimRight(o.Text, "\n"), "\n")+1)
		max := 6
		if o.Name == "graph.assignment" {
			max = 12
		}
		w.p.block(o.Text, max)
	case daemon.KindSpawn:
		switch o.Name {
		case "session.spawned", "session.respawned", "session.closed":
			target, _ := o.Fields["tmux_target"].(string)
			w.p.line("session", "%s %s", strings.TrimPrefix(o.Name, "session."), target)
			if o.Name == "session.spawned" {
				w.showAttach()
			}
		}
	case daemon.KindEvent:
		reason, _ := o.Fields["reason"].(string)
		switch o.Name {
		case "routing.dropped":
			// Seen before the receiver answers: the delivery's line says it.
			w.mu.Lock()
			w.routedAway[o.DeliveryID] = reason
			w.mu.Unlock()
			return
		case "dispatch.dropped":
			// The intake says why; the dispatcher's own record of the same
			// drop carries no reason.
			if reason != "" {
				w.p.line("loopd", "drops delivery %.8s…: %s", o.DeliveryID, explain(reason))
			}
			return
		}
		if strings.HasPrefix(o.Name, "control.") || strings.HasPrefix(o.Name, "dispatch.dead") {
			w.p.line("loopd", "%s %s", o.Name, fieldsText(o.Fields, "command", "effect", "reason"))
		}
		if e, ok := o.Fields["error"].(string); ok && e != "" {
			w.p.line("loopd", "%s: %s", o.Name, e)
		}
	}
}

func (w *world) showAttach() {
	w.mu.Lock()
	shown := w.attachShown
	w.attachShown = true
	w.mu.Unlock()
	if !shown {
		w.p.say("\n  ▶ watch the agent work:  %s\n    (detach with Ctrl-b d; the demo goes on either way)\n", w.attach())
	}
}

// onEvent prints graph transitions from the shared event log: the daemon's
// (source loopd) and the agent's claims (source cli).
func (w *world) onEvent(rec loop.EventRecord) {
	if rec.Source == "loopd" && strings.HasPrefix(rec.Event, "outbox.") {
		w.onOutbox(rec)
		return
	}
	who := map[string]string{"loopd": "graph", "cli": "graph"}[rec.Source]
	if who == "" || !strings.HasPrefix(rec.Event, "graph.") {
		return
	}
	by := "daemon"
	if rec.Source == "cli" {
		by = "agent's claim"
	} else if v, _ := rec.Get("basis"); v == "recompute" {
		by = "loopd's recompute"
	}
	get := func(k string) string {
		v, _ := rec.Get(k)
		if v == nil {
			return ""
		}
		if l, ok := v.([]any); ok {
			var s []string
			for _, e := range l {
				s = append(s, fmt.Sprint(e))
			}
			return strings.Join(s, ", ")
		}
		return fmt.Sprint(v)
	}
	switch rec.Event {
	case graph.EventStarted:
		w.p.line(who, "started at %s (%s)", get("node"), by)
	case graph.EventAdvanced:
		w.p.line(who, "%s: %s → %s (%s)", get("node"), get("outcome"), get("to"), by)
	case graph.EventBlocked:
		w.p.line(who, "%s: blocked by %s (%s)", get("node"), get("hook"), by)
	case graph.EventParked:
		w.p.line(who, "%s: waiting for a human (%s)", get("node"), by)
	case graph.EventCompleted:
		w.p.line(who, "%s: the loop is complete (%s)", get("node"), by)
	case graph.EventSkipsDeclared:
		w.p.line(who, "skipped at phase selection: %s", get("nodes"))
	case graph.EventEscalated, graph.EventForced, "graph.link_failed", graph.EventNoEdge:
		w.p.line(who, "%s %s", rec.Event, string(rec.Line))
	}
}

// reasons explains the drop reasons the demo meets.
var reasons = map[string]string{
	"spawn-policy":       "the issue is not armed (no auto-execute label yet)",
	"self-authored":      "theloop's own comment",
	"unauthorized-actor": "sender not authorized",
	"duplicate-delivery": "already handled",
	"duplicate-content":  "the same change arrived before",
}

func explain(reason string) string {
	if e, ok := reasons[reason]; ok {
		return reason + " — " + e
	}
	return reason
}

func fieldsText(m map[string]any, keys ...string) string {
	var parts []string
	for _, k := range keys {
		if v, ok := m[k]; ok && v != nil && fmt.Sprint(v) != "" {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	return strings.Join(parts, " ")
}

// firstLine is the first line of a comment that is not a marker.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "<!--") {
			if r := []rune(l); len(r) > 110 {
				l = string(r[:110]) + "…"
			}
			return l
		}
	}
	return ""
}

// tailer follows the event log, handing each new line to fn.
type tailer struct {
	stopc chan struct{}
	done  chan struct{}
}

func startTail(path string, fn func(loop.EventRecord)) *tailer {
	t := &tailer{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(t.done)
		var off int64
		var rest []byte
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		read := func() {
			f, err := os.Open(path)
			if err != nil {
				return
			}
			defer f.Close()
			if fi, err := f.Stat(); err != nil || fi.Size() < off {
				off, rest = 0, nil // rotated
			}
			if _, err := f.Seek(off, io.SeekStart); err != nil {
				return
			}
			b, _ := io.ReadAll(bufio.NewReader(f))
			off += int64(len(b))
			b = append(rest, b...)
			for {
				i := bytes.IndexByte(b, '\n')
				if i < 0 {
					break
				}
				if rec, err := loop.ParseEventLine(b[:i]); err == nil {
					fn(rec)
				}
				b = b[i+1:]
			}
			rest = append([]byte(nil), b...)
		}
		for {
			select {
			case <-t.stopc:
				read()
				return
			case <-tick.C:
				read()
			}
		}
	}()
	return t
}

func (t *tailer) stop() {
	close(t.stopc)
	<-t.done
}

// onOutbox narrates the ticket effects loopd performed for the agent's
// claims (the session holds no credential) and keeps claim → ticket
// latencies for the summary.
func (w *world) onOutbox(rec loop.EventRecord) {
	str := func(k string) string { v, _ := rec.Get(k); s, _ := v.(string); return s }
	switch rec.Event {
	case "outbox.performed":
		v, _ := rec.Get("latency_ms")
		var f float64
		if n, ok := v.(json.Number); ok {
			f, _ = n.Float64()
		}
		w.mu.Lock()
		w.res.OutboxLatencies = append(w.res.OutboxLatencies, time.Duration(f*float64(time.Millisecond)))
		w.mu.Unlock()
		// The effects are loopd's, derived from its recompute of the claim
		// (docs/decisions.md §23); a claim may give none.
		if effects := str("effects"); effects != "" {
			w.p.line("outbox", "loopd performed %s for the agent's claim (%s) on #%d, %.0f ms after the claim", effects, str("intent"), issueNum, f)
		} else {
			w.p.line("outbox", "loopd answered the agent's %s (%s): nothing for the ticket", str("summary"), str("intent"))
		}
	case "outbox.refused":
		w.mu.Lock()
		w.res.OutboxRefused++
		w.mu.Unlock()
		w.p.line("outbox", "loopd refused an intent: %s", str("reason"))
	case "outbox.failed":
		w.p.line("outbox", "loopd could not perform %s yet: %s", str("intent"), str("error"))
	}
}
