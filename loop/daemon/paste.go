package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// Exactly once into the agent.
//
// A paste and the mark that records it cannot be written together: a crash
// between the two replayed the paste (7 of 689 events pasted twice over 20
// SIGKILLs). So every paste (an event's prompt, a spawn prompt, a pull
// request session's prompt, a node's assignment, an operator's reply) goes
// through pasteOnce:
//
//  1. its intent is written to the queue's handled bucket first — the
//     step's key (delivery id and step), the work item, the tmux session and
//     a marker derived from the key;
//  2. the text is pasted with the marker as its last line (which is also
//     what the receipt looks for: it is in no pane before);
//  3. the caller marks the step handled.
//
// A redelivery that finds the mark does nothing. One that finds an intent
// but no mark looks for the marker in the session's history (the pane's
// scrollback, and the harness's own transcript when it keeps one) before
// pasting again: found, the step is done; not found (the crash came before
// the paste, or the session is gone), it is pasted.
//
// What this cannot see: a harness that shows neither the pasted text nor a
// transcript (the check then finds nothing and pastes again, as before), and
// a crash in the milliseconds between the paste and its Enter (the text is
// found, and waits unsubmitted in the input box, where an operator sees it).

// pasteIntent is what is recorded before a paste.
type pasteIntent struct {
	Key     string    `json:"key"`
	Item    string    `json:"item"`
	Session string    `json:"session,omitempty"`
	Marker  string    `json:"marker"`
	At      time.Time `json:"at"`
}

// intentStore is the queue's record of intents (*queue.Queue).
type intentStore interface {
	PutIntent(ctx context.Context, key string, value []byte) error
	Intent(ctx context.Context, key string) ([]byte, bool, error)
}

// sessionHistory returns what a work item's session has shown: its pane's
// scrollback and, where the harness keeps one, its transcript's tail. An
// absent session is sessions.ErrSessionMissing.
type sessionHistory func(ctx context.Context, rec sessions.Record) (string, error)

// Fault points of pasteOnce (tests inject a crash there, export_test.go).
const (
	faultAfterIntent = "after-intent" // intent recorded, nothing pasted
	faultAfterPaste  = "after-paste"  // pasted, the caller's mark not written
)

// errInjectedCrash is what an injected fault returns.
var errInjectedCrash = errors.New("injected crash")

// pasteMarker is the marker line of the paste of key: short, ours, the same
// on every attempt, and found in no pane by chance.
func pasteMarker(key string) string {
	sum := sha256.Sum256([]byte("the-loop paste\x00" + key))
	return "[the-loop " + hex.EncodeToString(sum[:6]) + "]"
}

// withMarker appends the marker as the text's last line.
func withMarker(text, marker string) string {
	return strings.TrimRight(text, "\n") + "\n\n" + marker
}

// hasMarker reports whether history shows marker (whitespace runs squashed,
// as a terminal renders them).
func hasMarker(history, marker string) bool {
	return strings.Contains(strings.Join(strings.Fields(history), " "), marker)
}

// pasteOnce pastes text (with its marker) through paste unless the step
// key's intent is already recorded and the marker is in rec's history. It
// reports whether it pasted; the caller marks the step handled either way.
// The text given to paste is the text as pasted (what to observe).
func (in *intake) pasteOnce(ctx context.Context, item workitem.Ref, rec sessions.Record, key, text string, paste func(text string) error) (pasted bool, err error) {
	marker := pasteMarker(key)
	full := withMarker(text, marker)
	if in.intents == nil {
		return true, paste(full)
	}
	raw, found, err := in.intents.Intent(ctx, key)
	if err != nil {
		return false, err
	}
	if found {
		var prev pasteIntent
		if json.Unmarshal(raw, &prev) == nil && prev.Marker != "" {
			marker = prev.Marker
		}
		seen, err := in.seen(ctx, rec, marker)
		if err != nil {
			return false, err
		}
		if seen {
			in.record("dispatch.paste_found", graph.LevelInfo, graph.Field{Key: "work_item", Value: item.String()},
				graph.Field{Key: "key", Value: key}, graph.Field{Key: "tmux_target", Value: rec.TmuxName}, graph.Field{Key: "marker", Value: marker})
			return false, nil
		}
	}
	b, _ := json.Marshal(pasteIntent{Key: key, Item: item.String(), Session: rec.TmuxName, Marker: marker, At: in.now().UTC()})
	if err := in.intents.PutIntent(ctx, key, b); err != nil {
		return false, err
	}
	if err := in.fault(faultAfterIntent, key); err != nil {
		return false, err
	}
	if err := paste(full); err != nil {
		return false, err
	}
	return true, in.fault(faultAfterPaste, key)
}

