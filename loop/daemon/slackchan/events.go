package slackchan

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"

	"github.com/slack-go/slack"

	"github.com/theloop-dev/theloop/graph"
)

// Handler serves the Events API and the slash command on one path (Slack
// may be given the same Request URL for both): every request is verified
// against the signing secret first, and a request that fails is answered
// 401 and does nothing. An event is acknowledged at once (Slack retries
// after 3 s) and handled in the background; its event_id is recorded
// first, so a retry (X-Slack-Retry-Num) or a duplicate is acknowledged and
// dropped.
func (c *Channel) Handler() http.Handler {
	return http.HandlerFunc(c.serveEvents)
}

func (c *Channel) serveEvents(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	// A request without a signature, or stamped outside the window, is
	// refused before its body is read: a stranger who reaches the port
	// makes loopd hold nothing.
	if err := precheck(r.Header, c.cfg.SigningSecret, c.deps.Now()); err != nil {
		c.record("channel.slack.rejected", graph.LevelWarning, graph.Field{Key: "remote", Value: r.RemoteAddr}, graph.Field{Key: "reason", Value: err.Error()})
		http.Error(w, "unauthorized: "+err.Error(), http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil || len(body) > MaxBody {
		http.Error(w, "request body unreadable or too large", http.StatusRequestEntityTooLarge)
		return
	}
	if err := Verify(r.Header, body, c.cfg.SigningSecret, c.deps.Now()); err != nil {
		c.record("channel.slack.rejected", graph.LevelWarning, graph.Field{Key: "remote", Value: r.RemoteAddr}, graph.Field{Key: "reason", Value: err.Error()})
		http.Error(w, "unauthorized: "+err.Error(), http.StatusUnauthorized)
		return
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct == "application/x-www-form-urlencoded" {
		c.serveSlash(w, r, body)
		return
	}
	env, err := parseEnvelope(body)
	if err != nil {
		c.record("channel.slack.malformed", graph.LevelWarning, graph.Field{Key: "error", Value: err.Error()})
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch env.Type {
	case typeURLVerification:
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, env.Challenge)
		return
	case typeAppRateLimited:
		c.record("channel.slack.rate_limited", graph.LevelWarning)
		w.WriteHeader(http.StatusOK)
		return
	}
	if !c.firstSight(env.EventID, r.Header.Get("X-Slack-Retry-Num")) {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusOK)
	if env.Message != nil {
		m := env.Message
		c.goHandle(func(ctx context.Context) { c.handleMessage(ctx, env.EventID, m) })
	}
}

// firstSight records an event id and reports whether it is new. A ledger
// that cannot be written answers "not new": the event is dropped rather
// than risk acting on it twice (Slack's retry finds the ledger healthy, or
// not, again).
func (c *Channel) firstSight(id, retry string) bool {
	fresh, err := c.st.firstSight(id, c.deps.Now())
	if err != nil {
		c.record("channel.slack.ledger_failed", graph.LevelError, graph.Field{Key: "event_id", Value: id}, graph.Field{Key: "error", Value: err.Error()})
		return false
	}
	if !fresh {
		c.record("channel.slack.duplicate", graph.LevelInfo, graph.Field{Key: "event_id", Value: id}, graph.Field{Key: "retry", Value: retry})
	}
	return fresh
}

func (c *Channel) serveSlash(w http.ResponseWriter, r *http.Request, body []byte) {
	req := r.Clone(r.Context())
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.PostForm, req.Form = nil, nil
	cmd, err := slack.SlashCommandParse(req)
	if err != nil || cmd.Command != Command {
		http.Error(w, "not a "+Command+" command", http.StatusBadRequest)
		return
	}
	text := "already handled"
	if cmd.TriggerID == "" || !printableID(cmd.TriggerID) {
		http.Error(w, "slash command without a trigger_id", http.StatusBadRequest)
		return
	}
	if c.firstSight("slash:"+cmd.TriggerID, r.Header.Get("X-Slack-Retry-Num")) {
		text = c.handleSlash(r.Context(), cmd)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"response_type": "ephemeral", "text": text})
}
