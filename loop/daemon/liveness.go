package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// The liveness watch (docs/daemon.md §6.8): a session whose harness died
// mid-node is brought back without waiting for someone to comment. Every
// tick it probes the tmux session of each active work item this node owns;
// a dead pane or a missing session is respawned through the one respawn
// path (sessions.Manager.Respawn: the conversation resumed where the
// harness can, else a fresh one seeded with the item's artifacts; the
// sandbox and the allowlisted environment apply as at any spawn). Respawns
// of one item are spaced by a doubling back-off and capped per window;
// past the cap the watch gives up on the item, reports it once (an event
// and a marked comment on the ticket with the escalation label) and leaves
// it alone until its session is seen live again (someone's event brought
// it back), which starts the count afresh.

// LivenessConfig tunes the liveness watch.
type LivenessConfig struct {
	// Interval between probes (default 2 s): a death is noticed within
	// Interval plus one probe.
	Interval time.Duration
	// MaxRespawns is how many respawns of one work item Window allows
	// before the watch gives up and escalates (default 3).
	MaxRespawns int
	// Window is the period MaxRespawns counts over (default 30 min).
	Window time.Duration
	// Backoff is the wait after a respawn before the next one of the same
	// item; it doubles with each respawn in the window (default 5 s).
	Backoff time.Duration
	// Label is added to the ticket when the watch gives up (default
	// loop:escalated).
	Label string
	// MaxInFlight bounds the respawns under way at once
	// (service.maxSessions; default 4): after a reboot with a thousand dead
	// sessions, a session met while every slot is taken waits for a later
	// pass.
	MaxInFlight int
	// TellBackoff is the wait after a failed escalation comment before the
	// next try; it doubles with each failure up to 30 min (default 30 s).
	TellBackoff time.Duration
	// Off turns the watch off.
	Off bool
}

// DefaultLivenessConfig is the watch as loopd runs it unless told otherwise.
func DefaultLivenessConfig() LivenessConfig {
	return LivenessConfig{Interval: 2 * time.Second, MaxRespawns: 3, Window: 30 * time.Minute, Backoff: 5 * time.Second, Label: hooks.DefaultPhaseLabelPrefix + "escalated",
		MaxInFlight: 4, TellBackoff: 30 * time.Second}
}

func (c LivenessConfig) withDefaults() LivenessConfig {
	def := DefaultLivenessConfig()
	if c.Interval <= 0 {
		c.Interval = def.Interval
	}
	if c.MaxRespawns <= 0 {
		c.MaxRespawns = def.MaxRespawns
	}
	if c.Window <= 0 {
		c.Window = def.Window
	}
	if c.Backoff < 0 {
		c.Backoff = 0
	}
	if c.Label == "" {
		c.Label = def.Label
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = def.MaxInFlight
	}
	if c.TellBackoff <= 0 {
		c.TellBackoff = def.TellBackoff
	}
	return c
}

// maxTellBackoff caps the wait between escalation comment attempts.
const maxTellBackoff = 30 * time.Minute

// livenessPrompt is pasted into the session the watch brought back. Fixed
// text: nothing from the dead pane reaches the agent.
const livenessPrompt = "Your previous session ended unexpectedly and loopd restarted it. Continue where the work stands: read the work item's artifacts; `loopctl graph status` shows where the work item stands."

// The watch's collaborators, as narrow as it uses them.
type (
	livenessRegistry interface {
		List() ([]sessions.Record, []error)
	}
	livenessProber interface {
		Probe(ctx context.Context, name string) (sessions.Liveness, error)
	}
	livenessRespawner interface {
		Respawn(ctx context.Context, item workitem.Ref, prompt string) (sessions.RespawnResult, error)
	}
)

type livenessDeps struct {
	Registry livenessRegistry
	Tmux     livenessProber
	Manager  livenessRespawner
	// Integrations posts the escalation comment and label.
	Integrations graph.Integrations
	// Owns reports whether this node owns the item (always true on a
	// single node; the item's lease in a cluster).
	Owns func(ctx context.Context, item workitem.Ref) bool
	// Assignment is the current node's assignment for the item checked
	// out in cwd ("" when unknown), added to the prompt so a fresh
	// conversation knows its work, as at a spawn.
	Assignment func(ctx context.Context, item workitem.Ref, cwd string) string
	// Rebind binds a respawned session in the item's graph state.
	Rebind func(ctx context.Context, item workitem.Ref, cwd, sessionID string)
	Clock  graph.Clock
	// Tick delivers the ticks (nil: a time.Ticker of Interval).
	Tick   func(time.Duration) (<-chan time.Time, func())
	Record func(name string, level graph.Level, fields ...graph.Field)
}

// livenessItem is what the watch remembers of one work item.
type livenessItem struct {
	respawns []time.Time // within the window
	next     time.Time   // no respawn before
	gaveUp   bool
	told     bool      // the escalation is on the ticket
	tellNext time.Time // no escalation comment attempt before
	tellFail int       // escalation comments failed in a row
}