// seen looks for marker in rec's history. An absent session has shown
// nothing (the paste that follows respawns it); any other failure to look
// is an error, so that nothing is pasted twice on a guess.
func (in *intake) seen(ctx context.Context, rec sessions.Record, marker string) (bool, error) {
	if in.history == nil || rec.TmuxName == "" {
		return false, nil
	}
	h, err := in.history(ctx, rec)
	if errors.Is(err, sessions.ErrSessionMissing) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("looking for an earlier paste in %s: %w", rec.TmuxName, err)
	}
	return hasMarker(h, marker), nil
}

// fault runs the injected fault at point, if any.
func (in *intake) fault(point, key string) error {
	if f := in.faults.Load(); f != nil {
		return (*f)(point, key)
	}
	return nil
}

// tmuxHistory is the daemon's sessionHistory: the pane's whole scrollback,
// then the harness transcript's tail.
func tmuxHistory(tm *sessions.Tmux, claudeConfigDir func() string) sessionHistory {
	return func(ctx context.Context, rec sessions.Record) (string, error) {
		pane, err := tm.Capture(ctx, rec.TmuxName)
		if err != nil {
			return "", err
		}
		if _, tail, _, terr := sessions.HarnessTranscript(rec, claudeConfigDir()); terr == nil {
			pane += "\n" + string(tail)
		}
		return pane, nil
	}
}

// A node's assignment is pasted from inside the graph (the
// deliver-assignment hook, graphLink.deliverAssignment), while an event is
// handled: a crash after the paste and before the state that records it
// replays the event, and with it the paste. The event's delivery id rides
// on the context (withPasteStep, set by the intake) so that the assignment
// goes through pasteOnce under a key of its own: the delivery, the target
// and the text. An assignment pasted outside an event (an operator's force,
// a claim's recompute) has no step: nothing replays it, so it is pasted
// as before.

type pasteStepKey struct{}

// withPasteStep is ctx carrying the step (a delivery id) whose replay must
// not paste twice.
func withPasteStep(ctx context.Context, step string) context.Context {
	if step == "" {
		return ctx
	}
	return context.WithValue(ctx, pasteStepKey{}, step)
}

// pasteStepOf is the step ctx carries ("" for none).
func pasteStepOf(ctx context.Context) string {
	s, _ := ctx.Value(pasteStepKey{}).(string)
	return s
}

// pasteOnceFunc is intake.pasteOnce, as the graph link calls it.
type pasteOnceFunc func(ctx context.Context, item workitem.Ref, rec sessions.Record, key, text string, paste func(text string) error) (bool, error)

// assignmentKey is the step key of an assignment pasted into target while
// handling step: one key per delivery, target and text, so that a gate
// routing back to a node (a later event) pastes its assignment again.
func assignmentKey(step string, target workitem.Ref, text string) string {
	sum := sha256.Sum256([]byte(strings.TrimRight(text, "\n"))) // as pasted (withMarker)
	return step + "#assign:" + target.String() + ":" + hex.EncodeToString(sum[:8])
}

// pasteAssignment pastes an assignment into rec's session: exactly once
// per step when ctx carries one and the intake's pasteOnce is wired, else
// straight through paste. pasted is false when an earlier attempt's paste
// was found in the session (the step is done).
func (l *graphLink) pasteAssignment(ctx context.Context, target workitem.Ref, rec sessions.Record, text string, paste func(text string) error) (pasted bool, err error) {
	step := pasteStepOf(ctx)
	once := l.pasteOnce.Load()
	if step == "" || once == nil {
		return true, paste(text)
	}
	return (*once)(ctx, target, rec, assignmentKey(step, target, text), text, paste)
}

// An operator's reply is no event: nothing redelivers it, so a crash after
// its paste cannot paste it again — a retry is a new reply. It still goes
// through pasteOnce under a key of its own, so that its intent (session,
// marker) is recorded before the paste and the pane shows the marker that
// tells where it landed.

// replyKey is the step key of one reply.
func replyKey(item workitem.Ref, actor string, at time.Time, message string) string {
	sum := sha256.Sum256([]byte(actor + "\x00" + message))
	return "reply:" + item.String() + ":" + at.UTC().Format(time.RFC3339Nano) + ":" + hex.EncodeToString(sum[:8])
}
