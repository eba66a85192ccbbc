package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/theloop-dev/theloop/internal/panewatch"
)

// Web terminal modes (Config.WebTerminal, routing.webTerminal.mode).
const (
	WebTerminalOff   = "off"
	WebTerminalView  = "view"
	WebTerminalReply = "reply"
)

// Panes is the agent sessions' panes as the dashboard reaches them: the
// live view reads the screen, the reply box pastes through loopd (which
// marks the text as the operator's, refuses control keywords and records
// who said what).
type Panes interface {
	// Screen returns the pane's visible screen with its SGR sequences; an
	// error wrapping panewatch.ErrGone ends the view.
	Screen(ctx context.Context, ref string) (string, error)
	// Reply pastes message into ref's session as actor ("github:<login>").
	Reply(ctx context.Context, ref, actor, message string) error
}

// ErrReplyRefused: loopd refused a reply for what it says (a control
// keyword), not for a failure. Panes implementations wrap it.
var ErrReplyRefused = errors.New("reply refused")

// Live-view limits.
const (
	// maxPaneViewers bounds the open pane streams (each polls tmux).
	maxPaneViewers = 32
	// maxReplyBytes bounds a reply typed on the page.
	maxReplyBytes = 8 << 10
)

// PaneBytesPerSecond caps one viewer's pane stream.
const PaneBytesPerSecond = panewatch.DefaultBytesPerSecond

var paneViewers atomic.Int32

// paneView is the item page's live-pane section.
type paneView struct {
	// Shown: the page has the live pane (mode view or reply, a source).
	Shown bool
	// CanReply: the reply box is offered (mode reply, an authorized
	// operator).
	CanReply bool
	// Why says why there is no reply box ("" when there is, or when the
	// mode is view and nothing needs saying).
	Why string
	// Sent and Refused report the last reply.
	Sent    bool
	Refused string
}

func (d *Dashboard) paneShown() bool {
	return d.deps.Panes != nil && (d.cfg.WebTerminal == WebTerminalView || d.cfg.WebTerminal == WebTerminalReply)
}

// canReply: the operator may answer the agent from the page — the same
// rule as the gate buttons (an operator identity on routing.authorizedUsers)
// under routing.webTerminal.mode: reply.
func (d *Dashboard) canReply(ctx context.Context, ref string) bool {
	return d.paneShown() && d.cfg.WebTerminal == WebTerminalReply && d.operatorMay(ctx, ref) == ""
}

func (d *Dashboard) paneData(ctx context.Context, ref string, q url.Values) paneView {
	v := paneView{Shown: d.paneShown(), CanReply: d.canReply(ctx, ref), Sent: q.Get("replied") == "1"}
	switch q.Get("reply-error") {
	case "keyword":
		v.Refused = "The reply carried a control keyword and was not sent: a reply talks to the agent, it never commands loopd."
	case "failed":
		v.Refused = "The reply could not be delivered (see loopd's log); the session may have ended."
	case "empty":
		v.Refused = "The reply was empty."
	}
	switch {
	case !v.Shown || v.CanReply:
	case d.cfg.WebTerminal != WebTerminalReply:
		v.Why = "Read-only view (routing.webTerminal.mode: view)."
	case d.cfg.Operator == "":
		v.Why = "No operator identity is configured (loopd run --dashboard-operator), so there is no reply box."
	default:
		v.Why = fmt.Sprintf("You are signed in as %s, whom theloop would not let act here (%s), so there is no reply box.", d.cfg.Operator, d.operatorMay(ctx, ref))
	}
	return v
}

// paneFrame is one SSE "screen" event: the row count and the rows that
// changed since the last frame (all of them in the first).
type paneFrame struct {
	Rows int               `json:"rows"`
	Set  map[string][]span `json:"set"`
}

// paneViewer encodes a Watch's screens as row diffs on an SSE stream.
type paneViewer struct {
	w    http.ResponseWriter
	fl   http.Flusher
	last []string // each row's JSON as last sent
}

