package graph

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultLockTimeout is how long a verb waits for a work item's state lock.
const DefaultLockTimeout = 2 * time.Second

// Options are a Runtime's dependencies. Store and Items are required.
type Options struct {
	// Store persists graph-state.json.
	Store Store
	// Items resolves work item ids to their artifacts.
	Items Items
	// Sink receives events; nil discards them.
	Sink Sink
	// Clock tells the time; nil is the wall clock.
	Clock Clock
	// Config is handed to hooks (authorizedUsers, phaseLabelPrefix, ...).
	// It carries handles, never secret values.
	Config Values
	// Integrations performs outbound calls for live chains; nil makes
	// outbound hooks record a degradation.
	Integrations Integrations
	// Commands runs theloop's own programs for hooks that must (git, an
	// external markdown linter the graph declares). Never used under check.
	Commands Commands
	// RepoCommands runs the watched repository's own commands (its test
	// command, for verify-tests). Only a process that may run the
	// repository's code sets it — loopctl, inside the agent's sandbox.
	// The daemon never does: nil makes verify-tests read the recorded run
	// instead (docs/graph.md, "Tests that run"). Never used under check.
	RepoCommands Commands
	// Deliver pastes a node's assignment into the work item's session. Only
	// the daemon sets it; on the CLI path the claim envelope carries the
	// assignment.
	Deliver DeliverFunc
	// Auditor leaves the execution-log entry and ticket comment for force
	// and skip declarations; nil leaves only state and event log.
	Auditor Auditor
	// LockTimeout bounds waiting for the state lock (DefaultLockTimeout).
	LockTimeout time.Duration
	// Signer signs the decisions recorded when a human gate resolves from
	// an inbound event (docs/decisions.md §16); nil records them
	// unsigned. The daemon sets it.
	Signer DecisionSigner
	// Verifier decides whether a recorded decision counts. nil honours
	// every recorded decision as the-loop does (unverified: callers should
	// say so). With a verifier, a decision it refuses does not pass its
	// gate: Status reports the gate as a block naming why, a claim blocks,
	// and an inbound event replaces the refused record with a fresh one.
	Verifier DecisionVerifier
	// HookObserver, when set, is told each hook's wall time and status
	// (called on the chain's goroutine; it must not block).
	HookObserver func(HookTiming)
}

// Runtime walks work items through one compiled graph. It is safe for
// concurrent use; verbs that change state serialise per work item through
// the Store's lock.
//
// A Runtime owns no goroutine and holds no resource beyond its Options, so
// it needs no Close: drop it when done. Hooks run on a small process-wide
// worker pool (at most a few parked goroutines, each exiting after a while
// without work); a hook that overruns its deadline is abandoned and its
// goroutine ends when the hook returns.
type Runtime struct {
	g    *Graph
	opts Options
	sink Sink
	clk  Clock
}

// New returns a Runtime for g.
func New(g *Graph, opts Options) (*Runtime, error) {
	if g == nil {
		return nil, errors.New("graph: New needs a compiled graph")
	}
	if opts.Store == nil {
		return nil, errors.New("graph: New needs a Store (graphtest.NewStore for an in-memory one)")
	}
	if opts.Items == nil {
		return nil, errors.New("graph: New needs an Items resolver")
	}
	r := &Runtime{g: g, opts: opts, sink: opts.Sink, clk: opts.Clock}
	if r.sink == nil {
		r.sink = discardSink{}
	}
	if r.clk == nil {
		r.clk = SystemClock{}
	}
	if r.opts.LockTimeout <= 0 {
		r.opts.LockTimeout = DefaultLockTimeout
	}
	if r.opts.Config == nil {
		r.opts.Config = Values{}
	}
	return r, nil
}

// Graph returns the runtime's graph.
func (r *Runtime) Graph() *Graph { return r.g }

