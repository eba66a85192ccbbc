package apiserver

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
)

// Stream fans the daemon's events out to live subscribers (GET
// /events/stream, server-sent events). It is a graph.Sink: the daemon adds
// it beside the event log. A subscriber that cannot keep up loses events
// (it is told with a "desync" frame) rather than slowing the daemon.
type Stream struct {
	source    string
	max       int
	keepAlive time.Duration

	mu   sync.Mutex
	subs map[*subscriber]struct{}
	seq  uint64
}

type subscriber struct {
	workItem string
	ch       chan frame
	dropped  bool
}

type frame struct {
	id   uint64
	line []byte
}

// StreamConfig tunes a Stream (service.stream.*).
type StreamConfig struct {
	// Source is the event-log source name put on each line (default loopd).
	Source string
	// MaxSubscribers bounds concurrent streams (default 8); beyond it the
	// request is answered 503 with Retry-After.
	MaxSubscribers int
	// KeepAlive is the interval of comment frames (default 15 s).
	KeepAlive time.Duration
}

// NewStream builds a Stream.
func NewStream(cfg StreamConfig) *Stream {
	if cfg.Source == "" {
		cfg.Source = "loopd"
	}
	if cfg.MaxSubscribers <= 0 {
		cfg.MaxSubscribers = 8
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	return &Stream{source: cfg.Source, max: cfg.MaxSubscribers, keepAlive: cfg.KeepAlive, subs: map[*subscriber]struct{}{}}
}

var _ graph.Sink = (*Stream)(nil)

// Emit implements graph.Sink; it never blocks.
func (s *Stream) Emit(e graph.LogEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.subs) == 0 {
		return
	}
	s.seq++
	f := frame{id: s.seq, line: loop.FormatEventLine(s.source, os.Getpid(), e)}
	rec := loop.EventRecord{Time: e.Time, Event: e.Name, Level: e.Level, Fields: e.Fields}
	for sub := range s.subs {
		if sub.workItem != "" && !(loop.EventQuery{WorkItem: sub.workItem}).Match(rec) {
			continue
		}
		select {
		case sub.ch <- f:
		default:
			sub.dropped = true
		}
	}
}

// Subscribers reports the live subscriber count.
func (s *Stream) Subscribers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs)
}

func (s *Stream) subscribe(workItem string) (*subscriber, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.subs) >= s.max {
		return nil, false
	}
	sub := &subscriber{workItem: workItem, ch: make(chan frame, 256)}
	s.subs[sub] = struct{}{}
	return sub, true
}

func (s *Stream) unsubscribe(sub *subscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.subs, sub)
}

func (s *Stream) takeDropped(sub *subscriber) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := sub.dropped
	sub.dropped = false
	return d
}

// stream serves text/event-stream: one "log" event per event-log line,
// "desync" when frames were dropped, a comment every keep-alive interval.
// It returns (nil, nil) having written the response itself.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) (any, error) {
	st := s.b.Stream
	if st == nil {
		http.NotFound(w, r)
		return nil, nil
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		return nil, fmt.Errorf("streaming is not supported by this connection")
	}
	sub, ok := st.subscribe(r.URL.Query().Get("workItem"))
	if !ok {
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": "too many event streams open (service.stream.maxSubscribers); retry later"})
		return nil, nil
	}
	defer st.unsubscribe(sub)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": theloop event stream\n\n")
	fl.Flush()
	tick := time.NewTicker(st.keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return nil, nil
		case <-tick.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return nil, nil
			}
			fl.Flush()
		case f := <-sub.ch:
			if st.takeDropped(sub) {
				fmt.Fprint(w, "event: desync\ndata: {\"detail\":\"events were dropped; re-read GET /api/v1/events\"}\n\n")
			}
			if _, err := fmt.Fprintf(w, "id: %s\nevent: log\ndata: %s\n\n", strconv.FormatUint(f.id, 10), f.line); err != nil {
				return nil, nil
			}
			fl.Flush()
		}
	}
}
