package apiserver

import (
	"github.com/theloop-dev/theloop/loop/api"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/httpstatus"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// maxBody bounds a request body (the verbs take a few short fields).
const maxBody = 64 << 10

// Sessions is the running daemon's session registry and controls.
type Sessions interface {
	// ListSessions returns every session record (status "" = all).
	ListSessions(ctx context.Context, status string) ([]sessions.Record, error)
	// Session returns one work item's record (ErrNotFound when none).
	Session(ctx context.Context, ref string) (sessions.Record, error)
	// ControlSession applies stop, pause or resume for actor, recording it
	// (source cli) before the effect, and unless noComment announces it on
	// the work item; it returns what happened.
	ControlSession(ctx context.Context, ref, verb, actor string, noComment bool) (api.ControlResult, error)
	// AttachCommand is the shell command that attaches to the session.
	AttachCommand(ctx context.Context, ref string) (string, error)
}

// PRLinker is implemented by a Sessions that links pull requests to work
// items (POST /sessions/link-pr, docs/daemon.md §6.7): a linked PR's events
// reach the work item's session even when nothing in them names it.
type PRLinker interface {
	// LinkPR links pullRequest ("#5", "5" or a full ref) to the live session
	// of the work item ref.
	LinkPR(ctx context.Context, ref, pullRequest string) (api.LinkPRResult, error)
}

// Queue is the running daemon's durable queue.
type Queue interface {
	Stats(ctx context.Context) (queue.Stats, error)
	DeadLetters(ctx context.Context) ([]queue.DeadLetter, error)
	Replay(ctx context.Context, seq uint64) error
}

// Backend is what the API serves. A nil part answers 503 naming it.
type Backend struct {
	// Graphs opens runtimes for the graph verbs.
	Graphs *Graphs
	// Sessions reaches the session registry.
	Sessions Sessions
	// Queue reaches the durable queue.
	Queue Queue
	// EventLogPath is the event log the events verb reads ("" = none).
	EventLogPath string
	// FlushEventLog, when set, writes the event-log lines still queued
	// (the daemon writes its log in the background); the events verb
	// calls it before it reads.
	FlushEventLog func()
	// Stream is the live event feed for /events/stream (nil = 404).
	Stream *Stream
	// Status reports the daemon (nil = 503).
	Status func(ctx context.Context) api.Status
	// Health is the daemon's health (nil: ok): GET /health answers it, 200
	// when ok, else 503 with the same body.
	Health func(ctx context.Context) api.Health
	// Attention is the "needs you" list, oldest first (nil = 503).
	Attention func(ctx context.Context) ([]api.AttentionItem, error)
	// Usage is what the agent sessions spent (nil = 503; usage.go).
	Usage func(ctx context.Context, q api.UsageQuery) (api.UsageReport, error)
	// Restart schedules a graceful restart for actor (the caller's
	// authenticated identity), upgrading the plugin first when withUpgrade
	// (nil = 503).
	Restart func(ctx context.Context, actor string, withUpgrade bool) (api.RestartResult, error)
	// WorkItems lists the work items loopd knows, as its board shows them
	// (nil = 503).
	WorkItems func(ctx context.Context) ([]api.WorkItem, error)
}

// Config tunes the API.
type Config struct {
	// Log receives one debug line per request (nil: discarded).
	Log *slog.Logger
	// Clock is used for --since (required).
	Clock graph.Clock
	// Observe, when set, sees every request's route, status and duration
	// (the metrics package counts them).
	Observe func(route string, status int, d time.Duration)
}

// Server serves /api/v1. It owns no goroutines: the caller's http.Server
// does the serving.
type Server struct {
	cfg Config
	b   Backend
	mux *http.ServeMux
}

// Errors callers (and Backend implementations) use.
var (
	// ErrNotFound: no such session, work item or dead letter (404).
	ErrNotFound = errors.New("not found")
	// ErrBadRequest: the request is malformed or refused (400).
	ErrBadRequest = errors.New("bad request")
	// ErrTryLater: something the answer depends on could not be asked
	// now (GitHub, for an authorization rule); nothing was done (503).
	ErrTryLater = errors.New("try again later")
)

// New builds the API over b. cfg.Clock is required.
func New(cfg Config, b Backend) (*Server, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		return nil, errors.New("apiserver: no clock (Config.Clock)")
	}
	s := &Server{cfg: cfg, b: b, mux: http.NewServeMux()}
	s.route("GET /health", s.health)
	s.route("GET /status", s.status)
	s.route("POST /check", s.check)
	s.route("GET /graph", s.graphShow)
	s.route("POST /graph/status", graphVerb(s, (*Graphs).Status))
	s.route("POST /graph/complete", graphVerb(s, (*Graphs).Complete))
	s.route("POST /graph/advance", graphVerb(s, (*Graphs).Advance))
	s.route("POST /graph/force", operatorGraphVerb(s, (*Graphs).Force, func(r *api.ForceRequest) *string { return &r.Actor }))
	s.route("POST /graph/skip", operatorGraphVerb(s, (*Graphs).Skip, func(r *api.SkipRequest) *string { return &r.Actor }))
	s.route("GET /sessions", s.sessionsList)
	s.route("GET /sessions/one", s.sessionsOne)
	s.route("POST /sessions/control", s.sessionsControl)
	s.route("GET /sessions/attach", s.sessionsAttach)
	s.route("POST /sessions/link-pr", s.sessionsLinkPR)
	s.route("GET /events", s.events)
	s.route("GET /events/stream", s.stream)
	s.route("GET "+api.AttentionPath, s.attention)
	s.route("GET "+api.UsagePath, s.usage) // usage.go
	s.route("POST "+api.RestartPath, s.restart)
	s.route("GET /queue", s.queueStats)
	s.route("GET /queue/dead", s.queueDead)
	s.route("POST /queue/dead/replay", s.queueReplay)
	s.routeSessionVerbs() // sessionverbs.go
	s.routeReads()        // repo.go
	return s, nil
}

