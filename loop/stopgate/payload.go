package stopgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/theloop-dev/theloop/harness"
)

// Harness names the agent harness whose stop hook invoked the gate (a
// harness.Descriptor's name). It decides only the shape of the answer —
// the descriptor's Gate.Block; every harness reads exit 0 with nothing on
// stdout as "let the agent stop", so that is what every allowing verdict
// and every internal failure answers. The payload of any harness is
// understood whatever the harness.
type Harness string

// ParseHarness maps argv[1] to a registered Harness ("" → the default).
func ParseHarness(s string) (Harness, error) {
	if s == "" {
		return Harness(harness.Default().Name), nil
	}
	if harness.Known(s) {
		return Harness(s), nil
	}
	return "", fmt.Errorf("unknown harness %q: pass %s", s, harness.List(harness.Names()))
}

// descriptor is h's harness, the default for an unknown name.
func (h Harness) descriptor() *harness.Descriptor {
	if d := harness.ByName(string(h)); d != nil {
		return d
	}
	return harness.Default()
}

// MaxPayloadBytes bounds how much of stdin the gate reads. A Stop payload is
// a few hundred bytes; anything larger is cut off and parsed as far as it is
// valid (usually not at all), never buffered without limit.
const MaxPayloadBytes = 1 << 20

// Payload is what the gate uses from a harness's Stop payload. Claude Code
// sends {"session_id","transcript_path","cwd","hook_event_name":"Stop",
// "stop_hook_active"}; Cursor's stop hook sends {"conversation_id",
// "generation_id","status","loop_count","hook_event_name":"stop",
// "workspace_roots"}; the Codex CLI's Stop hook sends Claude's fields plus
// "turn_id","model","permission_mode","last_assistant_message"; the Gemini
// CLI's AfterAgent hook sends {"session_id","transcript_path","cwd",
// "hook_event_name":"AfterAgent","timestamp","prompt","prompt_response",
// "stop_hook_active"}. Everything else is ignored.
type Payload struct {
	// SessionID is Claude's session_id, else Cursor's conversation_id.
	SessionID string
	// Cwd is Claude's cwd, else the first of Cursor's workspace_roots.
	Cwd string
	// Event is hook_event_name.
	Event string
	// StopHookActive is Claude's stop_hook_active: the agent is already
	// continuing because a Stop hook blocked.
	StopHookActive bool
	// Status is Cursor's status: completed, aborted or error.
	Status string
	// LoopCount is Cursor's loop_count: follow-ups already sent this turn.
	LoopCount int
}

// utf8BOM is what some harnesses (Cursor on Windows) put before the JSON.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// ErrPayload: stdin held something that is not a JSON object. The gate goes
// on without the payload (the work item may still come from the
// environment).
var ErrPayload = errors.New("stop payload is not a JSON object")

// ParsePayload reads a Stop payload. It tolerates a UTF-8 byte-order mark,
// surrounding whitespace, unknown fields and fields of an unexpected type
// (each such field is ignored on its own). Empty input is the zero Payload
// and no error. Input that is not a JSON object yields the zero Payload and
// an error wrapping ErrPayload. It never panics.
func ParsePayload(data []byte) (Payload, error) {
	if len(data) >= MaxPayloadBytes {
		// The reader stopped at the bound: what is here is a cut-off
		// document, and "unexpected end of JSON input" would hide why.
		return Payload{}, fmt.Errorf("%w: the payload is %d bytes or more (the limit; a Stop payload is a few hundred bytes), so it was not read", ErrPayload, MaxPayloadBytes)
	}
	data = bytes.TrimSpace(bytes.TrimPrefix(data, utf8BOM))
	if len(data) == 0 {
		return Payload{}, nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil || raw == nil {
		if err == nil {
			err = errors.New("null")
		}
		return Payload{}, fmt.Errorf("%w: %v", ErrPayload, err)
	}
	var p Payload
	p.SessionID = str(raw["session_id"])
	if p.SessionID == "" {
		p.SessionID = str(raw["conversation_id"])
	}
	p.Cwd = str(raw["cwd"])
	if p.Cwd == "" {
		var roots []json.RawMessage
		if json.Unmarshal(raw["workspace_roots"], &roots) == nil {
			for _, r := range roots {
				if s := str(r); s != "" {
					p.Cwd = s
					break
				}
			}
		}
	}
	p.Event = str(raw["hook_event_name"])
	p.Status = str(raw["status"])
	_ = json.Unmarshal(raw["stop_hook_active"], &p.StopHookActive)
	var n float64
	if json.Unmarshal(raw["loop_count"], &n) == nil && n >= 0 && n < 1<<31 {
		p.LoopCount = int(n)
	}
	return p, nil
}

// str decodes a JSON string, "" for anything else.
func str(m json.RawMessage) string {
	var s string
	if len(m) == 0 || json.Unmarshal(m, &s) != nil {
		return ""
	}
	return s
}