type livenessWatch struct {
	cfg  LivenessConfig
	deps livenessDeps

	mu    sync.Mutex
	items map[string]*livenessItem

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func newLivenessWatch(cfg LivenessConfig, deps livenessDeps) (*livenessWatch, error) {
	if deps.Clock == nil {
		return nil, errors.New("daemon: the liveness watch has no clock (livenessDeps.Clock)")
	}
	if deps.Tick == nil {
		deps.Tick = func(d time.Duration) (<-chan time.Time, func()) {
			t := time.NewTicker(d)
			return t.C, t.Stop
		}
	}
	if deps.Owns == nil {
		deps.Owns = func(context.Context, workitem.Ref) bool { return true }
	}
	if deps.Record == nil {
		deps.Record = func(string, graph.Level, ...graph.Field) {}
	}
	return &livenessWatch{cfg: cfg.withDefaults(), deps: deps, items: map[string]*livenessItem{}}, nil
}

// Start runs the watch until Close. It returns at once.
func (w *livenessWatch) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan struct{})
	ticks, stop := w.deps.Tick(w.cfg.Interval)
	go func() {
		defer close(w.done)
		defer stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticks:
				w.check(ctx)
			}
		}
	}()
}

// Close stops the watch and waits for a pass under way (a respawn is
// cancelled through its context). Safe to call more than once, and on a
// watch never started.
func (w *livenessWatch) Close() error {
	w.once.Do(func() {
		if w.cancel == nil {
			return
		}
		w.cancel()
		<-w.done
	})
	return nil
}

// check is one pass over the registry.
func (w *livenessWatch) check(ctx context.Context) {
	// An unreadable record is reported by the parts that read it for an
	// event; the watch acts on the records it can read.
	recs, _ := w.deps.Registry.List()
	seen := map[string]bool{}
	// Respawns run MaxInFlight at a time; the pass waits for them, and a
	// dead session met while every slot is taken waits for a later pass.
	var respawns sync.WaitGroup
	defer respawns.Wait()
	slots := make(chan struct{}, w.cfg.MaxInFlight)
	for _, rec := range recs {
		if ctx.Err() != nil {
			return
		}
		// Paused, stopped and closed sessions stay as they are: only an
		// active one is the daemon's to keep running.
		if rec.Status != sessions.StatusActive || !w.deps.Owns(ctx, rec.Item) {
			continue
		}
		key := rec.Item.String()
		seen[key] = true
		lv, _ := w.deps.Tmux.Probe(ctx, rec.TmuxName)
		switch lv {
		case sessions.LivenessDead, sessions.LivenessAbsent:
			w.dead(ctx, rec, lv, slots, &respawns)
		case sessions.LivenessLive:
			w.mu.Lock()
			if st := w.items[key]; st != nil && st.gaveUp {
				// Someone's event brought it back: count afresh.
				delete(w.items, key)
			}
			w.mu.Unlock()
		}
		// Unknown: tmux did not answer; never respawn over it.
	}
	w.mu.Lock()
	for k := range w.items {
		if !seen[k] {
			delete(w.items, k)
		}
	}
	w.mu.Unlock()
}

// dead handles one active session found dead or absent: a respawn (in a
// slot, on a goroutine of respawns) or, past the cap, the escalation.
func (w *livenessWatch) dead(ctx context.Context, rec sessions.Record, lv sessions.Liveness, slots chan struct{}, respawns *sync.WaitGroup) {
	key := rec.Item.String()
	now := w.deps.Clock.Now()
	w.mu.Lock()
	st := w.items[key]
	if st == nil {
		st = &livenessItem{}
		w.items[key] = st
	}
	if st.gaveUp {
		// A comment that could not be posted is tried again, with a
		// doubling back-off: a GitHub outage with many dead sessions must
		// not be a call per session per tick.
		retry := !st.told && !now.Before(st.tellNext)
		w.mu.Unlock()
		if retry {
			w.tell(ctx, rec, false)
		}
		return
	}
	if now.Before(st.next) {
		w.mu.Unlock()
		return
	}
	kept := st.respawns[:0]
	for _, t := range st.respawns {
		if now.Sub(t) < w.cfg.Window {
			kept = append(kept, t)
		}
	}
	st.respawns = kept
	if len(st.respawns) >= w.cfg.MaxRespawns {
		st.gaveUp = true
		w.mu.Unlock()
		w.tell(ctx, rec, true)
		return
	}
	select {
	case slots <- struct{}{}:
	default:
		w.mu.Unlock()
		return // every slot is taken: a later pass
	}
	st.respawns = append(st.respawns, now)
	st.next = now.Add(w.cfg.Backoff << (len(st.respawns) - 1))
	attempt := len(st.respawns)
	w.mu.Unlock()
	respawns.Add(1)
	go func() {
		defer func() { <-slots; respawns.Done() }()
		w.respawn(ctx, rec, lv, attempt)
	}()
}

