// Package slacksim is a Slack stand-in for tests: an httptest server that
// answers the Web API methods loopd's Slack channel calls (chat.postMessage,
// apps.connections.open) and serves Socket Mode's websocket, recording
// every message posted and every acknowledgement received. It also signs
// Events API requests the way Slack does. Test-only: it checks tokens for
// presence and shape, nothing more.
package slacksim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Post is one chat.postMessage or chat.postEphemeral call.
type Post struct {
	Token, Channel, Text, ThreadTS string
	// User is set for chat.postEphemeral: whom the message shows to.
	User string
	// TS is the ts the stand-in answered.
	TS string
}

// Ack is one Socket Mode acknowledgement loopd sent.
type Ack struct {
	EnvelopeID string          `json:"envelope_id"`
	Payload    json.RawMessage `json:"payload"`
}

// Server is the stand-in. Close it when done.
type Server struct {
	*httptest.Server

	mu     sync.Mutex
	posts  []Post
	seq    int
	acks   chan Ack
	conns  chan *websocket.Conn
	opened int
	// Changed is signalled (non-blocking) after every recorded post.
	changed chan struct{}
}

// New starts the stand-in.
func New() *Server {
	s := &Server{acks: make(chan Ack, 64), conns: make(chan *websocket.Conn, 4), changed: make(chan struct{}, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/chat.postMessage", s.postMessage)
	mux.HandleFunc("/api/chat.postEphemeral", s.postMessage)
	mux.HandleFunc("/api/apps.connections.open", s.connectionsOpen)
	mux.HandleFunc("/socket", s.socket)
	s.Server = httptest.NewServer(mux)
	return s
}

// APIURL is the Web API base loopd is pointed at.
func (s *Server) APIURL() string { return s.URL + "/api/" }

func bearer(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func (s *Server) postMessage(w http.ResponseWriter, r *http.Request) {
	tok := bearer(r)
	if tok == "" {
		_ = r.ParseForm()
		tok = r.Form.Get("token")
	}
	if !strings.HasPrefix(tok, "xoxb-") {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	var p Post
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		p.Channel, _ = body["channel"].(string)
		p.Text, _ = body["text"].(string)
		p.ThreadTS, _ = body["thread_ts"].(string)
	} else {
		_ = r.ParseForm()
		p.Channel, p.Text, p.ThreadTS, p.User = r.Form.Get("channel"), r.Form.Get("text"), r.Form.Get("thread_ts"), r.Form.Get("user")
	}
	if p.Channel == "" {
		writeJSON(w, map[string]any{"ok": false, "error": "channel_not_found"})
		return
	}
	s.mu.Lock()
	s.seq++
	p.Token = tok
	p.TS = fmt.Sprintf("1700000000.%06d", s.seq)
	s.posts = append(s.posts, p)
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	channel := p.Channel
	if strings.HasPrefix(channel, "#") {
		channel = "C" + strings.ToUpper(strings.TrimPrefix(channel, "#"))
	}
	writeJSON(w, map[string]any{"ok": true, "channel": channel, "ts": p.TS, "message_ts": p.TS, "message": map[string]any{"text": p.Text, "ts": p.TS}})
}

// ChannelID is the id the stand-in answers for a channel name: "#loop" →
// "CLOOP"; an id is itself.
func ChannelID(name string) string {
	if strings.HasPrefix(name, "#") {
		return "C" + strings.ToUpper(strings.TrimPrefix(name, "#"))
	}
	return name
}

func (s *Server) connectionsOpen(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(bearer(r), "xapp-") {
		writeJSON(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	s.mu.Lock()
	s.opened++
	s.mu.Unlock()
	writeJSON(w, map[string]any{"ok": true, "url": "ws" + strings.TrimPrefix(s.URL, "http") + "/socket"})
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) socket(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	_ = conn.WriteJSON(map[string]any{"type": "hello", "num_connections": 1, "connection_info": map[string]any{"app_id": "A1"}})
	s.conns <- conn
	for {
		_, b, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var a Ack
		if json.Unmarshal(b, &a) == nil && a.EnvelopeID != "" {
			s.acks <- a
		}
	}
}

// Conn waits for loopd's Socket Mode connection.
func (s *Server) Conn(timeout time.Duration) (*websocket.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("slacksim: no Socket Mode connection within %s", timeout)
	}
}

// NextAck waits for loopd's next acknowledgement.
func (s *Server) NextAck(timeout time.Duration) (Ack, error) {
	select {
	case a := <-s.acks:
		return a, nil
	case <-time.After(timeout):
		return Ack{}, fmt.Errorf("slacksim: no acknowledgement within %s", timeout)
	}
}

// Posts returns the messages posted so far.
func (s *Server) Posts() []Post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Post(nil), s.posts...)
}

// WaitPosts waits until at least n messages were posted.
func (s *Server) WaitPosts(n int, timeout time.Duration) ([]Post, error) {
	deadline := time.After(timeout)
	for {
		if p := s.Posts(); len(p) >= n {
			return p, nil
		}
		select {
		case <-s.changed:
		case <-deadline:
			return s.Posts(), fmt.Errorf("slacksim: %d messages posted, want %d", len(s.Posts()), n)
		}
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// MessageEvent is an Events API event_callback carrying a message posted
// by user in a thread.
func MessageEvent(eventID, channel, threadTS, ts, user, text string) []byte {
	b, _ := json.Marshal(map[string]any{
		"type": "event_callback", "team_id": "T1", "api_app_id": "A1", "event_id": eventID, "event_time": 1700000000,
		"event": map[string]any{"type": "message", "channel": channel, "user": user, "text": text, "ts": ts, "thread_ts": threadTS, "channel_type": "channel"},
	})
	return b
}

// SlashCommand is a /the-loop command's form body.
func SlashCommand(user, text, triggerID string) []byte {
	return []byte(url.Values{"command": {"/the-loop"}, "text": {text}, "user_id": {user}, "channel_id": {"C1"},
		"team_id": {"T1"}, "trigger_id": {triggerID}, "response_url": {"https://hooks.slack.invalid/x"}}.Encode())
}

// Sign sets Slack's signature headers on r for body, as Slack does at
// time at: v0=hex(HMAC-SHA256(secret, "v0:<unix time>:<body>")). It is
// written here independently of the channel's verifier, so the two check
// each other.
func Sign(r *http.Request, secret, body []byte, at time.Time) {
	ts := strconv.FormatInt(at.Unix(), 10)
	m := hmac.New(sha256.New, secret)
	fmt.Fprintf(m, "v0:%s:%s", ts, body)
	r.Header.Set("X-Slack-Request-Timestamp", ts)
	r.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(m.Sum(nil)))
}

// Envelope is a Socket Mode envelope of the given type around payload.
func Envelope(id, typ string, payload any, retry int) map[string]any {
	return map[string]any{"envelope_id": id, "type": typ, "payload": payload, "accepts_response_payload": typ == "slash_commands", "retry_attempt": retry}
}
