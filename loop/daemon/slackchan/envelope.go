package slackchan

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// MaxBody bounds an Events API request (Slack's events are a few KiB).
const MaxBody = 1 << 20

// Outer event types of the Events API.
const (
	typeURLVerification = "url_verification"
	typeEventCallback   = "event_callback"
	typeAppRateLimited  = "app_rate_limited"
)

// envelope is the outer Events API payload (the same in Socket Mode's
// events_api payload), reduced to what the channel reads.
type envelope struct {
	Type      string          `json:"type"`
	Challenge string          `json:"challenge"`
	EventID   string          `json:"event_id"`
	TeamID    string          `json:"team_id"`
	Event     json.RawMessage `json:"event"`
	// Message is Event decoded when it is a message (nil otherwise).
	Message *message `json:"-"`
}

// message is a "message" event: only what a thread reply needs. An edit,
// a deletion, a bot's post or a join carries a subtype or a bot_id and is
// never a reply.
type message struct {
	Type     string `json:"type"`
	Subtype  string `json:"subtype"`
	User     string `json:"user"`
	BotID    string `json:"bot_id"`
	Text     string `json:"text"`
	Channel  string `json:"channel"`
	TS       string `json:"ts"`
	ThreadTS string `json:"thread_ts"`
}

// errMalformed: the body is not an Events API payload.
var errMalformed = errors.New("malformed Slack event")

// parseEnvelope reads an Events API body. It never panics; what it does not
// understand is an error naming the part, or a nil Message for an inner
// event the channel ignores.
func parseEnvelope(body []byte) (envelope, error) {
	var e envelope
	if len(body) > MaxBody {
		return e, fmt.Errorf("%w: longer than %d bytes", errMalformed, MaxBody)
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return envelope{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	switch e.Type {
	case typeURLVerification:
		if e.Challenge == "" {
			return envelope{}, fmt.Errorf("%w: url_verification without a challenge", errMalformed)
		}
	case typeEventCallback:
		if e.EventID == "" || !printableID(e.EventID) {
			return envelope{}, fmt.Errorf("%w: event_callback without a usable event_id", errMalformed)
		}
		var probe struct {
			Type string `json:"type"`
		}
		if len(e.Event) == 0 || json.Unmarshal(e.Event, &probe) != nil {
			return envelope{}, fmt.Errorf("%w: event_callback without an event object", errMalformed)
		}
		if probe.Type == "message" {
			var m message
			if err := json.Unmarshal(e.Event, &m); err != nil {
				return envelope{}, fmt.Errorf("%w: message event: %v", errMalformed, err)
			}
			e.Message = &m
		}
	case typeAppRateLimited:
	default:
		return envelope{}, fmt.Errorf("%w: unknown type %q", errMalformed, clip(e.Type, 40))
	}
	return e, nil
}

// printableID reports whether an id from Slack is short printable ASCII
// (it is written to the ledger and the log).
func printableID(s string) bool {
	if len(s) > 128 {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r > '~' {
			return false
		}
	}
	return true
}

// threadReply reports whether m is a person's reply inside a thread (not
// the thread's parent, not an edit, not a bot).
func (m *message) threadReply() bool {
	return m != nil && m.Type == "message" && m.Subtype == "" && m.BotID == "" && m.User != "" &&
		m.ThreadTS != "" && m.ThreadTS != m.TS && strings.TrimSpace(m.Text) != ""
}