func (v *paneViewer) Frame(screen string) (int, error) {
	rows := parseScreen(screen)
	f := paneFrame{Rows: len(rows), Set: map[string][]span{}}
	next := make([]string, len(rows))
	for i, r := range rows {
		b, _ := json.Marshal(r)
		next[i] = string(b)
		if i >= len(v.last) || v.last[i] != next[i] {
			if r == nil {
				r = []span{}
			}
			f.Set[strconv.Itoa(i)] = r
		}
	}
	v.last = next
	b, _ := json.Marshal(f)
	n, err := fmt.Fprintf(v.w, "event: screen\ndata: %s\n\n", b)
	v.fl.Flush()
	return n, err
}

func (v *paneViewer) Idle() error {
	_, err := fmt.Fprint(v.w, ": keep-alive\n\n")
	v.fl.Flush()
	return err
}

// pane streams the work item's pane to the page while it is open.
func (d *Dashboard) pane(w http.ResponseWriter, r *http.Request, _ *session) {
	if !d.paneShown() {
		http.Error(w, "dashboard: the live pane is off (routing.webTerminal.mode: off)", http.StatusNotFound)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "dashboard: streaming unsupported", http.StatusInternalServerError)
		return
	}
	ref := r.URL.Query().Get("ref")
	if _, err := d.deps.Source.Detail(r.Context(), ref); err != nil {
		http.Error(w, "dashboard: no such work item", http.StatusNotFound)
		return
	}
	if paneViewers.Add(1) > maxPaneViewers {
		paneViewers.Add(-1)
		w.Header().Set("Retry-After", "10")
		http.Error(w, "dashboard: too many live panes open", http.StatusServiceUnavailable)
		return
	}
	defer paneViewers.Add(-1)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": pane\n\n")
	fl.Flush()
	err := panewatch.Watch(r.Context(), panewatch.Config{KeepAlive: 15 * time.Second, BytesPerSecond: PaneBytesPerSecond},
		func(ctx context.Context) (string, error) { return d.deps.Panes.Screen(ctx, ref) }, &paneViewer{w: w, fl: fl})
	if errors.Is(err, panewatch.ErrGone) {
		fmt.Fprint(w, "event: gone\ndata: {}\n\n")
		fl.Flush()
	}
}

// reply pastes the operator's message into the session through loopd.
// Only an authorized operator under mode reply gets here (403 otherwise,
// whatever the form says); the CSRF token and the same-origin check
// (guard) hold as for the gate buttons.
func (d *Dashboard) reply(w http.ResponseWriter, r *http.Request, ss *session) {
	if !postedForm(w, r, ss, maxReplyBytes+4096) {
		return
	}
	ref := r.PostForm.Get("ref")
	if !d.canReply(r.Context(), ref) {
		http.Error(w, "dashboard: the operator may not reply (routing.webTerminal.mode is not reply, or the operator is not allowed by routing.authorizedUsers/routing.authorized)", http.StatusForbidden)
		return
	}
	back := "/item?ref=" + url.QueryEscape(ref)
	if _, err := d.deps.Source.Detail(r.Context(), ref); err != nil {
		http.Error(w, "dashboard: no such work item", http.StatusNotFound)
		return
	}
	msg := r.PostForm.Get("message")
	if len(msg) > maxReplyBytes {
		http.Error(w, "dashboard: the reply is too long", http.StatusRequestEntityTooLarge)
		return
	}
	if strings.TrimSpace(msg) == "" {
		http.Redirect(w, r, back+"&reply-error=empty#pane-section", http.StatusSeeOther)
		return
	}
	if err := d.deps.Panes.Reply(r.Context(), ref, "github:"+d.cfg.Operator, msg); err != nil {
		fmt.Fprintf(d.deps.Log, "dashboard: %s's reply on %s: %v\n", d.cfg.Operator, ref, err)
		code := "failed"
		if errors.Is(err, ErrReplyRefused) {
			code = "keyword"
		}
		http.Redirect(w, r, back+"&reply-error="+code+"#pane-section", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, back+"&replied=1#pane-section", http.StatusSeeOther)
}

// termStyles serves the terminal palette (ansi.go).
func termStyles(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	_, _ = w.Write([]byte(termCSS))
}