// session is one verb's view of a work item.
type session struct {
	wi   WorkItem
	arts Artifacts
	st   *State
	warn []string
	// now is the verb's one reading of the clock: every timestamp and event
	// of a transition carries the same instant.
	now time.Time

	// lost lists the graph's artifacts found beside a missing state.
	lost []string

	// ro is the read-only, memoising view of arts used by check chains.
	ro *readOnly
	// hookAbandoned is set when a check hook overran its deadline and was
	// left running: the bytes it borrowed are then never given back.
	hookAbandoned bool

	// verdicts memoises the verifier's answers for this verb.
	verdicts map[string]error
	// emitted is how many of st.Unlogged (a prefix) have been emitted
	// since they were saved; the next save drops them from the state.
	emitted int
	// saveFailed is set when a save of this verb failed.
	saveFailed bool
	// saves counts the saves of this verb that succeeded.
	saves int

	// stamped is now as a state timestamp, once formatted (stamp).
	stamped string
	// journalTime is now as a journal entry's time, once formatted, and
	// workItem the work item field of the verb's events, once built.
	journalTime string
	workItem    Field
	// skipGen numbers the skip sets computed for this verb (skipInfo.gen).
	skipGen uint32

	// Exit-chain inputs derived from st, computed once per skip set
	// (exitGen is the skipInfo.gen they were derived from; 0: none).
	exitGen      uint32
	decisions    map[string]Decision
	skipped      map[string]bool
	skippedNodes map[string]bool
}

func (r *Runtime) now() time.Time { return r.clk.Now() }

// stamp is the verb's instant as a state timestamp, formatted once: a
// transition stamps its exit, its decisions and its claim with the same
// string.
func (s *session) stamp() string {
	if s.stamped == "" {
		s.stamped = timestamp(s.now)
	}
	return s.stamped
}

func (r *Runtime) emit(s *session, name string, level Level, fields ...Field) {
	if _, off := r.sink.(discardSink); off {
		return
	}
	r.sink.Emit(LogEvent{Time: s.now, Name: name, Level: level, Fields: append([]Field{s.workItemField()}, fields...)})
}

// workItemField is the field naming the work item in the verb's events
// (its ref, else its id), boxed once per verb.
func (s *session) workItemField() Field {
	if s.workItem.Key == "" {
		ref := s.wi.Ref
		if ref == "" {
			ref = s.wi.ID
		}
		s.workItem = Field{"work_item", ref}
	}
	return s.workItem
}

// open resolves the work item and loads its state. Missing state is a fresh
// state; unparseable state is reconstructed by recompute with a warning
// (the Store preserves the bad bytes when it next saves).
//
// A missing state beside the graph's artifacts is work whose state was lost
// (R8.3): with reconstructMissing (Status, the report) the state is
// reconstructed by recompute with a warning; the live verbs keep treating it
// as not started, so Start still begins the walk and a claim on an item
// that never started is still refused.
func (r *Runtime) open(ctx context.Context, id string, missing missingPolicy) (*session, error) {
	wi, arts, err := r.opts.Items.Resolve(ctx, id)
	if err != nil {
		return nil, err
	}
	s := sessions.Get().(*session)
	*s = session{wi: wi, arts: arts, now: r.now()}
	st, err := r.opts.Store.Load(ctx, id)
	switch {
	case err == nil:
		s.st = st
	case errors.Is(err, ErrNoState):
		s.st = NewState(id)
		if missing == missingFresh {
			break
		}
		// Only Status asks for these policies, and a check-mode evaluation
		// follows: the stats go through its memo, so the exit chains'
		// presence checks do not ask the file system again.
		var present Artifacts
		if arts != nil {
			s.ro = &readOnly{Artifacts: arts}
			present = s.ro
		}
		if s.lost = r.producedPresent(present); len(s.lost) > 0 && missing == missingReconstruct {
			// R8.3: artifacts without a state file are work in progress
			// whose state was lost (deleted, never committed), not an item
			// that has not started.
			r.reconstruct(ctx, s)
			r.warnLost(s, s.st.CurrentNode)
		}
	case errors.Is(err, ErrCorruptState):
		s.st = NewState(id)
		r.reconstruct(ctx, s)
		// The cause says which: bad JSON, or a file over the store's size
		// cap (with its size and the cap) — the operator's next step differs.
		s.warn = append(s.warn, fmt.Sprintf("graph-state.json could not be parsed (%v); the state was reconstructed from the artifacts (current node: %s) and the unparseable file is preserved beside it", err, s.st.CurrentNode))
		r.emit(s, EventStateReconstructed, LevelWarning, Field{"node", s.st.CurrentNode}, Field{"error", err.Error()})
	default:
		return nil, err
	}
	if s.st.WorkItem == "" {
		s.st.WorkItem = id
	}
	return s, nil
}