// respawn brings one dead session back (attempt counts this one).
func (w *livenessWatch) respawn(ctx context.Context, rec sessions.Record, lv sessions.Liveness, attempt int) {
	key := rec.Item.String()

	fields := []graph.Field{{Key: "work_item", Value: key}, {Key: "found", Value: lv.String()}, {Key: "attempt", Value: attempt},
		{Key: "previous_session_id", Value: rec.SessionID}}
	prompt := livenessPrompt
	if w.deps.Assignment != nil {
		if a := w.deps.Assignment(ctx, rec.Item, rec.Cwd); a != "" {
			prompt += "\n\nThe node you are at and its assignment:\n\n" + a
		}
	}
	res, err := w.deps.Manager.Respawn(ctx, rec.Item, prompt)
	if err != nil {
		w.deps.Record("session.liveness_respawn_failed", graph.LevelWarning, append(fields, graph.Field{Key: "error", Value: err.Error()})...)
		return
	}
	if res.Averted {
		// It was live after all (an event respawned it between the probe
		// and now, or tmux answered dead for a moment): nothing was
		// respawned, so nothing counts against the cap.
		w.mu.Lock()
		if st := w.items[key]; st != nil && len(st.respawns) > 0 {
			st.respawns = st.respawns[:len(st.respawns)-1]
			st.next = time.Time{}
		}
		w.mu.Unlock()
		w.deps.Record("session.liveness_respawn_averted", graph.LevelInfo, fields...)
		return
	}
	if res.Record.SessionID != rec.SessionID && w.deps.Rebind != nil {
		w.deps.Rebind(ctx, rec.Item, res.Record.Cwd, res.Record.SessionID)
	}
	fields = append(fields, graph.Field{Key: "resumed", Value: res.Resumed}, graph.Field{Key: "fresh_with_artifacts", Value: res.Fallback != nil},
		graph.Field{Key: "session_id", Value: res.Record.SessionID})
	w.deps.Record("session.liveness_respawned", graph.LevelWarning, fields...)
}

// tell reports an item the watch no longer respawns: the event (first,
// once), then the marked comment and the escalation label on the ticket,
// through the daemon's integrations like its other ticket comments. Until
// the comment is posted, tell runs again on each tick.
func (w *livenessWatch) tell(ctx context.Context, rec sessions.Record, first bool) {
	key := rec.Item.String()
	fields := []graph.Field{{Key: "work_item", Value: key}, {Key: "respawns", Value: w.cfg.MaxRespawns}, {Key: "window", Value: w.cfg.Window.String()}, {Key: "label", Value: w.cfg.Label}}
	if first {
		w.deps.Record("session.liveness_gave_up", graph.LevelError, fields...)
	}
	if w.deps.Integrations == nil {
		w.markTold(key)
		return
	}
	body := livenessEscalation(key, w.cfg.MaxRespawns, w.cfg.Window)
	if _, err := w.deps.Integrations.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": key, "body": hooks.Mark(body)}); err != nil {
		retry := w.tellFailed(key)
		w.deps.Record("session.liveness_escalation_failed", graph.LevelWarning, append(fields, graph.Field{Key: "error", Value: err.Error()},
			graph.Field{Key: "retry_in", Value: retry.String()})...)
		return
	}
	w.markTold(key)
	if _, err := w.deps.Integrations.Call(ctx, ops.GitHubSetLabels, map[string]any{"ref": key, "labels": []any{w.cfg.Label}}); err != nil {
		w.deps.Record("session.liveness_escalation_failed", graph.LevelWarning, append(fields, graph.Field{Key: "error", Value: "the comment was posted but label " + w.cfg.Label + " was not applied: " + err.Error()})...)
		return
	}
	w.deps.Record("session.liveness_escalated", graph.LevelInfo, fields...)
}

// tellFailed notes a failed escalation comment and returns the wait
// before the next try.
func (w *livenessWatch) tellFailed(key string) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.items[key]
	if st == nil {
		return 0
	}
	st.tellFail++
	wait := maxTellBackoff
	if st.tellFail < 20 {
		wait = min(w.cfg.TellBackoff<<(st.tellFail-1), maxTellBackoff)
	}
	st.tellNext = w.deps.Clock.Now().Add(wait)
	return wait
}

func (w *livenessWatch) markTold(key string) {
	w.mu.Lock()
	if st := w.items[key]; st != nil {
		st.told = true
	}
	w.mu.Unlock()
}

// livenessEscalation is the ticket comment when the watch gives up on
// work item ref (before the self-authored marker is added).
func livenessEscalation(ref string, n int, window time.Duration) string {
	return fmt.Sprintf("🤖 _the-loop_ — **escalated: the agent's session keeps dying** on work item `%s`.\n\n"+
		"loopd restarted it %d times within %s and stopped trying. Nothing is running for this work item now.\n\n"+
		"What you can do:\n"+
		"- **Look at why it dies**: the session's tmux pane is kept (`loopctl sessions attach %s`), and the daemon's event log has each `session.liveness_respawned`.\n"+
		"- **Reply on this ticket** once the cause is fixed: a new comment from an authorized person is a new event and starts the session again.\n"+
		"- **Stop or pause the work**: comment `the-loop stop` or `the-loop pause`.\n", ref, n, window, ref)
}
