package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/internal/panewatch"
	"github.com/theloop-dev/theloop/loop/api"
)

// Operator is implemented by a Sessions that also starts, cleans up,
// answers and reads sessions for the operator: the per-session routes
// /sessions/{ref}/{verb}. Without it those verbs answer 503.
type Operator interface {
	// StartSession and CleanupSession act as the ticket's start and cleanup
	// keywords do, for actor (the caller's authenticated identity): the
	// same authorization (actor must be an authorized user; else
	// ErrForbidden), the same record, the same path through the queue.
	StartSession(ctx context.Context, ref, actor string, noComment bool) (api.ControlResult, error)
	CleanupSession(ctx context.Context, ref, actor string, noComment bool) (api.ControlResult, error)
	// Reply pastes message into the session, marked as actor's, and
	// records it in the event log. A message carrying a control keyword is
	// refused (ErrBadRequest); so is an actor who is not an authorized
	// user (ErrForbidden). A reply never decides a gate.
	Reply(ctx context.Context, ref, actor, message string) (api.ReplyResult, error)
	// Transcript is the pane's scrollback and the harness's own transcript.
	Transcript(ctx context.Context, ref string) (api.Transcript, error)
	// Screen captures the pane's visible screen with its colours; an error
	// wrapping panewatch.ErrGone means the session is gone.
	Screen(ctx context.Context, ref string) (string, error)
}

// SessionKeeper is implemented by a Sessions that also resets, registers
// and closes sessions for the operator (POST /sessions/{ref}/reset,
// register, close). Without it those verbs answer 503.
type SessionKeeper interface {
	// ResetSession ends the item's harness and starts a fresh conversation
	// in the same node, its artifacts kept. Like start, it needs actor to be
	// an authorized user (ErrForbidden otherwise).
	ResetSession(ctx context.Context, ref, actor string, req api.ResetRequest) (api.SessionResult, error)
	// RegisterSession attaches a conversation started outside loopd to the
	// item. Like start, it needs an authorized user. A conversation or
	// checkout another item holds is refused (ErrBadRequest).
	RegisterSession(ctx context.Context, ref, actor string, req api.RegisterRequest) (api.SessionResult, error)
	// CloseSession ends the item's session and keeps its checkout and graph
	// state; like stop, the transport's identity suffices.
	CloseSession(ctx context.Context, ref, actor string, req api.CloseRequest) (api.SessionResult, error)
}

// routeSessionVerbs mounts the per-session routes. The ref is one escaped
// path segment (api.SessionPath): github%3Ao%2Fr%2342.
func (s *Server) routeSessionVerbs() {
	s.route("POST /sessions/{ref}/{verb}", s.sessionVerb)
	s.route("GET /sessions/{ref}/transcript", s.sessionTranscript)
	s.route("GET /sessions/{ref}/pane", s.sessionPane)
}

func pathRef(r *http.Request) (string, error) {
	ref := r.PathValue("ref")
	if ref == "" {
		return "", badRequest("name the work item in the path: %s", api.SessionPath("github:owner/repo#42", "…"))
	}
	return ref, nil
}

func (s *Server) operator() (Operator, error) {
	op, ok := s.b.Sessions.(Operator)
	if !ok || s.b.Sessions == nil {
		return nil, unavailable("the operator's session verbs")
	}
	return op, nil
}

// decodeOptional reads a JSON body into v; an empty body leaves v zero.
func decodeOptional(r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	err := decode(r, v)
	if err != nil && strings.Contains(err.Error(), "empty body") {
		return nil
	}
	return err
}

func (s *Server) sessionVerb(_ http.ResponseWriter, r *http.Request) (any, error) {
	ref, err := pathRef(r)
	if err != nil {
		return nil, err
	}
	verb := r.PathValue("verb")
	if verb == "reply" {
		return s.sessionReply(r, ref)
	}
	if slices.Contains(api.SessionVerbs, verb) {
		return s.sessionKeep(r, ref, verb)
	}
	if !slices.Contains(api.OperatorVerbs, verb) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, fmt.Sprintf("no verb %q: use %s, %s or reply", verb, strings.Join(api.OperatorVerbs, ", "), strings.Join(api.SessionVerbs, ", ")))
	}
	var req api.OperatorRequest
	if err := decodeOptional(r, &req); err != nil {
		return nil, err
	}
	actor, err := actorOf(r, req.Actor)
	if err != nil {
		return nil, err
	}
	switch verb {
	case "start", "cleanup":
		op, err := s.operator()
		if err != nil {
			return nil, err
		}
		if verb == "start" {
			return op.StartSession(r.Context(), ref, actor, req.NoComment)
		}
		return op.CleanupSession(r.Context(), ref, actor, req.NoComment)
	}
	if s.b.Sessions == nil {
		return nil, unavailable("the session registry")
	}
	return s.b.Sessions.ControlSession(r.Context(), ref, verb, actor, req.NoComment)
}