// missingPolicy says what open does with a missing graph-state.json.
type missingPolicy int

const (
	// missingFresh: a fresh state (the live verbs: not started).
	missingFresh missingPolicy = iota
	// missingReconstruct: beside the graph's artifacts, reconstruct by
	// recompute and warn (R8.3).
	missingReconstruct
	// missingNote: only note the artifacts found (s.lost); the caller
	// recomputes anyway and warns.
	missingNote
)

// warnLost is R8.3's warning and event for a reconstructed missing state.
func (r *Runtime) warnLost(s *session, node string) {
	s.warn = append(s.warn, fmt.Sprintf("graph-state.json is missing although the spec directory holds %s; the state was reconstructed from the artifacts (current node: %s)", strings.Join(s.lost, ", "), node))
	r.emit(s, EventStateReconstructed, LevelWarning, Field{"node", node}, Field{"error", "graph-state.json is missing"})
}

// reconstruct rebuilds s.st (fresh) by recompute: the pointer goes where
// the artifacts put it.
func (r *Runtime) reconstruct(ctx context.Context, s *session) {
	rep := r.evaluateAll(ctx, s, true)
	if rep.CurrentNode != "" {
		s.st.Enter(rep.CurrentNode, s.now)
	}
	s.st.Loop = r.g.Name
}

// producedPresent lists, in declaration order, the artifacts the graph's
// nodes produce that exist in arts.
func (r *Runtime) producedPresent(arts Artifacts) []string {
	if arts == nil {
		return nil
	}
	var out []string
	for _, n := range r.g.nodes {
		for _, name := range n.ProducedNames() {
			if !fs.ValidPath(name) || slices.Contains(out, name) {
				continue
			}
			if st, err := fs.Stat(arts, name); err == nil && st.Mode().IsRegular() {
				out = append(out, name)
			}
		}
	}
	return out
}

// save persists the state with the events journaled since the last save,
// then emits those events (state first, then the event that reports it).
// Events emitted by an earlier save are dropped from the state as it is
// written.
func (r *Runtime) save(ctx context.Context, s *session) error {
	return r.saveAs(ctx, s, false)
}

// saveProvisionally is save for a state whose loss in a crash leaves a
// valid one behind (see ProvisionalStore); with a store that cannot, it is
// save. It must not persist a transition whose event it then emits.
func (r *Runtime) saveProvisionally(ctx context.Context, s *session) error {
	return r.saveAs(ctx, s, true)
}

func (r *Runtime) saveAs(ctx context.Context, s *session, provisional bool) error {
	kept := s.st.Unlogged
	s.st.Unlogged = kept[s.emitted:]
	if len(s.st.Unlogged) == 0 {
		s.st.Unlogged = nil
	}
	store := r.opts.Store.Save
	if ps, ok := r.opts.Store.(ProvisionalStore); ok && provisional && len(s.st.Unlogged) == 0 {
		store = ps.SaveProvisional
	}
	if err := store(ctx, s.st.WorkItem, s.st); err != nil {
		s.st.Unlogged = kept
		s.saveFailed = true
		return fmt.Errorf("saving graph state of %s: %w", s.st.WorkItem, err)
	}
	for _, e := range s.st.Unlogged {
		r.emitJournal(s, e, false)
	}
	s.emitted = len(s.st.Unlogged)
	s.saves++
	return nil
}

// logging reports whether events go anywhere.
func (r *Runtime) logging() bool {
	_, off := r.sink.(discardSink)
	return !off
}

// journal records the event reporting a transition in the state itself, so
// that the save which persists the transition persists its event too; flush
// emits it once saved. Without a sink it is an ordinary (discarded) event;
// hot paths ask r.logging() first, so that without a sink not even the
// fields (strings boxed into interfaces) are built.
func (r *Runtime) journal(s *session, name string, level Level, fields ...Field) {
	if !r.logging() {
		return
	}
	s.st.Unlogged = append(s.st.Unlogged, r.journalEntry(s, name, level, fields...))
}