// restart is POST /restart: an operator's verb, taken under the caller's
// authenticated identity as stop is.
func (s *Server) restart(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.b.Restart == nil {
		return nil, unavailable("restart")
	}
	var req api.RestartRequest
	if err := decodeOptional(r, &req); err != nil {
		return nil, err
	}
	actor, err := actorOf(r, req.Actor)
	if err != nil {
		return nil, err
	}
	return s.b.Restart(r.Context(), actor, req.WithUpgrade)
}

// ServeHTTP serves paths under api.Prefix (the caller mounts it there).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

type apiHandler func(w http.ResponseWriter, r *http.Request) (any, error)

func (s *Server) route(pattern string, h apiHandler) {
	method, path, _ := strings.Cut(pattern, " ")
	s.mux.HandleFunc(method+" "+api.Prefix+path, func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &httpstatus.Writer{ResponseWriter: w}
		r.Body = http.MaxBytesReader(sw, r.Body, maxBody)
		v, err := h(sw, r)
		switch {
		case err != nil:
			writeError(sw, err)
		case v != nil:
			writeJSON(sw, http.StatusOK, v)
		}
		d := time.Since(start)
		s.cfg.Log.Debug("api request", "method", r.Method, "path", r.URL.Path, "status", sw.Status, "duration", d)
		if s.cfg.Observe != nil {
			s.cfg.Observe(path, sw.Status, d)
		}
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// unavailable names a part that is not running.
type unavailable string

func (u unavailable) Error() string { return string(u) + " is not available in this daemon" }

func writeError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var mbe *http.MaxBytesError
	var un unavailable
	switch {
	case errors.As(err, &un), errors.Is(err, ErrTryLater):
		code = http.StatusServiceUnavailable
	case errors.Is(err, ErrNotFound), errors.Is(err, queue.ErrNotFound), errors.Is(err, sessions.ErrNoRecord), errors.Is(err, loop.ErrRepoNotFound):
		code = http.StatusNotFound
	case errors.As(err, &mbe):
		code = http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrForbidden):
		code = http.StatusForbidden
	case errors.Is(err, graph.ErrBusy):
		code = http.StatusConflict
	case errors.Is(err, ErrBadRequest), errors.Is(err, graph.ErrReasonRequired), errors.Is(err, graph.ErrUnknownNode),
		errors.Is(err, graph.ErrNotStarted), errors.Is(err, loop.ErrInvalidID), errors.Is(err, workitem.ErrInvalid), errors.Is(err, graph.ErrInvalidGraph):
		code = http.StatusBadRequest
	}
	writeJSON(w, code, map[string]string{"detail": err.Error()})
}

