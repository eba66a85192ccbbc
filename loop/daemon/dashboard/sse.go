package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// coalesce is how long the hub waits after a notification for more before
// it re-reads the board: a transition emits several events at once.
const coalesce = 15 * time.Millisecond

// attentionPoll is how often an open board re-reads "needs you" without a
// notification.
const attentionPoll = 2 * time.Second

// hub turns change notifications into row updates for every connected
// event stream. One goroutine (stopped by close) re-reads the Source after
// a notification, diffs the rows against the last read and sends the
// changed ones. A subscriber that falls behind is dropped (its browser
// reconnects and the page reloads its rows).
type hub struct {
	src Source
	now func() time.Time
	log io.Writer

	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	mu   sync.Mutex
	subs map[chan []byte]struct{}
	last map[string]string // ref → row JSON
	// lastAttention is the "needs you" list last sent (attention.go).
	lastAttention string
	once          sync.Once
}

func newHub(src Source, now func() time.Time, log io.Writer) *hub {
	h := &hub{src: src, now: now, log: log, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), subs: map[chan []byte]struct{}{}}
	go h.run()
	return h
}

func (h *hub) notify(string) {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

func (h *hub) close() {
	h.once.Do(func() { close(h.stop) })
	<-h.done
	h.mu.Lock()
	for c := range h.subs {
		close(c)
		delete(h.subs, c)
	}
	h.mu.Unlock()
}

func (h *hub) subscribe() chan []byte {
	c := make(chan []byte, 256)
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.stop:
		close(c)
	default:
		h.subs[c] = struct{}{}
	}
	return c
}

func (h *hub) unsubscribe(c chan []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[c]; ok {
		delete(h.subs, c)
		close(c)
	}
}

func (h *hub) run() {
	defer close(h.done)
	// A question the agent asks is written to its checkout's event log,
	// which no notification covers: while a board is open, the list is
	// re-read every attentionPoll as well.
	poll := time.NewTicker(attentionPoll)
	defer poll.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-h.kick:
			if h.unwatched() {
				continue
			}
		case <-poll.C:
			h.mu.Lock()
			n := len(h.subs)
			h.mu.Unlock()
			if n == 0 {
				continue
			}
		}
		select {
		case <-h.stop:
			return
		case <-time.After(coalesce):
		}
		h.refresh()
	}
}

// unwatched reports whether no board is open. Then a change is not worth
// re-reading every row for (loopd notifies on each event it logs: up to
// ~60 reads of the whole board a second under webhook load, for nobody):
// the rows last sent are forgotten instead, and the next board to open
// reads them afresh (needsPrime).
func (h *hub) unwatched() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) > 0 {
		return false
	}
	h.last, h.lastAttention = nil, ""
	return true
}

// refresh re-reads the rows and broadcasts the changed ones.
func (h *hub) refresh() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	items, err := h.src.Items(ctx)
	if err != nil {
		fmt.Fprintf(h.log, "dashboard: reading the board: %v\n", err)
		return
	}
	now := h.now()
	qs := sourceWaits(ctx, h.src)
	h.mu.Lock()
	defer h.mu.Unlock()
	first := h.last == nil
	next := make(map[string]string, len(items))
	var changed [][]byte
	for _, it := range items {
		b, _ := json.Marshal(rowData(it, now))
		next[it.Ref] = string(b)
		if !first && h.last[it.Ref] != string(b) {
			changed = append(changed, b)
		}
	}
	h.last = next
	for _, b := range changed {
		msg := append(append([]byte("event: row\ndata: "), b...), '\n', '\n')
		for c := range h.subs {
			select {
			case c <- msg:
			default: // too slow: drop it; EventSource reconnects
				delete(h.subs, c)
				close(c)
			}
		}
	}
	if al := attentionEvent(attention(items, qs, now)); string(al) != h.lastAttention {
		h.lastAttention = string(al)
		h.broadcastLocked(al)
	}
}

// broadcastLocked sends one SSE frame to every subscriber (h.mu held).
func (h *hub) broadcastLocked(msg []byte) {
	for c := range h.subs {
		select {
		case c <- msg:
		default:
			delete(h.subs, c)
			close(c)
		}
	}
}

// needsPrime reports whether no board has been read yet.
func (h *hub) needsPrime() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last == nil
}

// prime records the current rows so the first notification after a page
// load sends only what changed since.
func (h *hub) prime(items []Item) {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last != nil {
		return
	}
	h.last = make(map[string]string, len(items))
	for _, it := range items {
		b, _ := json.Marshal(rowData(it, now))
		h.last[it.Ref] = string(b)
	}
}

// events is the Server-Sent Events stream of row updates.
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request, _ *session) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	if d.hub.needsPrime() {
		if items, err := d.deps.Source.Items(r.Context()); err == nil {
			d.hub.prime(items)
		}
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	c := d.hub.subscribe()
	defer d.hub.unsubscribe(c)
	_, _ = io.WriteString(w, "retry: 2000\n: connected\n\n")
	fl.Flush()
	ping := time.NewTicker(25 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case msg, ok := <-c:
			if !ok {
				return
			}
			if _, err := w.Write(msg); err != nil {
				return
			}
			fl.Flush()
		case <-ping.C:
			if _, err := io.WriteString(w, ": ping\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}