// journalEntry numbers an event of the verb (the state's Seq) without
// journaling it: for an event emitted once its state is saved that may be
// lost with it (see blocked).
func (r *Runtime) journalEntry(s *session, name string, level Level, fields ...Field) JournalEntry {
	s.st.Seq++
	if s.journalTime == "" {
		s.journalTime = s.now.UTC().Format(time.RFC3339Nano)
	}
	e := JournalEntry{Seq: s.st.Seq, Time: s.journalTime, Name: name, Level: level, Fields: make([]JournalField, len(fields))}
	for i, f := range fields {
		e.Fields[i] = JournalField(f)
	}
	return e
}

func (r *Runtime) emitJournal(s *session, e JournalEntry, relogged bool) {
	// One slice: the work item, the entry's fields, seq (and relogged).
	fields := make([]Field, 0, len(e.Fields)+3)
	fields = append(fields, s.workItemField())
	for _, f := range e.Fields {
		fields = append(fields, Field(f))
	}
	fields = append(fields, Field{"seq", e.Seq})
	if relogged {
		fields = append(fields, Field{"relogged", true})
	}
	var at time.Time
	if e.Time != "" && e.Time == s.journalTime {
		// Journaled by this verb: the instant it was formatted from, as
		// parsing the text back would give it (UTC, no monotonic reading).
		at = s.now.UTC()
	} else if t, err := time.Parse(time.RFC3339Nano, e.Time); err == nil {
		at = t
	} else {
		at = s.now
	}
	r.sink.Emit(LogEvent{Time: at, Name: e.Name, Level: e.Level, Fields: fields})
}

// flush ends a verb: the state is saved once more without the events its
// saves already emitted. Events journaled after the last save (a verb that
// failed before saving its transition) are dropped with the transition. A
// crash before this save leaves the emitted events in the state, to be
// emitted again, marked relogged, by the next locked verb: at least once,
// never before the state they report.
func (r *Runtime) flush(ctx context.Context, s *session) {
	// After a failed save the state in memory holds a transition that was
	// neither saved nor logged: it must not be saved now.
	if s.emitted == 0 || s.saveFailed {
		return
	}
	s.st.Unlogged = s.st.Unlogged[:s.emitted]
	_ = r.saveProvisionally(ctx, s)
}

// relog emits the events a killed verb saved but may not have logged, and
// clears them (under the lock).
func (r *Runtime) relog(ctx context.Context, s *session) {
	if len(s.st.Unlogged) == 0 || !r.logging() {
		return
	}
	for _, e := range s.st.Unlogged {
		r.emitJournal(s, e, true)
	}
	s.emitted = len(s.st.Unlogged)
}

func (r *Runtime) lock(ctx context.Context, id string) (func(), error) {
	unlock, err := r.opts.Store.Lock(ctx, id, r.opts.LockTimeout)
	if err != nil {
		return nil, err
	}
	return unlock, nil
}

// openLocked takes the work item's lock and loads its state, first logging
// any transition a killed verb saved without logging; the caller must defer
// r.done(ctx, s, unlock) when it returns no error.
func (r *Runtime) openLocked(ctx context.Context, id string) (s *session, unlock func(), err error) {
	unlock, err = r.lock(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if s, err = r.open(ctx, id, missingFresh); err != nil {
		unlock()
		return nil, nil, err
	}
	r.relog(ctx, s)
	return s, unlock, nil
}

// done ends a locked verb: it flushes the journal, then releases the lock
// and recycles s, which the verb must not use after.
func (r *Runtime) done(ctx context.Context, s *session, unlock func()) {
	r.flush(ctx, s)
	unlock()
	*s = session{}
	sessions.Put(s)
}

// sessions recycles the sessions of locked verbs (done). Nothing a verb
// returns or hands to a hook points into its session — reports copy its
// warnings, hook contexts hold the state, artifacts and maps it refers to,
// not the session itself — so a session is free once its verb is done.
var sessions = sync.Pool{New: func() any { return new(session) }}

// BindSession records the agent session serving the work item (the daemon
// calls it on spawn, and with alive=false when the session closes).
func (r *Runtime) BindSession(ctx context.Context, id string, b SessionBinding) error {
	s, unlock, err := r.openLocked(ctx, id)
	if err != nil {
		return err
	}
	defer r.done(ctx, s, unlock)
	s.st.Session = &b
	return r.save(ctx, s)
}