func badRequest(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadRequest, fmt.Sprintf(format, args...))
}

// decode reads a JSON body into v, refusing unknown fields (a typo must
// not silently drop an option).
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		if errors.Is(err, io.EOF) {
			return badRequest("empty body: send a JSON object")
		}
		return badRequest("body: %v", err)
	}
	return nil
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) (any, error) {
	h := api.Health{OK: true, State: api.HealthOK}
	if s.b.Health != nil {
		h = s.b.Health(r.Context())
	}
	if !h.OK {
		writeJSON(w, http.StatusServiceUnavailable, h)
		return nil, nil
	}
	return h, nil
}

func (s *Server) status(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.b.Status == nil {
		return nil, unavailable("status")
	}
	return s.b.Status(r.Context()), nil
}

// --- sessions ----------------------------------------------------------------

func (s *Server) sessionsList(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.b.Sessions == nil {
		return nil, unavailable("the session registry")
	}
	st := r.URL.Query().Get("status")
	switch sessions.Status(st) {
	case "", sessions.StatusActive, sessions.StatusPaused, sessions.StatusClosed:
	default:
		return nil, badRequest("status %q: use active, paused or closed", st)
	}
	recs, err := s.b.Sessions.ListSessions(r.Context(), st)
	if recs == nil {
		recs = []sessions.Record{}
	}
	return recs, err
}

func refParam(r *http.Request) (string, error) {
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		return "", badRequest("name the work item: ?ref=github:owner/repo#42")
	}
	return ref, nil
}

func (s *Server) sessionsOne(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.b.Sessions == nil {
		return nil, unavailable("the session registry")
	}
	ref, err := refParam(r)
	if err != nil {
		return nil, err
	}
	return s.b.Sessions.Session(r.Context(), ref)
}

func (s *Server) sessionsControl(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.b.Sessions == nil {
		return nil, unavailable("the session registry")
	}
	var req api.ControlRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Ref == "" {
		return nil, badRequest("ref is required (github:owner/repo#42)")
	}
	ok := false
	for _, v := range api.ControlVerbs {
		ok = ok || v == req.Verb
	}
	if !ok {
		return nil, badRequest("verb %q: use one of %s", req.Verb, strings.Join(api.ControlVerbs, ", "))
	}
	actor, err := actorOf(r, req.Actor)
	if err != nil {
		return nil, err
	}
	req.Actor = actor
	return s.b.Sessions.ControlSession(r.Context(), req.Ref, req.Verb, req.Actor, req.NoComment)
}

func (s *Server) sessionsLinkPR(_ http.ResponseWriter, r *http.Request) (any, error) {
	l, ok := s.b.Sessions.(PRLinker)
	if !ok {
		return nil, unavailable("linking pull requests")
	}
	var req api.LinkPRRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Ref == "" || req.PullRequest == "" {
		return nil, badRequest("ref and pullRequest are required (github:owner/repo#42, #57)")
	}
	return l.LinkPR(r.Context(), req.Ref, req.PullRequest)
}

func (s *Server) sessionsAttach(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.b.Sessions == nil {
		return nil, unavailable("the session registry")
	}
	ref, err := refParam(r)
	if err != nil {
		return nil, err
	}
	cmd, err := s.b.Sessions.AttachCommand(r.Context(), ref)
	if err != nil {
		return nil, err
	}
	return map[string]string{"ref": ref, "command": cmd}, nil
}