func (s *Server) sessionKeep(r *http.Request, ref, verb string) (any, error) {
	keeper, ok := s.b.Sessions.(SessionKeeper)
	if !ok || s.b.Sessions == nil {
		return nil, unavailable("the session verbs reset, register and close")
	}
	switch verb {
	case "reset":
		var req api.ResetRequest
		if err := decodeOptional(r, &req); err != nil {
			return nil, err
		}
		actor, err := actorOf(r, req.Actor)
		if err != nil {
			return nil, err
		}
		return keeper.ResetSession(r.Context(), ref, actor, req)
	case "register":
		var req api.RegisterRequest
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		if req.HarnessSessionID == "" || req.Cwd == "" {
			return nil, badRequest("register needs harnessSessionId (the conversation's id) and cwd (its absolute checkout)")
		}
		actor, err := actorOf(r, req.Actor)
		if err != nil {
			return nil, err
		}
		return keeper.RegisterSession(r.Context(), ref, actor, req)
	default: // close
		var req api.CloseRequest
		if err := decodeOptional(r, &req); err != nil {
			return nil, err
		}
		actor, err := actorOf(r, req.Actor)
		if err != nil {
			return nil, err
		}
		return keeper.CloseSession(r.Context(), ref, actor, req)
	}
}

func (s *Server) sessionReply(r *http.Request, ref string) (any, error) {
	op, err := s.operator()
	if err != nil {
		return nil, err
	}
	var req api.ReplyRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Message) == "" {
		return nil, badRequest("message is empty: say what the agent should hear")
	}
	if len(req.Message) > api.MaxReplyBytes {
		return nil, badRequest("message is %d bytes; at most %d", len(req.Message), api.MaxReplyBytes)
	}
	actor, err := actorOf(r, req.Actor)
	if err != nil {
		return nil, err
	}
	return op.Reply(r.Context(), ref, actor, req.Message)
}

func (s *Server) sessionTranscript(_ http.ResponseWriter, r *http.Request) (any, error) {
	ref, err := pathRef(r)
	if err != nil {
		return nil, err
	}
	op, err := s.operator()
	if err != nil {
		return nil, err
	}
	return op.Transcript(r.Context(), ref)
}

// sessionPane streams the pane's screen as text/event-stream: a "screen"
// event (api.PaneFrame) whenever it changes, polled every 100 ms while the
// stream is open and capped at panewatch.DefaultBytesPerSecond; "gone"
// when the session ends. It returns (nil, nil) having written the
// response itself.
func (s *Server) sessionPane(w http.ResponseWriter, r *http.Request) (any, error) {
	ref, err := pathRef(r)
	if err != nil {
		return nil, err
	}
	op, err := s.operator()
	if err != nil {
		return nil, err
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		return nil, fmt.Errorf("streaming is not supported by this connection")
	}
	// The first capture answers a bad ref or a missing session with an
	// ordinary error, before the stream starts.
	if _, err := op.Screen(r.Context(), ref); err != nil {
		if errors.Is(err, panewatch.ErrGone) {
			return nil, fmt.Errorf("%w: %v", ErrNotFound, err)
		}
		return nil, err
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": theloop pane stream\n\n")
	fl.Flush()
	v := &sseViewer{w: w, fl: fl, now: s.cfg.Clock.Now}
	err = panewatch.Watch(r.Context(), panewatch.Config{KeepAlive: 15 * time.Second}, func(ctx context.Context) (string, error) {
		return op.Screen(ctx, ref)
	}, v)
	if errors.Is(err, panewatch.ErrGone) {
		fmt.Fprintf(w, "event: gone\ndata: {\"detail\":%q}\n\n", err.Error())
		fl.Flush()
	}
	return nil, nil
}

type sseViewer struct {
	w   http.ResponseWriter
	fl  http.Flusher
	now func() time.Time
}

func (v *sseViewer) Frame(screen string) (int, error) {
	b, _ := json.Marshal(api.PaneFrame{Screen: screen, At: v.now().UTC()})
	n, err := fmt.Fprintf(v.w, "event: screen\ndata: %s\n\n", b)
	v.fl.Flush()
	return n, err
}

func (v *sseViewer) Idle() error {
	_, err := fmt.Fprint(v.w, ": keep-alive\n\n")
	v.fl.Flush()
	return err
}