// --- events ----------------------------------------------------------------

func (s *Server) events(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.b.EventLogPath == "" {
		return nil, unavailable("the event log")
	}
	q := r.URL.Query()
	eq := loop.EventQuery{WorkItem: q.Get("workItem"), Event: q.Get("event"), Source: q.Get("source")}
	if v := q.Get("since"); v != "" {
		t, err := loop.ParseSince(v, s.cfg.Clock.Now())
		if err != nil {
			return nil, badRequest("%v", err)
		}
		eq.Since = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, badRequest("limit %q: a number ≥ 0", v)
		}
		eq.Limit = n
	}
	if s.b.FlushEventLog != nil {
		s.b.FlushEventLog()
	}
	recs, err := loop.ReadEvents(s.b.EventLogPath, eq)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(recs))
	for _, rec := range recs {
		out = append(out, rec.JSON())
	}
	return out, nil
}

// --- queue -----------------------------------------------------------------

// NewQueueView renders queue statistics at now.
func NewQueueView(st queue.Stats, now time.Time) *api.QueueView {
	v := &api.QueueView{Depth: st.Depth, DeadLetters: st.Dead}
	if st.Depth > 0 && !st.Oldest.IsZero() {
		o := st.Oldest.UTC()
		v.Oldest = &o
		v.OldestAge = max(0, now.Sub(o).Seconds())
	}
	return v
}

func (s *Server) queueStats(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.b.Queue == nil {
		return nil, unavailable("the queue")
	}
	st, err := s.b.Queue.Stats(r.Context())
	if err != nil {
		return nil, err
	}
	return NewQueueView(st, s.cfg.Clock.Now()), nil
}

func (s *Server) queueDead(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.b.Queue == nil {
		return nil, unavailable("the queue")
	}
	dls, err := s.b.Queue.DeadLetters(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]api.DeadLetterView, 0, len(dls))
	for _, d := range dls {
		v := api.DeadLetterView{Seq: d.Seq, DeliveryID: d.DeliveryID, OriginalSeq: d.OriginalSeq, Attempts: d.Attempts, Reason: d.Reason, At: d.At.UTC()}
		if d.Event != nil {
			v.Event, v.Action, v.Repo = d.Event.Event, d.Event.Action, d.Event.Repo
			for _, w := range d.Event.WorkItems {
				v.WorkItems = append(v.WorkItems, w.String())
			}
		}
		out = append(out, v)
	}
	return out, nil
}

func (s *Server) queueReplay(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.b.Queue == nil {
		return nil, unavailable("the queue")
	}
	var req api.ReplayRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if req.Seq == 0 {
		return nil, badRequest("seq is required: a dead letter's seq from GET %s/queue/dead", api.Prefix)
	}
	if err := s.b.Queue.Replay(r.Context(), req.Seq); err != nil {
		return nil, err
	}
	return map[string]any{"replayed": req.Seq}, nil
}

// attention answers GET /attention: what waits on a human, oldest first,
// read with the same authorization as every other read (the transport's).
// kind=K (repeatable) keeps only those kinds; an unknown kind is refused,
// naming the valid ones, so a typo never reads as "nothing needs you".
func (s *Server) attention(_ http.ResponseWriter, r *http.Request) (any, error) {
	kinds := r.URL.Query()["kind"]
	for _, k := range kinds {
		if !slices.Contains(api.AttentionKinds, k) {
			return nil, badRequest("kind %q: use one of %s", k, strings.Join(api.AttentionKinds, ", "))
		}
	}
	if s.b.Attention == nil {
		return nil, unavailable("the \"needs you\" list")
	}
	items, err := s.b.Attention(r.Context())
	if err != nil {
		return nil, err
	}
	out := make([]api.AttentionItem, 0, len(items))
	for _, it := range items {
		if len(kinds) == 0 || slices.Contains(kinds, it.Kind) {
			out = append(out, it)
		}
	}
	return out, nil
}
